// Byte containers shared by the transports and the Kafka codecs. Header-only and free of
// io/ so the codec library stays a leaf (it is also built alone, with clang, for fuzzing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace samsa::net {

// An owned, uninitialised byte buffer (no zero-fill: frames are overwritten by recv anyway).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n)
      : data_(std::make_unique_for_overwrite<std::byte[]>(n)), size_(n), capacity_(n) {}
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::span<std::byte> span() { return {data_.get(), size_}; }
  std::span<const std::byte> span() const { return {data_.get(), size_}; }
  // Changes the visible size within the allocation.
  void resize(std::size_t n) { size_ = n <= capacity_ ? n : capacity_; }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// A byte range of an open file, sent without passing through the encoder (stored record
// batches in fetch responses). keepalive holds whatever owns fd (the segment file), so the
// range stays readable even if retention deletes the segment meanwhile.
struct FileRange {
  std::shared_ptr<const void> keepalive;
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

// A message on its way out: owned byte pieces and file ranges, in order. The transport
// prepends nothing; whoever builds it writes the 4-byte size first.
class Response {
 public:
  struct Piece {
    Buffer bytes;  // used when file.fd < 0
    FileRange file;
  };

  void append(Buffer b) {
    size_ += b.size();
    pieces_.push_back(Piece{std::move(b), {}});
  }
  void append_file(FileRange f) {
    size_ += f.length;
    pieces_.push_back(Piece{Buffer(), std::move(f)});
  }
  std::size_t size() const { return size_; }
  std::vector<Piece>& pieces() { return pieces_; }
  const std::vector<Piece>& pieces() const { return pieces_; }

 private:
  std::vector<Piece> pieces_;
  std::size_t size_ = 0;
};

}  // namespace samsa::net
