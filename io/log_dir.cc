#include "io/log_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "base/log.h"
#include "io/checkpoint.h"

namespace samsa::io {
namespace {

constexpr const char* kRecoveryPointFile = "recovery-point-offset-checkpoint";
constexpr const char* kLogStartFile = "log-start-offset-checkpoint";
constexpr const char* kCleanerFile = "cleaner-offset-checkpoint";
constexpr const char* kCleanMarker = ".kafka_cleanshutdown";
constexpr const char* kLockFile = ".lock";

bool parse_i64(std::string_view s, std::int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

}  // namespace

std::optional<PartitionId> PartitionId::parse(std::string_view name) {
  auto dash = name.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 >= name.size()) return std::nullopt;
  std::string_view num = name.substr(dash + 1);
  std::int32_t p = 0;
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), p);
  if (ec != std::errc{} || end != num.data() + num.size() || p < 0) return std::nullopt;
  if (num.size() > 1 && num[0] == '0') return std::nullopt;  // not how a partition is named
  std::string_view topic = name.substr(0, dash);
  // Kafka topic names are [a-zA-Z0-9._-]; anything else (e.g. "t-0.abc-delete") is not ours.
  for (char c : topic) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return std::nullopt;
  }
  return PartitionId{std::string(topic), p};
}

Result<std::unique_ptr<LogDir>> LogDir::open(std::filesystem::path root) {
  std::unique_ptr<LogDir> d(new LogDir());
  d->root_ = std::move(root);
  std::error_code ec;
  auto created = create_directories_durably(d->root_);
  if (!created) return std::unexpected(created.error());
  // Synced even when it existed: samsad creates its log dirs before opening them, and a start
  // that crashed may have left the entry unsynced. Everything written in the dir hangs on it.
  if (!*created) {
    if (auto r = fsync_dir(d->root_.parent_path().empty() ? "." : d->root_.parent_path()); !r)
      return std::unexpected(r.error());
  }

  auto lock_path = d->root_ / kLockFile;
  d->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (d->lock_fd_ < 0) return std::unexpected(sys_error("open lock file", lock_path, errno));
  if (::flock(d->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      return std::unexpected(Error{Errc::io_error, "log dir " + d->root_.string() +
                                                       " is locked by another process (" +
                                                       lock_path.string() + ")"});
    }
    return std::unexpected(sys_error("lock", lock_path, err));
  }

  auto marker = d->root_ / kCleanMarker;
  d->clean_ = std::filesystem::exists(marker, ec);
  if (d->clean_) {
    if (auto r = remove_durably(marker); !r) return std::unexpected(r.error());
  }

  // Checkpoints: a damaged file costs speed (full recovery), never correctness, so warn and go
  // on with what is known (recovery point 0 scans everything).
  auto load = [&](const char* name, std::int64_t Entry::*field) {
    auto lines = read_checkpoint(d->root_ / name, 3);
    if (!lines) {
      if (lines.error().code != Errc::not_found) {
        LOG_WARN("ignoring %s: %s", name, lines.error().detail.c_str());
      }
      return;
    }
    for (const auto& f : *lines) {
      std::int64_t part, off;
      if (!parse_i64(f[1], part) || !parse_i64(f[2], off) || part < 0 || part > INT32_MAX) {
        LOG_WARN("%s: ignoring entry \"%s %s %s\"", name, f[0].c_str(), f[1].c_str(), f[2].c_str());
        continue;
      }
      Entry& e = d->entries_[PartitionId{f[0], static_cast<std::int32_t>(part)}];
      e.*field = off;
    }
  };
  load(kRecoveryPointFile, &Entry::recovery_point);
  load(kLogStartFile, &Entry::log_start_offset);
  load(kCleanerFile, &Entry::cleaner_offset);

  for (const auto& de : std::filesystem::directory_iterator(d->root_, ec)) {
    if (!de.is_directory()) continue;
    if (de.path().filename().string().ends_with("-delete")) {
      d->left_to_delete_.push_back(de.path());
      continue;
    }
    auto id = PartitionId::parse(de.path().filename().string());
    if (!id) continue;
    d->entries_[*id].dir_found_at_open = true;
  }
  if (ec) return std::unexpected(sys_error("list log dir", d->root_, ec.value()));
  // Checkpoint entries whose directory is gone describe nothing.
  std::erase_if(d->entries_, [](const auto& kv) { return !kv.second.dir_found_at_open; });
  d->recovery_.clean = d->clean_;
  d->recovery_.found = d->entries_.size();
  // The daemon logs one summary per log dir once its logs are open (recovery_summary()).
  LOG_DEBUG("log dir %s: %zu partitions, %s shutdown", d->root_.c_str(), d->entries_.size(),
            d->clean_             ? "clean"
            : d->entries_.empty() ? "no previous"
                                  : "unclean");
  return d;
}

LogDir::~LogDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::vector<PartitionId> LogDir::partitions() const {
  std::lock_guard lk(mu_);
  std::vector<PartitionId> out;
  for (const auto& [id, e] : entries_)
    out.push_back(id);
  return out;
}

std::size_t LogDir::partition_count() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

OpenOptions LogDir::open_options(const PartitionId& id) {
  std::lock_guard lk(mu_);
  OpenOptions o;
  o.clean_shutdown = clean_;
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    o.recovery_point = std::max<std::int64_t>(0, it->second.recovery_point);
    o.log_start_offset = it->second.log_start_offset;
    o.cleaner_offset = it->second.cleaner_offset;
  }
  o.log_dir = this;
  return o;
}

Result<std::unique_ptr<Log>> LogDir::open_log(Reactor& r, const PartitionId& id, LogConfig cfg) {
  return Log::open(r, partition_dir(id), cfg, open_options(id));
}

std::shared_ptr<LogDir::PartitionState> LogDir::attach(const PartitionId& id,
                                                       std::int64_t recovery_point,
                                                       std::int64_t log_start_offset) {
  auto s = std::make_shared<PartitionState>();
  s->recovery_point.store(recovery_point, std::memory_order_relaxed);
  s->log_start_offset.store(log_start_offset, std::memory_order_relaxed);
  std::lock_guard lk(mu_);
  Entry& e = entries_[id];
  s->cleaner_offset.store(e.cleaner_offset, std::memory_order_relaxed);
  e.live = s;
  e.opened_this_run = true;
  e.closed_cleanly = false;
  return s;
}

void LogDir::detach(const PartitionId& id, const std::shared_ptr<PartitionState>& s) {
  std::lock_guard lk(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.live != s) return;
  Entry& e = it->second;
  e.recovery_point = s->recovery_point.load(std::memory_order_acquire);
  e.log_start_offset = s->log_start_offset.load(std::memory_order_acquire);
  e.cleaner_offset = s->cleaner_offset.load(std::memory_order_acquire);
  e.closed_cleanly = s->closed_cleanly.load(std::memory_order_acquire);
  e.live.reset();
}

void LogDir::forget(const PartitionId& id) {
  std::lock_guard lk(mu_);
  entries_.erase(id);
}

Result<void> LogDir::write_checkpoints() {
  std::lock_guard lk(mu_);
  return write_checkpoints_locked();
}

Result<void> LogDir::write_checkpoints_locked() {
  std::vector<std::vector<std::string>> rp, ls, co;
  for (const auto& [id, e] : entries_) {
    std::int64_t r =
        e.live ? e.live->recovery_point.load(std::memory_order_acquire) : e.recovery_point;
    std::int64_t s =
        e.live ? e.live->log_start_offset.load(std::memory_order_acquire) : e.log_start_offset;
    std::string part = std::to_string(id.partition);
    if (r >= 0) rp.push_back({id.topic, part, std::to_string(r)});
    if (s >= 0) ls.push_back({id.topic, part, std::to_string(s)});
    std::int64_t c =
        e.live ? e.live->cleaner_offset.load(std::memory_order_acquire) : e.cleaner_offset;
    if (c >= 0) co.push_back({id.topic, part, std::to_string(c)});
  }
  if (auto r = write_checkpoint(root_ / kRecoveryPointFile, rp); !r) return r;
  if (auto r = write_checkpoint(root_ / kLogStartFile, ls); !r) return r;
  if (auto r = write_checkpoint(root_ / kCleanerFile, co); !r) return r;
  ++stats_.checkpoint_writes;
  return {};
}

Result<void> LogDir::shutdown_clean() {
  std::lock_guard lk(mu_);
  for (const auto& [id, e] : entries_) {
    bool closed =
        e.live ? e.live->closed_cleanly.load(std::memory_order_acquire) : e.closed_cleanly;
    if (e.dir_found_at_open && !e.opened_this_run) {
      return std::unexpected(Error{Errc::io_error, "not marking " + root_.string() +
                                                       " clean: " + id.dir_name() +
                                                       " was not opened (so not recovered)"});
    }
    if (e.opened_this_run && !closed) {
      return std::unexpected(Error{Errc::io_error, "not marking " + root_.string() + " clean: " +
                                                       id.dir_name() + " was not closed cleanly"});
    }
  }
  // One sync of everything the closes left in the page cache, instead of two per log.
  if (unsynced_closes_.load(std::memory_order_acquire) && ::syncfs(lock_fd_) != 0) {
    return std::unexpected(sys_error("syncfs", root_, errno));
  }
  if (auto r = write_checkpoints_locked(); !r) return r;
  return write_file_atomically(root_ / kCleanMarker, "");
}

void LogDir::note_opened(const OpenSummary& s) {
  std::lock_guard lk(mu_);
  ++recovery_.opened;
  recovery_.segments += s.segments;
  recovery_.bytes += s.bytes;
  recovery_.scanned_segments += s.scanned_segments;
  if (s.truncated) ++recovery_.truncated;
}

LogDir::RecoverySummary LogDir::recovery_summary() const {
  std::lock_guard lk(mu_);
  return recovery_;
}

LogDir::Stats LogDir::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace samsa::io
