#include "net/kafka/wire.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

namespace samsa::kafka {

std::string_view decode_error_name(DecodeError e) {
  switch (e) {
    case DecodeError::none:
      return "none";
    case DecodeError::truncated:
      return "truncated";
    case DecodeError::negative_length:
      return "negative_length";
    case DecodeError::length_too_large:
      return "length_too_large";
    case DecodeError::null_not_allowed:
      return "null_not_allowed";
    case DecodeError::varint_overflow:
      return "varint_overflow";
    case DecodeError::tagged_field_size:
      return "tagged_field_size";
    case DecodeError::unsupported_version:
      return "unsupported_version";
    case DecodeError::unknown_api:
      return "unknown_api";
    case DecodeError::over_budget:
      return "over_budget";
    case DecodeError::trailing_bytes:
      return "trailing_bytes";
  }
  return "unknown";
}

// ---- Records ----

bool Records::has_files() const {
  for (const Piece& p : pieces_)
    if (p.is_file()) return true;
  return false;
}

bool Records::operator==(const Records& o) const {
  if (null_ != o.null_ || size_ != o.size_) return false;
  if (has_files() || o.has_files()) {
    if (view_.size() != o.view_.size() || pieces_.size() != o.pieces_.size()) return false;
    if (!std::equal(view_.begin(), view_.end(), o.view_.begin())) return false;
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& a = pieces_[i];
      const Piece& b = o.pieces_[i];
      if (a.is_file() != b.is_file()) return false;
      if (a.is_file()) {
        if (a.file.fd != b.file.fd || a.file.offset != b.file.offset ||
            a.file.length != b.file.length)
          return false;
      } else if (!std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end())) {
        return false;
      }
    }
    return true;
  }
  // Compare the two byte streams, however they are split into pieces.
  auto segments = [](const Records& r) {
    std::vector<std::span<const std::byte>> s;
    if (!r.view_.empty()) s.push_back(r.view_);
    for (const Piece& p : r.pieces_)
      s.push_back(p.bytes);
    return s;
  };
  auto a = segments(*this), b = segments(o);
  std::size_t ia = 0, ib = 0, oa = 0, ob = 0;
  while (ia < a.size() && ib < b.size()) {
    std::size_t n = std::min(a[ia].size() - oa, b[ib].size() - ob);
    if (std::memcmp(a[ia].data() + oa, b[ib].data() + ob, n) != 0) return false;
    oa += n;
    ob += n;
    if (oa == a[ia].size()) ++ia, oa = 0;
    if (ob == b[ib].size()) ++ib, ob = 0;
  }
  return true;  // sizes are equal, so both ran out together
}

// ---- Reader ----

double Reader::f64() {
  return std::bit_cast<double>(fixed<std::uint64_t>());
}

void Reader::uuid(Uuid& out) {
  if (remaining() < out.size()) {
    fail(DecodeError::truncated);
    out = Uuid{};
    return;
  }
  std::memcpy(out.data(), data_ + pos_, out.size());
  pos_ += out.size();
}

std::uint64_t Reader::uvarint64() {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < 10; ++i) {
    if (pos_ == size_) {
      fail(DecodeError::truncated);
      return 0;
    }
    auto b = static_cast<std::uint8_t>(data_[pos_++]);
    // The tenth byte may only carry the 64th bit.
    if (i == 9 && b > 1) {
      fail(DecodeError::varint_overflow);
      return 0;
    }
    v |= std::uint64_t(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) return v;
  }
  fail(DecodeError::varint_overflow);
  return 0;
}

std::uint32_t Reader::uvarint32() {
  std::uint32_t v = 0;
  for (unsigned i = 0; i < 5; ++i) {
    if (pos_ == size_) {
      fail(DecodeError::truncated);
      return 0;
    }
    auto b = static_cast<std::uint8_t>(data_[pos_++]);
    // The fifth byte carries bits 28-31 only.
    if (i == 4 && b > 0x0f) {
      fail(DecodeError::varint_overflow);
      return 0;
    }
    v |= std::uint32_t(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) return v;
  }
  fail(DecodeError::varint_overflow);
  return 0;
}

std::int32_t Reader::varint32() {
  std::uint32_t u = uvarint32();
  return static_cast<std::int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

std::int64_t Reader::varint64() {
  std::uint64_t u = uvarint64();
  return static_cast<std::int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

std::int32_t Reader::length(bool compact, bool nullable, bool wide, std::size_t unit) {
  std::int64_t n;
  if (compact) {
    std::uint32_t u = uvarint32();
    if (!ok()) return 0;
    n = static_cast<std::int64_t>(u) - 1;
  } else {
    n = wide ? i32() : i16();
    if (!ok()) return 0;
  }
  if (n == -1) {
    if (!nullable) {
      fail(DecodeError::null_not_allowed);
      return 0;
    }
    return -1;
  }
  if (n < -1) {
    fail(DecodeError::negative_length);
    return 0;
  }
  // Never trust a count beyond what the input could hold: it sizes allocations.
  if (n > std::numeric_limits<std::int32_t>::max() ||
      static_cast<std::uint64_t>(n) > remaining() / unit) {
    fail(DecodeError::length_too_large);
    return 0;
  }
  return static_cast<std::int32_t>(n);
}

std::int32_t Reader::string_length(bool compact, bool nullable) {
  return length(compact, nullable, false, 1);
}

std::int32_t Reader::bytes_length(bool compact, bool nullable) {
  return length(compact, nullable, true, 1);
}

std::int32_t Reader::array_length(bool compact, bool nullable, std::size_t min_elem_size) {
  return length(compact, nullable, true, min_elem_size ? min_elem_size : 1);
}

std::span<std::byte> Reader::take(std::size_t n) {
  if (remaining() < n) {
    fail(DecodeError::truncated);
    return {};
  }
  std::span<std::byte> s(data_ + pos_, n);
  pos_ += n;
  return s;
}

// Strings past std::string's inline capacity allocate their bytes; shorter ones cost nothing
// beyond the struct that holds them (already charged with its array).
void Reader::charge_string(std::int32_t n) {
  if (n > 15) charge(static_cast<std::size_t>(n) + 1);
}

void Reader::string(std::string& out, bool compact) {
  std::int32_t n = string_length(compact, false);
  charge_string(n);
  auto s = take(static_cast<std::size_t>(n));
  out.assign(reinterpret_cast<const char*>(s.data()), s.size());
}

void Reader::nullable_string(std::optional<std::string>& out, bool compact, bool nullable) {
  std::int32_t n = string_length(compact, nullable);
  if (n < 0) {
    out.reset();
    return;
  }
  charge_string(n);
  auto s = take(static_cast<std::size_t>(n));
  out.emplace(reinterpret_cast<const char*>(s.data()), s.size());
}

void Reader::bytes(Bytes& out, bool compact) {
  std::int32_t n = bytes_length(compact, false);
  if (n > 0) charge(static_cast<std::size_t>(n));
  auto s = take(static_cast<std::size_t>(n));
  out.assign(s.begin(), s.end());
}

void Reader::nullable_bytes(std::optional<Bytes>& out, bool compact, bool nullable) {
  std::int32_t n = bytes_length(compact, nullable);
  if (n < 0) {
    out.reset();
    return;
  }
  if (n > 0) charge(static_cast<std::size_t>(n));
  auto s = take(static_cast<std::size_t>(n));
  out.emplace(s.begin(), s.end());
}

void Reader::records(Records& out, bool compact, bool nullable) {
  std::int32_t n = bytes_length(compact, nullable);
  if (n < 0) {
    out.set_null();
    return;
  }
  out.assign(take(static_cast<std::size_t>(n)));
}

Reader Reader::sub(std::size_t n) {
  std::size_t at = base_ + pos_;
  return Reader(take(n), at, allowance_);
}

void Reader::end_sub(const Reader& sub) {
  if (!sub.ok()) {
    if (error_ == DecodeError::none) {
      error_ = sub.error_;
      error_offset_ = sub.error_offset_;
    }
    pos_ = size_;
  } else if (sub.remaining() != 0) {
    fail(DecodeError::tagged_field_size);
  }
}

// ---- Writer ----

namespace {
constexpr std::size_t kMaxChunk = 1 << 20;
// After a file piece the next bytes are usually a few dozen (the next partition's header):
// start small again rather than waste a large chunk per partition.
constexpr std::size_t kChunkAfterFile = 256;
}  // namespace

Writer::Writer(bool size_prefix, std::size_t first_chunk)
    : next_chunk_size_(std::max<std::size_t>(first_chunk, 16)), size_prefix_(size_prefix) {
  if (size_prefix_) i32(0);
}

void Writer::seal() {
  if (chunk_.data() == nullptr) return;
  std::size_t used = static_cast<std::size_t>(cur_ - chunk_.data());
  if (used) {
    chunk_.resize(used);
    out_.append(std::move(chunk_));
  }
  chunk_ = net::Buffer();
  cur_ = end_ = nullptr;
}

void Writer::next_chunk(std::size_t at_least) {
  seal();
  std::size_t n = std::max(next_chunk_size_, at_least);
  chunk_ = net::Buffer(n);
  cur_ = chunk_.data();
  end_ = cur_ + n;
  next_chunk_size_ = std::min(next_chunk_size_ * 2, kMaxChunk);
}

void Writer::raw(const void* p, std::size_t n) {
  auto src = static_cast<const std::byte*>(p);
  while (n) {
    std::size_t room = static_cast<std::size_t>(end_ - cur_);
    if (room == 0) {
      next_chunk(n);
      room = static_cast<std::size_t>(end_ - cur_);
    }
    std::size_t k = std::min(room, n);
    std::memcpy(cur_, src, k);
    cur_ += k;
    src += k;
    n -= k;
  }
}

void Writer::f64(double v) {
  fixed(std::bit_cast<std::uint64_t>(v));
}

void Writer::uvarint(std::uint64_t v) {
  std::byte tmp[10];
  raw(tmp, write_uvarint64(tmp, v));
}

void Writer::varint(std::int64_t v) {
  std::byte tmp[10];
  raw(tmp, write_varint64(tmp, v));
}

void Writer::string(std::string_view s, bool compact) {
  if (compact) {
    uvarint(s.size() + 1);
  } else {
    s = s.substr(0, kMaxClassicString);
    i16(static_cast<std::int16_t>(s.size()));
  }
  raw(s.data(), s.size());
}

void Writer::nullable_string(const std::optional<std::string>& s, bool compact, bool nullable) {
  if (s) {
    string(*s, compact);
  } else if (nullable) {
    // A classic string's null length is an int16, unlike bytes and arrays.
    if (compact)
      uvarint(0);
    else
      i16(-1);
  } else {
    string({}, compact);
  }
}

void Writer::bytes(std::span<const std::byte> b, bool compact) {
  if (compact)
    uvarint(b.size() + 1);
  else
    i32(static_cast<std::int32_t>(b.size()));
  raw(b.data(), b.size());
}

void Writer::nullable_bytes(const std::optional<Bytes>& b, bool compact, bool nullable) {
  if (b)
    bytes(*b, compact);
  else
    null_length(compact, nullable);
}

void Writer::array_length(std::size_t n, bool compact) {
  if (compact)
    uvarint(n + 1);
  else
    i32(static_cast<std::int32_t>(n));
}

void Writer::null_length(bool compact, bool nullable) {
  if (compact)
    uvarint(nullable ? 0 : 1);
  else
    i32(nullable ? -1 : 0);
}

void Writer::records(const Records& r, bool compact, bool nullable) {
  if (r.is_null()) {
    null_length(compact, nullable);
    return;
  }
  if (compact)
    uvarint(r.size() + 1);
  else
    i32(static_cast<std::int32_t>(r.size()));
  raw(r.view().data(), r.view().size());
  for (const Records::Piece& p : r.pieces()) {
    if (p.is_file())
      file(p.file);
    else
      raw(p.bytes.data(), p.bytes.size());
  }
}

void Writer::file(const net::FileRange& f) {
  if (f.length == 0) return;
  seal();
  out_.append_file(f);
  next_chunk_size_ = kChunkAfterFile;
}

net::Response Writer::finish() {
  seal();
  if (size_prefix_ && !out_.pieces().empty()) {
    // The constructor wrote the placeholder first, so it is in the first piece.
    store_be<std::int32_t>(out_.pieces().front().bytes.data(),
                           static_cast<std::int32_t>(out_.size() - 4));
  }
  net::Response r = std::move(out_);
  out_ = net::Response();
  return r;
}

std::vector<std::byte> flatten(const net::Response& r) {
  std::vector<std::byte> out;
  out.reserve(r.size());
  for (const auto& p : r.pieces()) {
    if (p.file.fd < 0) {
      out.insert(out.end(), p.bytes.data(), p.bytes.data() + p.bytes.size());
      continue;
    }
    std::size_t at = out.size();
    out.resize(at + p.file.length);
    std::size_t done = 0;
    while (done < p.file.length) {
      ssize_t k = ::pread(p.file.fd, out.data() + at + done, p.file.length - done,
                          static_cast<off_t>(p.file.offset + done));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        out.resize(at + done);  // short file: what was there
        break;
      }
      done += static_cast<std::size_t>(k);
    }
  }
  return out;
}

std::vector<std::byte> flatten_body(const net::Response& r) {
  std::vector<std::byte> out = flatten(r);
  out.erase(out.begin(), out.begin() + std::min<std::size_t>(4, out.size()));
  return out;
}

net::Buffer flatten_to_buffer(const net::Response& r) {
  net::Buffer out(r.size());
  std::size_t at = 0;
  for (const auto& p : r.pieces()) {
    std::memcpy(out.data() + at, p.bytes.data(), p.bytes.size());
    at += p.bytes.size();
  }
  return out;
}

}  // namespace samsa::kafka
