// quorum::FileSnapshotStore — the Raft node's SnapshotStore over the .checkpoint files of the
// metadata log's directory (snapshot_file.h has the format). It serves a leader's snapshots to
// followers (latest, size, read) and receives one from the leader: begin() opens
// <name>.checkpoint.part, write() appends each chunk, finish() fsyncs it, checks the whole
// file (read_snapshot_file), renames it into place, fsyncs the directory and only then hands
// the records to the install callback (the driver restarts the log at id.end_offset and loads
// the image), so a snapshot the log depends on is always on disk first.
//
// Threads: plain blocking file I/O. Snapshot reads and transfers are small and rare, so the
// driver decides which thread calls this (its controller thread or an offload thread); the
// object is not thread-safe: one thread at a time. Snapshots the driver takes itself are
// written with write_snapshot_file (any thread) and announced with add() on this one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/log.h"
#include "replication/metadata_records.h"
#include "replication/quorum/raft.h"

namespace samsa::replication::quorum {

class FileSnapshotStore final : public SnapshotStore {
 public:
  // Called by finish() once a received snapshot is durable in place. false: it could not be
  // installed (finish() returns false; the file stays, as it is a whole committed snapshot,
  // and a fetch of it again replaces it). May be empty: received snapshots are only stored.
  using InstallFn = std::function<bool(const SnapshotId&, std::vector<MetadataRecord>)>;

  // Opens dir (created durably if absent): removes stray .part files, indexes the snapshots.
  static io::Result<std::unique_ptr<FileSnapshotStore>> open(std::filesystem::path dir,
                                                             InstallFn install);
  ~FileSnapshotStore() override;  // a transfer in progress is abandoned (its .part removed)
  FileSnapshotStore(const FileSnapshotStore&) = delete;
  FileSnapshotStore& operator=(const FileSnapshotStore&) = delete;

  std::optional<SnapshotId> latest() const override;
  std::int64_t size(const SnapshotId& id) const override;
  // Up to max_bytes from position; empty at the end, for a snapshot not held, or when the file
  // cannot be read (logged: the interface has no error value).
  std::vector<std::byte> read(const SnapshotId& id, std::int64_t position,
                              std::int64_t max_bytes) const override;

  // Receiving. begin() abandons a transfer still in progress; a write error is kept and makes
  // finish() fail. finish() is false, removing the .part file, when the bytes fail the checks
  // (or anything else went wrong: last_error() says what).
  void begin(const SnapshotId& id) override;
  void write(std::span<const std::byte> bytes) override;
  bool finish() override;

  // A snapshot the driver wrote itself (write_snapshot_file) is now in dir: serve it.
  io::Result<void> add(const SnapshotId& id);
  // Removes the snapshots older than keep (delete_snapshots_before) and forgets them.
  io::Result<std::size_t> delete_before(const SnapshotId& keep);

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& last_error() const { return last_error_; }

 private:
  FileSnapshotStore(std::filesystem::path dir, InstallFn install)
      : dir_(std::move(dir)), install_(std::move(install)) {}
  std::filesystem::path path_of(const SnapshotId& id) const;
  // Closes and removes the .part file of the transfer in progress, if any.
  void abandon();
  bool fail(std::string why);

  std::filesystem::path dir_;
  InstallFn install_;
  std::map<SnapshotId, std::int64_t> held_;  // id -> file size
  std::string last_error_;

  struct Receiving {
    SnapshotId id;
    std::filesystem::path part;
    int fd = -1;
    std::optional<std::string> error;  // the first write error
  };
  std::optional<Receiving> receiving_;
};

}  // namespace samsa::replication::quorum
