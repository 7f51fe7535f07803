#include "io/leader_epoch.h"

#include <algorithm>
#include <string>

#include "base/log.h"
#include "io/checkpoint.h"

namespace samsa::io {

Result<LeaderEpochCache> LeaderEpochCache::load(std::filesystem::path file) {
  LeaderEpochCache c;
  c.file_ = std::move(file);
  auto lines = read_checkpoint(c.file_, 2);
  if (!lines) {
    if (lines.error().code == Errc::not_found) return c;
    return std::unexpected(lines.error());
  }
  for (std::size_t i = 0; i < lines->size(); ++i) {
    const auto& f = (*lines)[i];
    EpochEntry e;
    try {
      e.epoch = std::stoi(f[0]);
      e.start_offset = std::stoll(f[1]);
    } catch (...) {
      return std::unexpected(Error{
          Errc::io_error,
          c.file_.string() + " line " + std::to_string(i + 3) + ": not \"<epoch> <offset>\""});
    }
    if (!c.entries_.empty() &&
        (e.epoch <= c.entries_.back().epoch || e.start_offset < c.entries_.back().start_offset)) {
      return std::unexpected(Error{Errc::io_error, c.file_.string() + " line " +
                                                       std::to_string(i + 3) +
                                                       ": epochs and offsets must increase"});
    }
    c.entries_.push_back(e);
  }
  return c;
}

Result<void> LeaderEpochCache::flush() {
  std::vector<std::vector<std::string>> lines;
  lines.reserve(entries_.size());
  for (const EpochEntry& e : entries_) {
    lines.push_back({std::to_string(e.epoch), std::to_string(e.start_offset)});
  }
  if (writer_) {
    writer_(file_, std::move(lines));
    return {};
  }
  return write_checkpoint(file_, lines);
}

Result<void> LeaderEpochCache::assign(std::int32_t epoch, std::int64_t start_offset) {
  if (epoch < 0 || start_offset < 0) {
    return std::unexpected(
        Error{Errc::offset_out_of_range, "leader epoch " + std::to_string(epoch) + " at offset " +
                                             std::to_string(start_offset) + " is negative"});
  }
  if (!entries_.empty() && entries_.back().epoch == epoch &&
      entries_.back().start_offset <= start_offset) {
    return {};
  }
  auto conflicting = [&](const EpochEntry& e) {
    return e.epoch >= epoch || e.start_offset >= start_offset;
  };
  std::size_t before = entries_.size();
  std::erase_if(entries_, conflicting);
  if (entries_.size() != before) {
    LOG_WARN("%s: epoch %d at offset %lld replaces %zu conflicting entries", file_.c_str(), epoch,
             static_cast<long long>(start_offset), before - entries_.size());
  }
  entries_.push_back({epoch, start_offset});
  return flush();
}

bool LeaderEpochCache::drop_from_end(std::int64_t end_offset) {
  if (entries_.empty() || entries_.back().start_offset < end_offset) return false;
  std::erase_if(entries_, [&](const EpochEntry& e) { return e.start_offset >= end_offset; });
  return true;
}

bool LeaderEpochCache::drop_below(std::int64_t start_offset) {
  // The last entry starting at or below start_offset covers it; everything before goes.
  auto it =
      std::upper_bound(entries_.begin(), entries_.end(), start_offset,
                       [](std::int64_t off, const EpochEntry& e) { return off < e.start_offset; });
  if (it == entries_.begin()) return false;
  auto floor = it - 1;
  if (floor == entries_.begin() && floor->start_offset == start_offset) return false;
  floor->start_offset = start_offset;
  entries_.erase(entries_.begin(), floor);
  return true;
}

Result<void> LeaderEpochCache::truncate_from_end(std::int64_t end_offset) {
  if (!drop_from_end(end_offset)) return {};
  return flush();
}

Result<void> LeaderEpochCache::truncate_from_start(std::int64_t start_offset) {
  if (!drop_below(start_offset)) return {};
  return flush();
}

void LeaderEpochCache::trim_loaded(std::int64_t start_offset, std::int64_t end_offset) {
  drop_from_end(end_offset);
  drop_below(start_offset);
}

Result<void> LeaderEpochCache::clear() {
  entries_.clear();
  return flush();
}

std::optional<std::int32_t> LeaderEpochCache::latest_epoch() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back().epoch;
}

std::optional<EpochEntry> LeaderEpochCache::latest() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

std::optional<std::int32_t> LeaderEpochCache::epoch_for_offset(std::int64_t offset) const {
  auto it =
      std::upper_bound(entries_.begin(), entries_.end(), offset,
                       [](std::int64_t off, const EpochEntry& e) { return off < e.start_offset; });
  if (it == entries_.begin()) return std::nullopt;
  return (it - 1)->epoch;
}

LeaderEpochCache::EpochEnd LeaderEpochCache::end_offset_for(std::int32_t requested,
                                                            std::int64_t log_end_offset) const {
  if (requested < 0 || entries_.empty()) return {};
  if (entries_.back().epoch == requested) return {requested, log_end_offset};
  auto higher = std::upper_bound(entries_.begin(), entries_.end(), requested,
                                 [](std::int32_t ep, const EpochEntry& e) { return ep < e.epoch; });
  if (higher == entries_.end()) return {};
  if (higher == entries_.begin()) return {requested, higher->start_offset};
  return {(higher - 1)->epoch, higher->start_offset};
}

}  // namespace samsa::io
