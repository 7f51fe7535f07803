// net/dpdk/conn_journal.h — the 4-tuples of the stack's open TCP connections, kept where the
// next process finds them after a kill -9.
//
// Over kernel sockets a dead process's connections are closed by the kernel and its clients
// reconnect at once. With a userspace stack nobody does that: a client waiting for an answer
// on a connection the dead process had acknowledged sends nothing more and waits for its
// request time-out (librdkafka: 60 s). The restarted stack reads this journal and probes each
// connection its predecessor held (StackImpl::probe_previous); the peer's answer to the probe
// carries the sequence number a reset needs, and lwIP answers it with that reset.
//
// A slot is filled when a connection opens and cleared when the stack lets go of it: plain
// stores into a small file mapped shared, no system call, never on the per-byte path. The page
// cache outlives the process, not the machine: after a power cut the file may be stale or
// empty, which costs at most a probe nobody answers (or one a peer answers with a reset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

namespace samsa::net::dpdk {

struct ConnTuple {
  std::uint32_t local_ip = 0;   // network byte order (lwIP's ip4_addr_t)
  std::uint32_t remote_ip = 0;  // network byte order
  std::uint16_t local_port = 0;
  std::uint16_t remote_port = 0;
  // This side opened it (a fetcher's connection), rather than accepted it on a listener.
  bool outbound = false;
  bool operator==(const ConnTuple&) const = default;
};

class ConnJournal {
 public:
  // Slots in the file: connections beyond this many open at once are not remembered.
  static constexpr std::size_t kSlots = 16384;

  ConnJournal() = default;
  ~ConnJournal();
  ConnJournal(const ConnJournal&) = delete;
  ConnJournal& operator=(const ConnJournal&) = delete;

  // A connection a previous process left, and the slot it keeps until remove(slot): a process
  // killed before it could reset them (during its start-up) passes them on to the next one.
  struct Inherited {
    ConnTuple t;
    int slot = -1;
  };
  // Opens (creating it and its folder) the journal at path and returns what earlier processes
  // left in it; the other slots are free for this process's connections.
  std::expected<std::vector<Inherited>, std::string> open(const std::string& path);
  bool is_open() const { return slots_ != nullptr; }

  // A connection opened: its slot, or -1 when the journal is full or not open.
  int add(const ConnTuple& t);
  // The connection of `slot` is gone (-1: nothing).
  void remove(int slot);
  std::size_t used() const { return used_; }

 private:
  struct Slot;
  Slot* slots_ = nullptr;
  std::vector<int> free_;
  std::size_t used_ = 0;
};

}  // namespace samsa::net::dpdk
