// io::Log: compaction's two moments on the log's reactor — planning a pass (which closed
// segments, from which dirty offset) and swapping its cleaned segments in — and the completion
// of a swap a crash interrupted. The pass itself runs on a cleaner thread (io/compaction.cc).
//
// The swap (io/README.md, "Compaction"):
//   1. the pass left <base>.log.cleaned, .index.cleaned, .timeindex.cleaned per group, synced;
//   2. cleaner-swap (written atomically) lists "<base> <end>" per group: the commit point;
//   3. the replaced segments' files are renamed *.deleted, the .cleaned ones to their names;
//   4. the directory is fsynced and cleaner-swap removed (durably).
// A start that finds cleaner-swap redoes 3-4 (idempotent); .cleaned files without it are
// leftovers of a pass that never committed and are removed. So a crash leaves either every old
// segment of the pass or every new one, never a mix.
#include <fstream>

#include "base/assert.h"
#include "io/log_impl.h"

namespace samsa::io {

Result<void> Log::Impl::allow_gaps_if_compacted() {
  if (gaps_ok_ || !cfg_.cleanup_compact) return {};
  // Durable before a gap could be: recovery must know this log may have them. Its existence is
  // the flag, and this directory is synced before anything reaches the disk durably: by the
  // next group commit's directory sync (before a follower's gapped append is acknowledged or
  // the recovery point passes it) or by the cleaner's swap (which syncs the directory before
  // a cleaned segment counts). No fsync here: one on the reactor for every compacted log
  // created (__consumer_offsets at the first start) stalled its loop 3–20 ms.
  if (auto r = write_file_atomically(dir_ / kCompactedMarker, "compacted\n", false); !r) return r;
  dir_sync_needed_ = true;
  gaps_ok_ = true;
  return {};
}

std::unique_ptr<CleanPlan> Log::Impl::plan_cleaning(const CleanRequest& req) {
  if (!cfg_.cleanup_compact || !gaps_ok_ || cleaning_ || fence_ || closed_ || segs_.size() < 2)
    return {};
  const std::int64_t bound = std::min({req.cleanable_limit, trusted_end(), active().base});
  auto plan = std::make_unique<CleanPlan>();
  const std::int64_t first_dirty = std::clamp(cleaner_offset_, log_start_, leo_);
  for (std::size_t i = 0; i + 1 < segs_.size(); ++i) {
    const Segment& s = *segs_[i];
    const std::int64_t next_base = segs_[i + 1]->base;
    if (next_base > bound || s.index_pending) break;
    // min.compaction.lag.ms: records younger than it stay as written (with what follows).
    if (cfg_.min_compaction_lag_ms > 0 &&
        effective_max_timestamp(s) > req.now_ms - cfg_.min_compaction_lag_ms) {
      break;
    }
    plan->segments.push_back(
        CleanPlan::Seg{nullptr, s.base, s.size, next_base, s.offset_index.bytes().size()});
    plan->total_bytes += s.size;
    if (next_base > first_dirty) plan->dirty_bytes += s.size;
  }
  if (plan->segments.empty() || plan->dirty_bytes == 0) return {};
  plan->clean_end = plan->segments.back().next_base;
  if (!req.force && plan->dirty_ratio() < cfg_.min_cleanable_dirty_ratio) {
    // max.compaction.lag.ms: a dirty segment this old is cleaned whatever the ratio.
    bool overdue = false;
    for (const auto& s : segs_) {
      if (s->base >= plan->clean_end) break;
      if (s->base < first_dirty && s.get() != segs_.front().get()) continue;
      const std::int64_t first_ts =
          s->first_batch_timestamp >= 0 ? s->first_batch_timestamp : s->created_ms;
      if (cfg_.max_compaction_lag_ms < INT64_MAX &&
          req.now_ms - first_ts > cfg_.max_compaction_lag_ms) {
        overdue = true;
        break;
      }
    }
    if (!overdue) return {};
  }
  // Files are opened only for a pass that runs (a closed segment's may be closed by the
  // descriptor budget); the plan holds them, so none is closed under the pass.
  for (std::size_t i = 0; i < plan->segments.size(); ++i) {
    auto f = file(*segs_[i]);
    if (!f) {
      LOG_WARN("%s: no cleaning pass: %s", dir_.c_str(), f.error().detail.c_str());
      return {};
    }
    plan->segments[i].file = std::move(*f);
  }
  plan->dir = dir_;
  plan->log_start = log_start_;
  plan->first_dirty = first_dirty;
  plan->generation = generation_;
  plan->now_ms = req.now_ms;
  plan->segment_bytes = cfg_.segment_bytes;
  plan->segment_index_bytes = cfg_.segment_index_bytes;
  plan->index_interval_bytes = cfg_.index_interval_bytes;
  plan->delete_retention_ms = cfg_.delete_retention_ms;
  plan->producer_expiration_ms = req.producer_expiration_ms;
  cleaning_ = true;
  return plan;
}

namespace {

// cleaner-swap: "<base> <end>" per line. It is written atomically, so a line that does not
// parse means the file is not ours: refuse rather than guess.
Result<std::vector<std::pair<std::int64_t, std::int64_t>>> read_swap_manifest(
    const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) {
    if (errno == ENOENT) return fail(Errc::not_found, p.string());
    return std::unexpected(sys_error("open", p, errno));
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  std::int64_t base = 0, end = 0;
  while (in >> base >> end) {
    if (base < 0 || end <= base) break;
    out.emplace_back(base, end);
  }
  if (!in.eof()) return fail(Errc::fenced, p.string() + ": not a cleaner swap manifest");
  return out;
}

}  // namespace

Result<void> Log::Impl::commit_cleaning(const CleanPlan& plan, const CleanResult& result) {
  SAMSA_ASSERT(cleaning_);
  cleaning_ = false;
  std::size_t inputs = 0;
  for (const auto& g : result.groups)
    inputs += g.input_segments;
  bool same = plan.generation == generation_ && !fence_ && !closed_ && inputs < segs_.size();
  for (std::size_t i = 0; same && i < inputs; ++i)
    same = segs_[i]->file.get() == plan.segments[i].file && segs_[i]->size == plan.segments[i].size;
  if (!same) {
    discard_cleaned(plan, result);
    return fail(Errc::busy,
                "the log changed during the cleaning pass (truncated, retention, or "
                "closed): its result is dropped");
  }
  if (auto r = swap_in(plan, result); !r) {
    // Past the manifest nothing may be undone: fence, and the next open completes the swap.
    return std::unexpected(fence(r.error()));
  }
  cleaner_offset_ = result.new_first_dirty;
  last_clean_ms_ = plan.now_ms;
  ++clean_passes_;
  publish();
  return {};
}

Result<void> Log::Impl::swap_in(const CleanPlan& plan, const CleanResult& result) {
  std::string manifest;
  for (const auto& g : result.groups)
    manifest += fmt("%" PRId64 " %" PRId64 "\n", g.base, g.end);
  if (auto r = write_file_atomically(dir_ / kSwapManifest, manifest); !r) {
    discard_cleaned(plan, result);
    return r;
  }
  // Committed. The old segments' files leave (the retention thread unlinks them; readers keep
  // their descriptors), the cleaned ones take their names.
  std::size_t i = 0;
  std::vector<std::unique_ptr<Segment>> fresh;
  for (const auto& g : result.groups) {
    for (std::size_t k = 0; k < g.input_segments; ++k)
      remove_segment_files(*segs_[i + k], true);
    i += g.input_segments;
    for (const char* suffix : {kLogSuffix, kIndexSuffix, kTimeIndexSuffix}) {
      auto from = cleaned_path(dir_, g.base, suffix);
      if (::rename(from.c_str(), path_of(g.base, suffix).c_str()) != 0) {
        return std::unexpected(sys_error("rename", from, errno));
      }
    }
  }
  if (auto r = fsync_dir(dir_); !r) return std::unexpected(r.error());
  if (auto r = remove_durably(dir_ / kSwapManifest); !r) return r;
  for (const auto& g : result.groups) {
    auto s = std::make_unique<Segment>();
    s->base = g.base;
    if (auto r = open_segment_file(*s, false); !r) return r;
    auto oi = IndexFile::load(path_of(g.base, kIndexSuffix));
    if (!oi) return std::unexpected(oi.error());
    auto ti = IndexFile::load(path_of(g.base, kTimeIndexSuffix));
    if (!ti) return std::unexpected(ti.error());
    s->offset_index = std::move(*oi);
    s->time_index = std::move(*ti);
    s->next_offset = g.end;
    s->max_timestamp = g.max_timestamp;
    s->first_batch_timestamp = g.first_batch_timestamp;
    s->data_end = g.data_end >= 0 ? g.data_end : g.base;
    fresh.push_back(std::move(s));
  }
  segs_.erase(segs_.begin(), segs_.begin() + static_cast<std::ptrdiff_t>(i));
  for (auto it = fresh.rbegin(); it != fresh.rend(); ++it)
    segs_.push_front(std::move(*it));
  read_scratch().window_file = nullptr;
  return {};
}

void Log::Impl::abort_cleaning(const CleanPlan& /*plan*/) {
  cleaning_ = false;
}

Log::CompactionInfo Log::Impl::compaction_info() const {
  CompactionInfo ci;
  ci.first_dirty = std::clamp(cleaner_offset_, log_start_, leo_);
  std::uint64_t total = 0, dirty = 0;
  for (std::size_t i = 0; i + 1 < segs_.size(); ++i) {
    total += segs_[i]->size;
    if (segs_[i + 1]->base > ci.first_dirty) dirty += segs_[i]->size;
  }
  ci.dirty_ratio = total ? static_cast<double>(dirty) / static_cast<double>(total) : 0;
  ci.last_clean_ms = last_clean_ms_;
  ci.passes = clean_passes_;
  ci.in_flight = cleaning_;
  return ci;
}

Result<bool> Log::Impl::finish_interrupted_swap() {
  const auto manifest = dir_ / kSwapManifest;
  auto lines = read_swap_manifest(manifest);
  if (!lines) {
    if (lines.error().code == Errc::not_found) return false;
    return std::unexpected(lines.error());
  }
  std::error_code ec;
  std::vector<std::int64_t> bases;
  for (const auto& de : std::filesystem::directory_iterator(dir_, ec))
    if (auto b = detail::parse_segment_name(de.path().filename().string(), kLogSuffix))
      bases.push_back(*b);
  if (ec) return std::unexpected(sys_error("list", dir_, ec.value()));
  for (const auto& [base, end] : *lines) {
    const bool renamed = !std::filesystem::exists(cleaned_path(dir_, base, kLogSuffix));
    for (std::int64_t b : bases) {
      if (b < base || b >= end || (renamed && b == base)) continue;
      Segment tmp;
      tmp.base = b;
      remove_segment_files(tmp, false);
    }
    for (const char* suffix : {kLogSuffix, kIndexSuffix, kTimeIndexSuffix}) {
      auto from = cleaned_path(dir_, base, suffix);
      if (::rename(from.c_str(), path_of(base, suffix).c_str()) != 0 && errno != ENOENT) {
        return std::unexpected(sys_error("rename", from, errno));
      }
    }
    LOG_INFO("%s: completed the cleaner's swap of [%" PRId64 ", %" PRId64 ") a stop interrupted",
             dir_.c_str(), base, end);
  }
  if (auto r = fsync_dir(dir_); !r) return std::unexpected(r.error());
  if (auto r = remove_durably(manifest); !r) return std::unexpected(r.error());
  return true;
}

}  // namespace samsa::io
