// Small big-endian byte writer and bounds-checked reader for the broker's own records
// (cluster metadata, consumer offsets): Kafka's classic and compact strings, bytes, arrays and
// tagged fields, without the request codecs' zero-copy machinery. Not for the hot path.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"

namespace samsa {

class ByteWriter {
 public:
  void i8(std::int8_t v) { fixed(v); }
  void i16(std::int16_t v) { fixed(v); }
  void i32(std::int32_t v) { fixed(v); }
  void i64(std::int64_t v) { fixed(v); }
  void string(std::string_view s) {
    i16(static_cast<std::int16_t>(s.size()));
    raw(s.data(), s.size());
  }
  void nullable_string(const std::optional<std::string>& s) {
    if (!s) {
      i16(-1);
      return;
    }
    string(*s);
  }
  void bytes(std::span<const std::byte> b) {
    i32(static_cast<std::int32_t>(b.size()));
    raw(b.data(), b.size());
  }
  void raw(const void* p, std::size_t n) {
    auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // Flexible versions: unsigned varints, and lengths stored as N+1 (0: null).
  void uvarint(std::uint64_t v) {
    std::byte tmp[10];
    raw(tmp, write_uvarint64(tmp, v));
  }
  void compact_string(std::string_view s) {
    uvarint(s.size() + 1);
    raw(s.data(), s.size());
  }
  void compact_array_length(std::size_t n) { uvarint(n + 1); }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  template <class T>
  void fixed(T v) {
    std::size_t at = out_.size();
    out_.resize(at + sizeof(T));
    store_be<T>(out_.data() + at, v);
  }
  std::vector<std::byte> out_;
};

// Bounds-checked reads; the first failure is kept and every later read returns a zero value.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> b, const char* what) : b_(b), what_(what) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool at_end() const { return pos_ == b_.size(); }
  void fail(const std::string& why) {
    if (error_.empty())
      error_ = std::string(what_) + ": " + why + " at byte " + std::to_string(pos_);
    pos_ = b_.size();
  }

  std::int8_t i8() { return fixed<std::int8_t>(); }
  std::int16_t i16() { return fixed<std::int16_t>(); }
  std::int32_t i32() { return fixed<std::int32_t>(); }
  std::int64_t i64() { return fixed<std::int64_t>(); }

  std::uint32_t uvarint() {
    std::uint64_t v = 0;
    std::size_t n = read_uvarint64(b_.data() + pos_, b_.size() - pos_, v);
    if (n == 0 || n > 5 || v > UINT32_MAX) {
      fail("bad varint");
      return 0;
    }
    pos_ += n;
    return static_cast<std::uint32_t>(v);
  }

  // -1 for null.
  std::int64_t length(bool compact, bool wide) {
    std::int64_t n;
    if (compact) {
      n = static_cast<std::int64_t>(uvarint()) - 1;
    } else {
      n = wide ? i32() : i16();
    }
    if (!ok()) return 0;
    if (n < -1) {
      fail("negative length");
      return 0;
    }
    if (n > static_cast<std::int64_t>(b_.size() - pos_)) {
      fail("length " + std::to_string(n) + " past the end");
      return 0;
    }
    return n;
  }

  std::optional<std::string> nullable_string(bool compact) {
    std::int64_t n = length(compact, false);
    if (n < 0) return std::nullopt;
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::string string(bool compact) {
    auto s = nullable_string(compact);
    if (!s) {
      if (ok()) fail("null string");
      return {};
    }
    return std::move(*s);
  }
  std::vector<std::byte> bytes(bool compact) {
    std::int64_t n = length(compact, true);
    if (n < 0) {
      if (ok()) fail("null bytes");
      return {};
    }
    std::vector<std::byte> out(
        b_.begin() + static_cast<std::ptrdiff_t>(pos_),
        b_.begin() + static_cast<std::ptrdiff_t>(pos_ + static_cast<std::size_t>(n)));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }
  // Element count of an array whose elements take at least min_size bytes each.
  std::int64_t array(bool compact, std::size_t min_size) {
    std::int64_t n = compact ? static_cast<std::int64_t>(uvarint()) - 1 : i32();
    if (!ok()) return 0;
    if (n < 0) {
      fail("null or negative array length");
      return 0;
    }
    if (static_cast<std::uint64_t>(n) * min_size > b_.size() - pos_) {
      fail("array of " + std::to_string(n) + " past the end");
      return 0;
    }
    return n;
  }
  // The next n bytes (empty, and failed, if fewer remain).
  std::span<const std::byte> raw(std::size_t n) {
    if (b_.size() - pos_ < n) {
      fail("truncated");
      return {};
    }
    auto out = b_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  // Flexible versions end every struct with tagged fields; none of them matters here.
  void skip_tags() {
    std::uint32_t count = uvarint();
    for (std::uint32_t i = 0; i < count && ok(); ++i) {
      uvarint();  // tag
      std::uint32_t size = uvarint();
      if (size > b_.size() - pos_) {
        fail("tagged field past the end");
        return;
      }
      pos_ += size;
    }
  }

 private:
  template <class T>
  T fixed() {
    if (b_.size() - pos_ < sizeof(T)) {
      fail("truncated");
      return T{};
    }
    T v = load_be<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }

  std::span<const std::byte> b_;
  std::size_t pos_ = 0;
  const char* what_;
  std::string error_;
};

}  // namespace samsa
