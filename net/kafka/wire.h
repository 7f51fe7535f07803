// Kafka's wire primitives: a bounds-checked Reader over a request frame and a Writer that
// builds a net::Response. The generated message codecs (net/kafka/gen/*.h) are written in
// terms of these two classes only.
//
// This library is also compiled with clang 14 against libstdc++ 12 (the fuzz build), which
// has no std::expected: errors are a DecodeError kept by the Reader instead.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "net/buffer.h"
#include "net/kafka/records.h"

namespace samsa::kafka {

using Uuid = std::array<std::uint8_t, 16>;
using Bytes = std::vector<std::byte>;

enum class DecodeError : std::uint8_t {
  none,
  truncated,            // a fixed-size value or a length runs past the end of the input
  negative_length,      // a length below -1
  length_too_large,     // a length (or element count) the remaining input cannot hold
  null_not_allowed,     // null where this version does not allow it
  varint_overflow,      // a varint longer than its type allows
  tagged_field_size,    // a known tagged field did not fill its declared size exactly
  unsupported_version,  // a version outside the message's valid versions
  unknown_api,          // an api key without a codec
  trailing_bytes,       // input left over after a complete message
  over_budget,          // decoding would allocate more than the request's allowance
};

// Memory a decode may allocate (array elements, string and bytes copies), charged as it goes;
// the request memory budget (net/memory_budget.h) sets the limit, so a small frame that
// names millions of tiny elements cannot make the broker allocate without bound.
struct DecodeAllowance {
  std::size_t limit = SIZE_MAX;
  std::size_t used = 0;
};

std::string_view decode_error_name(DecodeError e);

// Reads big-endian values, varints and length-prefixed data. The first failure is kept
// (error(), error_offset()); after it every read returns a zero value and consumes nothing,
// so decoders run straight-line code and check ok() only where they loop.
class Reader {
 public:
  Reader() = default;
  // base: offset of in[0] within the enclosing frame (for error offsets of sub-readers).
  explicit Reader(std::span<std::byte> in, std::size_t base = 0,
                  DecodeAllowance* allowance = nullptr)
      : data_(in.data()), size_(in.size()), base_(base), allowance_(allowance) {}

  bool ok() const { return error_ == DecodeError::none; }
  DecodeError error() const { return error_; }
  // Offset (in the frame) where the first error was found.
  std::size_t error_offset() const { return error_offset_; }
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return size_ - pos_; }

  void fail(DecodeError e) {
    if (error_ == DecodeError::none) {
      error_ = e;
      error_offset_ = base_ + pos_;
    }
    pos_ = size_;
  }

  std::int8_t i8() { return fixed<std::int8_t>(); }
  std::int16_t i16() { return fixed<std::int16_t>(); }
  std::int32_t i32() { return fixed<std::int32_t>(); }
  std::int64_t i64() { return fixed<std::int64_t>(); }
  std::uint16_t u16() { return fixed<std::uint16_t>(); }
  std::uint32_t u32() { return fixed<std::uint32_t>(); }
  double f64();
  bool boolean() { return fixed<std::uint8_t>() != 0; }
  void uuid(Uuid& out);

  // Unsigned LEB128 limited to 32 bits (compact lengths, tags, tagged-field sizes).
  std::uint32_t uvarint32();
  std::uint64_t uvarint64();
  std::int32_t varint32();  // zig-zag
  std::int64_t varint64();  // zig-zag

  // Length prefixes: -1 for null (only when `nullable`), otherwise a length the remaining
  // input can hold. On failure they return 0 (not -1) so callers need no extra branch.
  std::int32_t string_length(bool compact, bool nullable);
  std::int32_t bytes_length(bool compact, bool nullable);
  // Element count of an array whose elements take at least min_elem_size bytes each.
  std::int32_t array_length(bool compact, bool nullable, std::size_t min_elem_size);
  // Charges n bytes of allocation to the allowance (over it: over_budget).
  void charge(std::size_t n) {
    if (!allowance_) return;
    allowance_->used += n;
    if (allowance_->used > allowance_->limit) fail(DecodeError::over_budget);
  }
  // Charges the elements an array of count items will hold (before they are allocated).
  template <class Vec>
  bool charge_items(const Vec&, std::int32_t count) {
    if (count > 0) charge(static_cast<std::size_t>(count) * sizeof(typename Vec::value_type));
    return ok();
  }

  void string(std::string& out, bool compact);
  void nullable_string(std::optional<std::string>& out, bool compact, bool nullable);
  void bytes(Bytes& out, bool compact);
  void nullable_bytes(std::optional<Bytes>& out, bool compact, bool nullable);
  // Records are not copied: out views the input, which the caller keeps alive.
  void records(Records& out, bool compact, bool nullable);

  // The next n bytes, consumed; an empty span (and truncated) if fewer remain.
  std::span<std::byte> take(std::size_t n);
  // A reader over the next n bytes (a tagged field's value); this reader skips them.
  Reader sub(std::size_t n);
  // Adopts the error of a sub-reader obtained from sub(); a sub-reader that did not read
  // exactly its bytes is an error too.
  void end_sub(const Reader& sub);

 private:
  template <class T>
  T fixed() {
    if (size_ - pos_ < sizeof(T)) {
      fail(DecodeError::truncated);
      return T{};
    }
    T v = load_be<T>(data_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::int32_t length(bool compact, bool nullable, bool wide, std::size_t unit);
  void charge_string(std::int32_t n);

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t pos_ = 0;
  std::size_t base_ = 0;
  DecodeAllowance* allowance_ = nullptr;
  DecodeError error_ = DecodeError::none;
  std::size_t error_offset_ = 0;
};

// Encodes into a net::Response. Scalars and strings are coalesced into owned buffers that
// grow geometrically (no copying of what is already written); record pieces that are
// FileRanges become pieces of their own and are never copied. With size_prefix the output
// starts with Kafka's int32 frame size, filled in by finish().
class Writer {
 public:
  explicit Writer(bool size_prefix = true, std::size_t first_chunk = 512);
  Writer(Writer&&) = default;
  Writer& operator=(Writer&&) = default;

  void i8(std::int8_t v) { fixed(v); }
  void i16(std::int16_t v) { fixed(v); }
  void i32(std::int32_t v) { fixed(v); }
  void i64(std::int64_t v) { fixed(v); }
  void u16(std::uint16_t v) { fixed(v); }
  void u32(std::uint32_t v) { fixed(v); }
  void f64(double v);
  void boolean(bool v) { fixed<std::uint8_t>(v ? 1 : 0); }
  void uuid(const Uuid& u) { raw(u.data(), u.size()); }
  void uvarint(std::uint64_t v);
  void varint(std::int64_t v);  // zig-zag

  void raw(const void* p, std::size_t n);

  void string(std::string_view s, bool compact);
  // Null where the version allows it, else an empty string (encoding never fails).
  void nullable_string(const std::optional<std::string>& s, bool compact, bool nullable);
  void bytes(std::span<const std::byte> b, bool compact);
  void nullable_bytes(const std::optional<Bytes>& b, bool compact, bool nullable);
  void array_length(std::size_t n, bool compact);
  // A null array (or bytes, records) length; an empty one where null is not allowed.
  void null_length(bool compact, bool nullable);
  void records(const Records& r, bool compact, bool nullable);
  // A file range sent without passing through memory.
  void file(const net::FileRange& f);

  // Bytes written so far (file ranges included, size prefix included).
  std::size_t size() const { return out_.size() + static_cast<std::size_t>(cur_ - chunk_start()); }
  // Fills in the size prefix and hands over the pieces; the writer is spent afterwards.
  net::Response finish();

  // A classic (int16-length) string cannot be longer; longer ones are cut there so the frame
  // stays well-formed (Kafka would refuse to send them).
  static constexpr std::size_t kMaxClassicString = 32767;
  static std::size_t string_size(std::size_t n, bool compact) {
    return compact ? n + uvarint_size(n + 1) : 2 + (n < kMaxClassicString ? n : kMaxClassicString);
  }
  static std::size_t bytes_size(std::size_t n, bool compact) {
    return n + (compact ? uvarint_size(n + 1) : 4);
  }
  static std::size_t length_size(std::size_t n, bool compact) {
    return compact ? uvarint_size(n + 1) : 4;
  }

 private:
  template <class T>
  void fixed(T v) {
    if (static_cast<std::size_t>(end_ - cur_) >= sizeof(T)) {
      store_be<T>(cur_, v);
      cur_ += sizeof(T);
    } else {
      std::byte tmp[sizeof(T)];
      store_be<T>(tmp, v);
      raw(tmp, sizeof(T));
    }
  }
  const std::byte* chunk_start() const { return chunk_.data(); }
  void seal();
  void next_chunk(std::size_t at_least);

  net::Response out_;
  net::Buffer chunk_;
  std::byte* cur_ = nullptr;
  std::byte* end_ = nullptr;
  std::size_t next_chunk_size_;
  bool size_prefix_;
};

// The bytes a response would put on the wire, file ranges read with pread (tests, tools).
std::vector<std::byte> flatten(const net::Response& r);
// An encoded request without its 4-byte size prefix (what a forwarded frame is).
std::vector<std::byte> flatten_body(const net::Response& r);
// An encoded request (no file ranges), size prefix included, in one Buffer: what
// net::ClientConnection::send takes.
net::Buffer flatten_to_buffer(const net::Response& r);

}  // namespace samsa::kafka
