// kafka::Records — the value of a `records` field (RecordBatch bytes) without copying them.
//
// Decoded, it is a mutable view into the caller's frame buffer: the broker patches base
// offsets in place and writes those very bytes to disk, so the frame must outlive the
// decoded message. To encode, it is a list of pieces: byte spans (copied into the response
// once, when encode() runs; they must stay valid until then), owned buffers (kept alive by
// the Records, copied the same way) and net::FileRanges (stored batches, sent from the file
// without passing through the encoder or memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "net/buffer.h"

namespace samsa::kafka {

class Records {
 public:
  struct Piece {
    std::span<const std::byte> bytes;  // used when file.fd < 0
    net::FileRange file;
    std::shared_ptr<const net::Buffer> owner;  // what `bytes` points into, if owned
    bool is_file() const { return file.fd >= 0; }
    std::size_t size() const { return is_file() ? file.length : bytes.size(); }
  };

  // Null, the default of every records field.
  Records() = default;
  // Non-null, viewing `view` (possibly empty).
  explicit Records(std::span<std::byte> view) : view_(view), size_(view.size()), null_(false) {}

  bool is_null() const { return null_; }
  std::size_t size() const { return size_; }
  // The contiguous bytes a decoder found (or assign() set). Pieces added later are not in it.
  std::span<std::byte> view() const { return view_; }
  // Pieces added after the view, in order.
  const std::vector<Piece>& pieces() const { return pieces_; }
  bool has_files() const;

  void set_null() {
    view_ = {};
    pieces_.clear();
    size_ = 0;
    null_ = true;
  }
  // Non-null and empty.
  void set_empty() {
    set_null();
    null_ = false;
  }
  void assign(std::span<std::byte> view) {
    set_empty();
    view_ = view;
    size_ = view.size();
  }
  void add_bytes(std::span<const std::byte> b) {
    null_ = false;
    if (b.empty()) return;
    size_ += b.size();
    pieces_.push_back(Piece{b, {}, nullptr});
  }
  // Bytes the Records keeps alive itself (built in memory, e.g. converted batches).
  void add_owned(net::Buffer b) {
    null_ = false;
    if (b.size() == 0) return;
    auto owner = std::make_shared<const net::Buffer>(std::move(b));
    size_ += owner->size();
    pieces_.push_back(Piece{owner->span(), {}, owner});
  }
  void add_file(net::FileRange f) {
    null_ = false;
    if (f.length == 0) return;
    size_ += f.length;
    pieces_.push_back(Piece{{}, std::move(f), nullptr});
  }

  // Same null-ness and the same bytes. File ranges cannot be compared by content here; with
  // any file piece the layouts must match (same files, offsets and lengths).
  bool operator==(const Records& o) const;

 private:
  std::span<std::byte> view_;
  std::vector<Piece> pieces_;
  std::size_t size_ = 0;
  bool null_ = true;
};

}  // namespace samsa::kafka
