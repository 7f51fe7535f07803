#include "replication/quorum/snapshot_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <limits>

#include "io/batch_builder.h"
#include "io/checkpoint.h"
#include "io/record_batch.h"
#include "replication/quorum/control_records.h"

namespace samsa::replication::quorum {
namespace {

constexpr std::size_t kOffsetDigits = 20;
constexpr std::size_t kEpochDigits = 10;

io::Error corrupt(std::string_view what, std::size_t pos, const std::string& problem) {
  return io::Error{io::Errc::corrupt_batch,
                   std::string(what) + ": at byte " + std::to_string(pos) + ": " + problem};
}

// ---- encoding ----

// Appends data batches to out, each at most kSnapshotBatchBytes (a record too large for that
// gets a batch of its own). Returns the offset after the last record.
std::int64_t append_data_batches(std::vector<std::byte>& out,
                                 std::span<const MetadataRecord> records, const SnapshotId& id,
                                 std::int64_t ts, std::int64_t next) {
  std::vector<std::byte> buf;
  std::optional<io::BatchBuilder> b;
  auto seal = [&] {
    if (!b || b->empty()) return;
    auto bytes = b->finish();
    out.insert(out.end(), bytes.begin(), bytes.end());
    next += b->count();
    b.reset();
  };
  auto start = [&](std::size_t record_bound) {
    buf.resize(std::max(kSnapshotBatchBytes, io::batch::kHeaderSize + record_bound));
    io::BatchBuilder::Options o;
    o.base_offset = next;
    o.partition_leader_epoch = id.epoch;
    b.emplace(buf, o);
  };
  for (const MetadataRecord& r : records) {
    const auto value = encode_record(r);
    const std::size_t bound = io::BatchBuilder::max_record_size(0, value.size());
    const std::span<const std::byte> v(value);
    if (b && b->add(ts, std::nullopt, v)) continue;
    seal();
    start(bound);
    // An empty batch sized for this record always takes it.
    b->add(ts, std::nullopt, v);
    // A record alone past the budget: a batch of its own, so no other batch exceeds it.
    if (buf.size() > kSnapshotBatchBytes) seal();
  }
  seal();
  return next;
}

// ---- decoding ----

// The whole, valid batch starting at pos (which is before the end).
io::Result<std::pair<std::span<const std::byte>, io::BatchInfo>> batch_at(
    std::span<const std::byte> bytes, std::size_t pos, std::string_view what) {
  const std::size_t left = bytes.size() - pos;
  if (left < io::batch::kHeaderSize) {
    return std::unexpected(corrupt(
        what, pos, "truncated: " + std::to_string(left) + " bytes left, less than a batch header"));
  }
  auto head = io::batch::check_header(bytes.subspan(pos, io::batch::kHeaderSize), 0);
  if (!head) return std::unexpected(corrupt(what, pos, head.error().detail));
  const auto len = static_cast<std::size_t>(head->length);
  if (len > left) {
    return std::unexpected(corrupt(what, pos,
                                   "truncated: the batch is " + std::to_string(len) + " bytes, " +
                                       std::to_string(left) + " left"));
  }
  auto batch = bytes.subspan(pos, len);
  auto info = io::Log::validate_batch(batch, 0);
  if (!info) {
    io::Error e = corrupt(what, pos, info.error().detail);
    e.code = info.error().code;
    return std::unexpected(std::move(e));
  }
  return std::pair{batch, *info};
}

io::Result<void> decode_data_batch(std::span<const std::byte> batch, const io::BatchInfo& info,
                                   std::vector<MetadataRecord>& out, std::string_view what,
                                   std::size_t pos) {
  std::vector<std::byte> storage;
  auto recs = io::batch::records_of(batch, storage);
  if (!recs) return std::unexpected(corrupt(what, pos, recs.error().detail));
  io::batch::RecordReader reader(*recs, info.record_count);
  for (;;) {
    auto r = reader.next();
    if (!r) return std::unexpected(corrupt(what, pos, r.error().detail));
    if (!*r) break;
    const std::int64_t offset = info.base_offset + (*r)->offset_delta;
    if (!(*r)->value) {
      return std::unexpected(
          corrupt(what, pos, "record at offset " + std::to_string(offset) + " has a null value"));
    }
    auto m = decode_record(*(*r)->value);
    if (!m) {
      return std::unexpected(corrupt(
          what, pos, "record at offset " + std::to_string(offset) + " is not a metadata record"));
    }
    out.push_back(std::move(*m));
  }
  return {};
}

// The control batch at pos must be `want`; anything else is named in the error.
io::Result<void> expect_control(std::span<const std::byte> batch, ControlRecordType want,
                                std::string_view what, std::size_t pos, const char* role) {
  if (!is_control_batch(batch)) {
    return std::unexpected(
        corrupt(what, pos,
                std::string(role) + " batch is a data batch, expected " + control_type_name(want)));
  }
  auto m = decode_control_batch(batch);
  if (!m) return std::unexpected(corrupt(what, pos, m.error().detail));
  if (control_type(*m) != want) {
    return std::unexpected(corrupt(what, pos,
                                   std::string(role) + " batch is " +
                                       control_type_name(control_type(*m)) + ", expected " +
                                       control_type_name(want)));
  }
  return {};
}

// Reads a whole file (snapshots are whole-file reads: the image is loaded at once).
io::Result<std::vector<std::byte>> read_whole_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return std::unexpected(io::Error{io::Errc::not_found, path.string() + " does not exist"});
    }
    return std::unexpected(io::sys_error("open", path, err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return std::unexpected(io::sys_error("stat", path, err));
  }
  std::vector<std::byte> out(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      if (n == 0) {
        return std::unexpected(
            io::Error{io::Errc::io_error, path.string() + ": shrank while being read"});
      }
      return std::unexpected(io::sys_error("read", path, err));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return out;
}

bool all_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

namespace detail {

io::Result<void> write_all(int fd, std::span<const std::byte> bytes,
                           const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(io::sys_error("write", path, errno));
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace detail

std::string snapshot_file_name(const SnapshotId& id) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%020lld-%010d", static_cast<long long>(id.end_offset), id.epoch);
  return std::string(buf) + std::string(kSnapshotSuffix);
}

std::optional<SnapshotId> parse_snapshot_file_name(std::string_view name) {
  if (name.size() != kOffsetDigits + 1 + kEpochDigits + kSnapshotSuffix.size()) return std::nullopt;
  if (!name.ends_with(kSnapshotSuffix) || name[kOffsetDigits] != '-') return std::nullopt;
  const auto off = name.substr(0, kOffsetDigits);
  const auto epoch = name.substr(kOffsetDigits + 1, kEpochDigits);
  if (!all_digits(off) || !all_digits(epoch)) return std::nullopt;
  SnapshotId id;
  // from_chars refuses what does not fit int64 / int32.
  if (std::from_chars(off.data(), off.data() + off.size(), id.end_offset).ec != std::errc{} ||
      std::from_chars(epoch.data(), epoch.data() + epoch.size(), id.epoch).ec != std::errc{})
    return std::nullopt;
  return id;
}

std::vector<std::byte> encode_snapshot(std::span<const MetadataRecord> records,
                                       const SnapshotId& id,
                                       std::int64_t last_contained_timestamp) {
  const std::int64_t ts = last_contained_timestamp;
  std::vector<std::byte> out = build_control_batch(SnapshotHeaderRecord{ts}, {0, id.epoch, ts});
  const std::int64_t next = append_data_batches(out, records, id, ts, 1);
  const auto footer = build_control_batch(SnapshotFooterRecord{}, {next, id.epoch, ts});
  out.insert(out.end(), footer.begin(), footer.end());
  return out;
}

io::Result<std::vector<MetadataRecord>> decode_snapshot(std::span<const std::byte> bytes,
                                                        std::string_view what) {
  if (bytes.empty()) return std::unexpected(corrupt(what, 0, "empty: no snapshot header"));
  std::vector<MetadataRecord> out;
  std::size_t pos = 0;
  std::int64_t next_offset = 0;
  bool footer = false;
  while (pos < bytes.size()) {
    if (footer) {
      return std::unexpected(corrupt(
          what, pos, std::to_string(bytes.size() - pos) + " bytes after the snapshot footer"));
    }
    auto b = batch_at(bytes, pos, what);
    if (!b) return std::unexpected(b.error());
    const auto& [batch, info] = *b;
    // What the first batch is matters more than its offset: say that first.
    if (pos == 0) {
      if (auto r = expect_control(batch, ControlRecordType::snapshot_header, what, pos, "first");
          !r)
        return std::unexpected(r.error());
    }
    if (info.base_offset != next_offset) {
      return std::unexpected(corrupt(what, pos,
                                     "batch has base offset " + std::to_string(info.base_offset) +
                                         ", expected " + std::to_string(next_offset)));
    }
    if (pos == 0) {
      // The header carries no records of the image.
    } else if (info.is_control()) {
      // Only the footer may follow the header as a control batch, and only last.
      if (auto r =
              expect_control(batch, ControlRecordType::snapshot_footer, what, pos, "a control");
          !r)
        return std::unexpected(r.error());
      footer = true;
    } else if (auto r = decode_data_batch(batch, info, out, what, pos); !r) {
      return std::unexpected(r.error());
    }
    next_offset = info.base_offset + info.last_offset_delta + 1;
    pos += batch.size();
  }
  if (!footer) {
    return std::unexpected(
        corrupt(what, pos, "no snapshot footer: the file ends after its last whole batch"));
  }
  return out;
}

io::Result<std::filesystem::path> write_snapshot_file(const std::filesystem::path& dir,
                                                      const SnapshotId& id,
                                                      std::span<const std::byte> bytes) {
  if (id.end_offset < 0 || id.epoch < 0) {
    return std::unexpected(
        io::Error{io::Errc::io_error, "snapshot id " + std::to_string(id.end_offset) + "-" +
                                          std::to_string(id.epoch) + " cannot name a file"});
  }
  const std::filesystem::path final_path = dir / snapshot_file_name(id);
  std::filesystem::path part = final_path;
  part += kPartialSuffix;
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(io::sys_error("create", part, errno));
  auto fail = [&](io::Error e) {
    ::unlink(part.c_str());
    return std::unexpected(std::move(e));
  };
  if (auto r = detail::write_all(fd, bytes, part); !r) {
    ::close(fd);
    return fail(r.error());
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fail(io::sys_error("fsync", part, err));
  }
  ::close(fd);
  if (auto r = io::rename_durably(part, final_path); !r) return fail(r.error());
  return final_path;
}

io::Result<std::vector<MetadataRecord>> read_snapshot_file(const std::filesystem::path& path) {
  auto bytes = read_whole_file(path);
  if (!bytes) return std::unexpected(bytes.error());
  return decode_snapshot(*bytes, path.string());
}

io::Result<std::vector<SnapshotId>> list_snapshots(const std::filesystem::path& dir) {
  std::vector<SnapshotId> out;
  std::error_code ec;
  for (const auto& de : std::filesystem::directory_iterator(dir, ec)) {
    auto id = parse_snapshot_file_name(de.path().filename().string());
    std::error_code ec2;
    if (id && de.is_regular_file(ec2)) out.push_back(*id);
  }
  if (ec) return std::unexpected(io::sys_error("list", dir, ec.value()));
  std::sort(out.begin(), out.end());
  return out;
}

io::Result<std::size_t> delete_snapshots_before(const std::filesystem::path& dir,
                                                const SnapshotId& keep) {
  auto ids = list_snapshots(dir);
  if (!ids) return std::unexpected(ids.error());
  std::size_t removed = 0;
  for (const SnapshotId& id : *ids) {
    if (!(id < keep)) break;
    const auto p = dir / snapshot_file_name(id);
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return std::unexpected(io::sys_error("remove", p, errno));
    }
    ++removed;
  }
  if (removed > 0) {
    if (auto r = io::fsync_dir(dir); !r) return std::unexpected(r.error());
  }
  return removed;
}

io::Result<std::size_t> remove_partial_snapshots(const std::filesystem::path& dir) {
  std::string suffix = std::string(kSnapshotSuffix) + std::string(kPartialSuffix);
  std::vector<std::filesystem::path> doomed;
  std::error_code ec;
  for (const auto& de : std::filesystem::directory_iterator(dir, ec)) {
    if (de.path().filename().string().ends_with(suffix)) doomed.push_back(de.path());
  }
  if (ec) return std::unexpected(io::sys_error("list", dir, ec.value()));
  for (const auto& p : doomed) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return std::unexpected(io::sys_error("remove", p, errno));
    }
  }
  if (!doomed.empty()) {
    if (auto r = io::fsync_dir(dir); !r) return std::unexpected(r.error());
  }
  return doomed.size();
}

}  // namespace samsa::replication::quorum
