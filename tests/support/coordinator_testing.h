// Helpers for tests of the coordinator: the partitions of __consumer_offsets as real io::Logs
// in a directory, either on the caller's reactor (run_on calls at once) or on a reactor thread
// of their own (run_on posts there, as the daemon's shards do). Not for production code.
#pragma once

#include <atomic>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "base/thread.h"
#include "coordinator/coordinator.h"
#include "coordinator/records.h"
#include "coordinator/store.h"
#include "io/log_dir.h"
#include "io/reactor.h"
#include "replication/partition.h"

namespace samsa::coordinator::testing {

// The partitions, opened on `reactor` (call from its thread). close() closes them cleanly.
class OffsetsLogs {
 public:
  OffsetsLogs(io::Reactor& reactor, const std::filesystem::path& root, std::int32_t partitions)
      : reactor_(reactor) {
    auto d = io::LogDir::open(root);
    if (!d) {
      error_ = d.error().detail;
      return;
    }
    dir_ = std::move(*d);
    for (std::int32_t p = 0; p < partitions; ++p) {
      auto log = dir_->open_log(reactor_, {std::string(kOffsetsTopic), p}, io::LogConfig{});
      if (!log) {
        error_ = log.error().detail;
        return;
      }
      parts_.push_back(std::make_unique<replication::Partition>(
          reactor_, std::string(kOffsetsTopic), replication::Uuid{}, p, 0, std::move(*log)));
    }
  }
  ~OffsetsLogs() { close(); }

  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }
  std::size_t size() const { return parts_.size(); }
  // nullptr for a partition "not open here" (index past the end, or hidden by hide()).
  replication::Partition* partition(std::int32_t p) {
    if (p < 0 || static_cast<std::size_t>(p) >= parts_.size() || hidden_ == p) return nullptr;
    return parts_[static_cast<std::size_t>(p)].get();
  }
  // Makes partition p look not open (a shard without it), or none with -1.
  void hide(std::int32_t p) { hidden_ = p; }

  // Same-thread store plumbing: fn runs at once.
  PartitionStore::RunOn run_on() {
    return [this](std::int32_t p, PartitionStore::PartitionFn fn) { fn(partition(p)); };
  }

  // No append queued or in flight on any partition.
  bool idle() const {
    for (const auto& p : parts_)
      if (!p->log().idle()) return false;
    return true;
  }

  // Waits for appends in flight, then closes every log cleanly (writing the clean-shutdown
  // marker, so the next open trusts the files).
  void close() {
    if (parts_.empty()) return;
    reactor_.run_until([&] { return idle(); });
    for (auto& p : parts_)
      (void)p->close();
    parts_.clear();
    if (dir_) (void)dir_->shutdown_clean();
    dir_.reset();
  }

 private:
  io::Reactor& reactor_;
  std::unique_ptr<io::LogDir> dir_;
  std::vector<std::unique_ptr<replication::Partition>> parts_;
  std::int32_t hidden_ = -1;
  std::string error_;
};

// OffsetsLogs on a reactor thread of their own ("shard"), reached by posting, as the daemon
// reaches its shards from the coordinator thread.
class ShardThread {
 public:
  ShardThread(const std::filesystem::path& root, std::int32_t partitions) {
    thread_ = std::thread([this, root, partitions] {
      set_thread_name("shard");
      auto r = io::Reactor::create({.name = "shard"});
      if (!r) {
        ready_.store(-1);
        return;
      }
      reactor_ = std::move(*r);
      logs_ = std::make_unique<OffsetsLogs>(*reactor_, root, partitions);
      ready_.store(logs_->ok() ? 1 : -1);
      reactor_->run();
      logs_->close();
      logs_.reset();
    });
    while (ready_.load() == 0)
      std::this_thread::yield();
  }
  ~ShardThread() { stop(); }

  bool ok() const { return ready_.load() == 1; }
  io::Reactor& reactor() { return *reactor_; }

  PartitionStore::RunOn run_on() {
    return [this](std::int32_t p, PartitionStore::PartitionFn fn) {
      reactor_->post_fn([this, p, fn = std::move(fn)]() mutable { fn(logs_->partition(p)); });
    };
  }

  void stop() {
    if (!thread_.joinable()) return;
    if (reactor_) reactor_->stop();
    thread_.join();
  }

 private:
  std::thread thread_;
  std::atomic<int> ready_{0};
  std::unique_ptr<io::Reactor> reactor_;
  std::unique_ptr<OffsetsLogs> logs_;
};

// ConsumerProtocolSubscription v0: version, topics, null user data.
inline Bytes subscription(std::initializer_list<std::string_view> topics) {
  Bytes out;
  auto put16 = [&](std::int16_t v) {
    out.resize(out.size() + 2);
    store_be<std::int16_t>(out.data() + out.size() - 2, v);
  };
  auto put32 = [&](std::int32_t v) {
    out.resize(out.size() + 4);
    store_be<std::int32_t>(out.data() + out.size() - 4, v);
  };
  put16(0);
  put32(static_cast<std::int32_t>(topics.size()));
  for (auto t : topics) {
    put16(static_cast<std::int16_t>(t.size()));
    for (char c : t)
      out.push_back(static_cast<std::byte>(c));
  }
  put32(-1);
  return out;
}

inline Bytes bytes(std::string_view s) {
  Bytes out;
  for (char c : s)
    out.push_back(static_cast<std::byte>(c));
  return out;
}

// A callback's result, filled when the coordinator answers.
template <class T>
struct Slot {
  std::shared_ptr<std::optional<T>> v = std::make_shared<std::optional<T>>();
  GroupCoordinator::Done<T> cb() {
    return [v = v](T x) { *v = std::move(x); };
  }
  bool ready() const { return v->has_value(); }
  T& operator*() { return **v; }
  T* operator->() { return &**v; }
};

// A coordinator on the calling thread's reactor over OffsetsLogs in `root`, with synchronous
// wrappers that turn the reactor until the answer comes. A wait that runs out (a bug) sets
// timed_out and returns a default value; tests check timed_out at the end.
class Harness {
 public:
  static constexpr std::int32_t kPartitions = 4;
  static constexpr std::int64_t kWait = 20'000'000'000;  // never reached when correct

  explicit Harness(std::filesystem::path root) : root_(std::move(root)) {
    auto r = io::Reactor::create({.name = "coordinator"});
    if (r) reactor = std::move(*r);
    opts.initial_rebalance_delay_ms = 0;
    opts.min_session_timeout_ms = 10;
    opts.max_session_timeout_ms = 60000;
    opts.load_retry_ms = 10;
  }
  ~Harness() { stop(); }

  // Opens the logs and a coordinator over them; start_now: start() and wait for the load.
  bool open(bool start_now = true) {
    logs = std::make_unique<OffsetsLogs>(*reactor, root_, kPartitions);
    if (!logs->ok()) return false;
    coord = std::make_unique<GroupCoordinator>(
        *reactor, opts, std::make_unique<PartitionStore>(*reactor, logs->run_on()));
    if (!start_now) return true;
    coord->start(kPartitions);
    return reactor->run_until([&] { return coord->loaded(); }, kWait);
  }
  void stop() {
    if (coord && logs) {
      // Writes the coordinator started without waiting (an empty generation) finish and are
      // handed back to it before it goes, as they would be in a running broker.
      reactor->run_until([&] { return logs->idle(); }, kWait);
      for (int i = 0; i < 3; ++i)
        reactor->run_once(0);
    }
    coord.reset();
    if (logs) logs->close();
    logs.reset();
  }
  // A broker restart: everything in memory is gone, the logs are replayed.
  bool restart() {
    stop();
    return open();
  }

  template <class T>
  T wait(Slot<T>& s) {
    if (!reactor->run_until([&] { return s.ready(); }, kWait)) timed_out = true;
    return s.ready() ? *s : T{};
  }

  JoinRequest join_req(const std::string& group, const std::string& member = "",
                       std::vector<Protocol> protocols = {{"range", subscription({"t1"})}}) {
    JoinRequest r;
    r.group_id = group;
    r.member_id = member;
    r.client_id = "client";
    r.client_host = "/127.0.0.1";
    r.session_timeout_ms = 10000;
    r.rebalance_timeout_ms = 10000;
    r.protocol_type = "consumer";
    r.protocols = std::move(protocols);
    return r;
  }
  Slot<JoinResult> join_async(JoinRequest r) {
    Slot<JoinResult> s;
    coord->join_group(std::move(r), s.cb());
    return s;
  }
  JoinResult join(JoinRequest r) {
    auto s = join_async(std::move(r));
    return wait(s);
  }
  Slot<SyncResult> sync_async(const std::string& group, const std::string& member,
                              std::int32_t generation,
                              std::vector<std::pair<std::string, Bytes>> assignments = {}) {
    SyncRequest r;
    r.group_id = group;
    r.member_id = member;
    r.generation = generation;
    r.assignments = std::move(assignments);
    Slot<SyncResult> s;
    coord->sync_group(std::move(r), s.cb());
    return s;
  }
  SyncResult sync(const std::string& group, const std::string& member, std::int32_t generation,
                  std::vector<std::pair<std::string, Bytes>> assignments = {}) {
    auto s = sync_async(group, member, generation, std::move(assignments));
    return wait(s);
  }
  ErrorCode heartbeat(const std::string& group, const std::string& member, std::int32_t generation,
                      std::optional<std::string> instance = std::nullopt) {
    Slot<ErrorCode> s;
    coord->heartbeat({group, generation, member, std::move(instance)}, s.cb());
    return wait(s);
  }
  LeaveResult leave(const std::string& group, std::vector<LeaveMember> members) {
    Slot<LeaveResult> s;
    coord->leave_group({group, std::move(members)}, s.cb());
    return wait(s);
  }
  CommitResult commit(CommitRequest r) {
    Slot<CommitResult> s;
    coord->commit_offsets(std::move(r), s.cb());
    return wait(s);
  }
  CommitResult simple_commit(const std::string& group, std::vector<CommitPartition> parts) {
    CommitRequest r;
    r.group_id = group;
    r.partitions = std::move(parts);
    return commit(std::move(r));
  }
  FetchResult fetch(const std::string& group,
                    std::optional<std::vector<FetchTopic>> topics = std::nullopt) {
    Slot<FetchResult> s;
    coord->fetch_offsets({group, std::move(topics), false}, s.cb());
    return wait(s);
  }
  // The committed offset, -1 if none, -2 if the fetch failed.
  std::int64_t committed(const std::string& group, const std::string& topic,
                         std::int32_t partition) {
    auto f = fetch(group, std::vector<FetchTopic>{{topic, {partition}}});
    if (f.error != ErrorCode::none || f.offsets.size() != 1) return -2;
    return f.offsets[0].offset;
  }
  GroupCoordinator::GroupSnapshot snap(const std::string& group) {
    auto s = coord->snapshot(group);
    return s ? *s : GroupCoordinator::GroupSnapshot{};
  }

  // n members join in one turn (no member id round trip), the leader assigns "a<i>" to the
  // i-th member, everyone syncs. ok is false if any step failed.
  struct Formed {
    std::vector<std::string> members;
    std::int32_t generation = -1;
    std::string leader;
    bool ok = true;
  };
  Formed form(const std::string& group, int n, JoinRequest proto = {}) {
    Formed f;
    if (proto.group_id.empty()) proto = join_req(group);
    std::vector<Slot<JoinResult>> joins;
    for (int i = 0; i < n; ++i)
      joins.push_back(join_async(proto));
    for (auto& j : joins) {
      JoinResult r = wait(j);
      f.ok &= r.error == ErrorCode::none;
      f.members.push_back(r.member_id);
      f.generation = r.generation;
      f.leader = r.leader;
    }
    std::vector<std::pair<std::string, Bytes>> assignments;
    for (int i = 0; i < n; ++i)
      assignments.emplace_back(f.members[i], bytes("a" + std::to_string(i)));
    std::vector<Slot<SyncResult>> syncs;
    for (int i = 0; i < n; ++i) {
      if (f.members[i] == f.leader) continue;
      syncs.push_back(sync_async(group, f.members[i], f.generation));
    }
    f.ok &= sync(group, f.leader, f.generation, assignments).error == ErrorCode::none;
    for (auto& s : syncs)
      f.ok &= wait(s).error == ErrorCode::none;
    return f;
  }

  std::unique_ptr<io::Reactor> reactor;
  GroupCoordinator::Options opts;
  std::unique_ptr<OffsetsLogs> logs;
  std::unique_ptr<GroupCoordinator> coord;
  bool timed_out = false;

 private:
  std::filesystem::path root_;
};

}  // namespace samsa::coordinator::testing
