// Kafka's text checkpoint files (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// leader-epoch-checkpoint): a version line "0", a count line, then one entry per line with
// space-separated fields. Written atomically: temp file, fsync, rename, fsync of the directory,
// so a crash leaves either the old or the new file, never a mix.
//
// Also the durable file and directory operations every file samsad writes goes through
// (meta.properties, the clean-shutdown marker, partition directories and their renames): a
// power cut leaves each either as it was or as it was meant to be, and once a call returns its
// effect survives a cut.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/log.h"

namespace samsa::io {

// The entry lines of a checkpoint file, split into fields. Errc::not_found when the file does
// not exist; Errc::io_error naming the file and line when it is malformed (wrong version,
// count mismatch, wrong number of fields).
Result<std::vector<std::vector<std::string>>> read_checkpoint(const std::filesystem::path& file,
                                                              std::size_t fields_per_line);

// Replaces `file` atomically with a checkpoint holding `entries` (each a line's fields).
Result<void> write_checkpoint(const std::filesystem::path& file,
                              const std::vector<std::vector<std::string>>& entries);

// Writes `data` to `file` atomically (temp + fsync + rename + directory fsync). Without `sync`
// only temp + rename: for files whose syncing someone else does for many at once (a clean stop's
// syncfs, io/log_dir.h) and whose readers reject a torn one.
Result<void> write_file_atomically(const std::filesystem::path& file, std::string_view data,
                                   bool sync = true);

// fsync of a directory: makes entries created, renamed or removed in it durable.
Result<void> fsync_dir(const std::filesystem::path& dir);

// Creates `dir` and any missing parents; the parent of each directory created is fsynced
// before the next one is made, so none of them can vanish in a cut once this returns. true
// when `dir` itself was created.
Result<bool> create_directories_durably(const std::filesystem::path& dir);
// mkdir(2) of one directory whose parent exists, *not* synced: for making many at once, then
// syncing their parent once (fsync_dir) before any of them is relied on. true when created,
// false when it was there already.
Result<bool> make_directory(const std::filesystem::path& dir);

// rename(2), then fsync of the destination's directory (and the source's, when it differs), so
// the new name survives a cut once this returns.
Result<void> rename_durably(const std::filesystem::path& from, const std::filesystem::path& to);

// Unlinks a file (absent is fine), then fsyncs its directory, so it stays gone after a cut.
Result<void> remove_durably(const std::filesystem::path& file);

// Error value for a failed system call: "<what> <path>: <strerror> (errno N)".
Error sys_error(const char* what, const std::filesystem::path& p, int err);

}  // namespace samsa::io
