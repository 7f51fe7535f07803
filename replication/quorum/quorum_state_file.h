// The quorum-state file KRaft keeps in the metadata log's directory (__cluster_metadata-0):
// the epoch, the vote and the leader a node knows, which the Raft node's safety rests on (a
// vote is made durable before it is answered), plus the voter set, the cluster id and how far
// this node has applied committed metadata. One line of JSON, Kafka's field names, version 0:
//
//   {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,
//    "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}
//
// Reading is strict: anything but exactly these fields with the right types and consistent
// values is an error naming the file, never a guess (a wrong guess could grant a second vote
// in an epoch). Plain blocking file I/O: small and rare.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "io/log.h"
#include "replication/quorum/raft.h"

namespace samsa::replication::quorum {

inline constexpr std::string_view kQuorumStateFile = "quorum-state";

struct QuorumStateFile {
  std::string cluster_id;
  QuorumState state;  // leaderEpoch, votedId, leaderId
  // Every metadata record below this offset has been applied (0: none).
  std::int64_t applied_offset = 0;
  std::vector<NodeId> voters;  // currentVoters, in the order given
  bool operator==(const QuorumStateFile&) const = default;
};

// The JSON text (no trailing newline), and the way back. parse_quorum_state's errors
// (Errc::io_error) start with `file` and say what is wrong.
std::string quorum_state_json(const QuorumStateFile& s);
io::Result<QuorumStateFile> parse_quorum_state(std::string_view json, std::string_view file);

// What is wrong with s, or "" when it is consistent: epoch >= 0, ids >= -1, no vote or leader
// in epoch 0, applied_offset >= 0, voters distinct and >= 0, a leader or vote among the voters
// when voters are given.
std::string check_quorum_state(const QuorumStateFile& s);

// An absent file is the empty state (epoch 0, no vote, no leader, nothing applied); one that
// cannot be read, or is malformed, truncated or inconsistent, is an error.
io::Result<QuorumStateFile> read_quorum_state(const std::filesystem::path& file);

// Replaces the file atomically and durably (temporary file, fsync, rename, fsync of the
// directory): once this returns the state survives a power cut, and a cut during it leaves the
// old file whole. Refuses (Errc::io_error) a state check_quorum_state finds inconsistent.
io::Result<void> write_quorum_state(const std::filesystem::path& file, const QuorumStateFile& s);

}  // namespace samsa::replication::quorum
