// io::OpenFiles — the segment files the logs of one reactor keep open, least recently used
// first, within a budget of descriptors (samsa.log.max.open.files, split over the reactors).
// Past the budget the least recently used files that nobody else holds (no append, sync, read,
// fetch or cleaning pass has a reference) are closed; a log opens a closed segment's file again
// when it next needs it (Log::Impl::file). So a broker with 100,000 partitions, most of them
// idle, holds descriptors for the ones in use, not one or more per partition.
//
// Thread: the reactor's (every call), like the logs it serves. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace samsa::io {

struct SegmentFile;

class OpenFiles {
 public:
  // One segment's file, open or closed: the file while open, and its place in the LRU list.
  class Handle {
   public:
    Handle() = default;
    ~Handle();
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    // The open file, or null (never opened, closed by the budget, or dropped).
    const std::shared_ptr<SegmentFile>& get() const { return file_; }
    explicit operator bool() const { return file_ != nullptr; }

   private:
    friend class OpenFiles;
    std::shared_ptr<SegmentFile> file_;
    OpenFiles* owner_ = nullptr;
    Handle* prev_ = nullptr;  // towards the most recently used
    Handle* next_ = nullptr;  // towards the least recently used
  };

  OpenFiles() = default;
  ~OpenFiles();
  OpenFiles(const OpenFiles&) = delete;
  OpenFiles& operator=(const OpenFiles&) = delete;

  // Descriptors this reactor's segment files may hold (0: no limit). At least kMinBudget,
  // so that the files one call is using are never the least recently used.
  static constexpr std::size_t kMinBudget = 16;
  void set_budget(std::size_t n);
  std::size_t budget() const { return budget_; }

  // h holds f (just opened) from now on, as the most recently used; then files past the
  // budget are closed.
  void adopt(Handle& h, std::shared_ptr<SegmentFile> f);
  // h's file was used: the most recently used now.
  void touch(Handle& h);
  // h lets its file go (its segment is gone or being replaced); readers holding it keep it.
  void drop(Handle& h);

  std::size_t open() const { return open_; }
  struct Stats {
    std::uint64_t opened = 0;   // adopt calls (first opens and reopens)
    std::uint64_t evicted = 0;  // closed by the budget
    std::uint64_t busy = 0;     // over budget, but the least recently used were in use
  };
  const Stats& stats() const { return stats_; }

 private:
  void unlink(Handle& h);
  void push_front(Handle& h);
  void shrink();

  Handle* head_ = nullptr;  // most recently used
  Handle* tail_ = nullptr;  // least recently used
  std::size_t open_ = 0;
  std::size_t budget_ = 0;
  Stats stats_;
};

}  // namespace samsa::io
