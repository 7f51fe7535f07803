#include "coordinator/store.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "base/bytes.h"
#include "base/clock.h"
#include "coordinator/records.h"
#include "io/record_batch.h"
#include "replication/partition.h"

namespace samsa::coordinator {
namespace {

// One load step reads at most this much (at least one whole batch).
constexpr std::size_t kLoadChunkBytes = 1u << 20;

// Kafka's offsets.commit.timeout.ms: how long a write waits for the ISR before it fails.
constexpr std::int64_t kCommitTimeoutMs = 5000;

// A write of the coordinator's records: a produce with acks=all (Partition::produce: refused
// while the ISR is below min.insync.replicas, answered once the high watermark, the ISR's durable
// end, has passed it, so a committed offset survives the loss of this leader).
struct PendingAppend : replication::ProduceOp {
  std::vector<std::byte> bytes;
  const std::string* topic = nullptr;
  OffsetsStore::AppendDone reply;
  io::Reactor* home = nullptr;
};

// Any thread: hands the outcome to the coordinator's thread, which owns (and frees) the op.
void finish_append(PendingAppend* op, std::optional<io::Error> err) {
  op->home->post_fn([op, err = std::move(err)]() mutable {
    std::unique_ptr<PendingAppend> own(op);
    own->reply(std::move(err));
  });
}

// The partition's thread: the produce's outcome. The one place where a coordinator write is
// declared committed: a commit, an assignment or a deletion is answered from here.
// NOT_LEADER_OR_FOLLOWER becomes not_found (NOT_COORDINATOR: the group moved with the
// leadership); a batch over max.message.bytes batch_too_large (INVALID_COMMIT_OFFSET_SIZE);
// anything else io_error (COORDINATOR_NOT_AVAILABLE: retriable).
void on_produced(replication::ProduceOp* p) {
  auto* op = static_cast<PendingAppend*>(p);
  if (op->error == kafka::ErrorCode::none) {
    finish_append(op, std::nullopt);
    return;
  }
  const io::Errc code = op->log_error ? *op->log_error
                        : op->error == kafka::ErrorCode::not_leader_or_follower
                            ? io::Errc::not_found
                            : io::Errc::io_error;
  finish_append(op, io::Error{code, *op->topic + ": the write was not taken (" +
                                        std::string(kafka::error_name(op->error)) +
                                        (op->message.empty() ? "" : ": " + op->message) + ")"});
}

bool pread_full(int fd, std::byte* out, std::size_t n, std::uint64_t pos, std::string* why) {
  while (n > 0) {
    ssize_t r = ::pread(fd, out, n, static_cast<off_t>(pos));
    if (r < 0) {
      if (errno == EINTR) continue;
      *why = std::string("pread: ") + std::strerror(errno);
      return false;
    }
    if (r == 0) {
      *why = "pread: unexpected end of file";
      return false;
    }
    out += r;
    n -= static_cast<std::size_t>(r);
    pos += static_cast<std::uint64_t>(r);
  }
  return true;
}

}  // namespace

void PartitionStore::append(std::int32_t partition, std::vector<std::byte> batch, AppendDone done) {
  auto* op = new PendingAppend();
  op->bytes = std::move(batch);
  op->reply = std::move(done);
  op->home = &home_;
  op->topic = &topic_;
  run_on_(partition, [op, partition](replication::Partition* part) {
    if (!part) {
      finish_append(op, io::Error{io::Errc::not_found,
                                  *op->topic + "-" + std::to_string(partition) + " is not open"});
      return;
    }
    // TxnOffsetCommit's records carry the producer's id and epoch, not its sequences.
    if (op->bytes.size() > io::batch::kAttributes + 1 &&
        (load_be<std::int16_t>(op->bytes.data() + io::batch::kAttributes) &
         io::batch::kTransactionalBit))
      op->origin = replication::AppendOrigin::coordinator;
    // Kafka writes the group's records with acks=all and offsets.commit.timeout.ms.
    op->batch = op->bytes;
    op->acks = -1;
    op->deadline_ns = mono_ns() + kCommitTimeoutMs * 1'000'000;
    op->produced = &on_produced;
    part->produce(op);
  });
}

struct PartitionStore::Load {
  std::int32_t partition = 0;
  BatchVisitor visit;
  LoadDone done;
  std::int64_t next = -1;
  std::int64_t end = -1;  // the partition's written end when the load began
};

void PartitionStore::load(std::int32_t partition, BatchVisitor visit, LoadDone done) {
  auto* l = new Load();
  l->partition = partition;
  l->visit = std::move(visit);
  l->done = std::move(done);
  load_step(l);
}

// Coordinator thread: asks the owning thread for the next run of batches. The read happens
// there (the log is that thread's); the bytes are read here, from the segment files the slices
// keep open, so the shard's loop never blocks on the disk for us.
void PartitionStore::load_step(Load* l) {
  io::Reactor* home = &home_;
  auto finish = [home, l](std::optional<io::Error> err) {
    home->post_fn([l, err = std::move(err)]() mutable {
      std::unique_ptr<Load> own(l);
      own->done(std::move(err));
    });
  };
  run_on_(l->partition, [this, home, l, finish](replication::Partition* part) mutable {
    if (!part) {
      finish(io::Error{io::Errc::not_found,
                       topic_ + "-" + std::to_string(l->partition) + " is not open"});
      return;
    }
    if (l->end < 0) {
      // To the log's end, as Kafka's loader reads: a new leader's log is the partition's
      // history from now on, including what it holds above a high watermark that has not
      // caught up with its followers yet. (A single node at start: its HW, nothing is in
      // flight.)
      l->end = part->log().written_end_offset();
      l->next = part->log_start_offset();
    }
    if (l->next >= l->end) {
      finish(std::nullopt);
      return;
    }
    auto rr = part->log().read(l->next, kLoadChunkBytes, l->end, true);
    if (!rr) {
      finish(rr.error());
      return;
    }
    home->post_fn([this, l, rr = std::move(*rr)]() mutable { load_chunk(l, std::move(rr)); });
  });
}

void PartitionStore::load_chunk(Load* l, io::ReadResult rr) {
  std::vector<std::byte> buf;
  for (const io::Slice& s : rr.slices) {
    buf.resize(s.length);
    std::string why;
    if (!pread_full(s.file->fd, buf.data(), buf.size(), s.position, &why)) {
      std::unique_ptr<Load> own(l);
      own->done(io::Error{io::Errc::io_error, s.file->path.string() + ": " + why});
      return;
    }
    std::span<const std::byte> rest(buf);
    while (rest.size() >= io::batch::kLogOverhead) {
      const std::int32_t len = load_be<std::int32_t>(rest.data() + io::batch::kLength);
      const std::size_t total =
          io::batch::kLogOverhead + static_cast<std::size_t>(len < 0 ? 0 : len);
      if (len < 0 || total > rest.size()) break;
      l->visit(rest.first(total));
      rest = rest.subspan(total);
    }
  }
  // No progress means nothing more can be read below the end (a gap the log reports as
  // empty); stop rather than spin.
  if (rr.next_offset <= l->next) {
    std::unique_ptr<Load> own(l);
    own->done(std::nullopt);
    return;
  }
  l->next = rr.next_offset;
  load_step(l);
}

}  // namespace samsa::coordinator
