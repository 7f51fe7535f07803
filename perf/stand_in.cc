// The known answer for samsa-perf's latency (issue 25, perf/VALIDATION.md): a broker stand-in
// that speaks just enough of the protocol for samsa-perf's producers (ApiVersions, Metadata,
// CreateTopics, InitProducerId, Produce) and answers every Produce exactly --delay-ms after its
// last byte arrived. Records of `samsa-perf --stamp` carry their intended send time; when the
// answer to a Produce has been written, the stand-in notes for each of its records the time from
// that intended send time to the write: what the client must report as the record's latency,
// less the answer's way back through loopback and librdkafka. At exit (SIGTERM or SIGINT) it
// writes every (intended send time, latency) pair, two little-endian int64 nanoseconds each, to
// --out. Nothing is stored; offsets are counted per partition.
//
//   stand_in --delay-ms 5 --out FILE [--port 0] [--partitions 16]
//
// Prints "listening PORT" once it accepts connections. One reader and one writer thread per
// connection: the reader decodes requests as they come (librdkafka pipelines up to 5 Produce per
// connection), the writer sends each answer at its due time, in order.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "io/record_batch.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/api_versions_request.h"
#include "net/kafka/gen/api_versions_response.h"
#include "net/kafka/gen/create_topics_request.h"
#include "net/kafka/gen/create_topics_response.h"
#include "net/kafka/gen/init_producer_id_request.h"
#include "net/kafka/gen/init_producer_id_response.h"
#include "net/kafka/gen/metadata_request.h"
#include "net/kafka/gen/metadata_response.h"
#include "net/kafka/gen/produce_request.h"
#include "net/kafka/gen/produce_response.h"

namespace {

using namespace samsa;
constexpr std::uint64_t kStampMarker = 0x3146505341534d53ull;  // samsa-perf's "SMSASPF1"

struct Settings {
  int port = 0;
  std::int64_t delay_ns = 0;
  int partitions = 16;
  std::string out;
} g;

struct Sample {
  std::int64_t due;
  std::int64_t latency;
};
std::mutex g_samples_mu;
std::vector<Sample> g_samples;

std::mutex g_offsets_mu;
std::map<std::pair<std::string, std::int32_t>, std::int64_t> g_offsets;

bool read_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

std::vector<std::byte> bytes_of(const net::Response& resp) {
  std::vector<std::byte> out;
  for (const auto& piece : resp.pieces())
    out.insert(out.end(), piece.bytes.data(), piece.bytes.data() + piece.bytes.size());
  return out;
}

kafka::Uuid id_of(const std::string& name) {
  kafka::Uuid u{};
  std::uint64_t h = 1469598103934665603ull;
  for (char c : name)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::memcpy(u.data(), &h, 8);
  std::memcpy(u.data() + 8, &h, 8);
  u[0] |= 1;  // never the zero id
  return u;
}

// One answer waiting for its time: the bytes, when to send them, and the intended send times
// of the records it acknowledges.
struct Answer {
  std::vector<std::byte> bytes;
  std::int64_t due_ns = 0;
  std::vector<std::int64_t> record_dues;
};

class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  void run() {
    std::thread writer([this] { write_loop(); });
    read_loop();
    {
      std::lock_guard lk(mu_);
      closed_ = true;
    }
    cv_.notify_all();
    writer.join();
    ::close(fd_);
  }

 private:
  void read_loop() {
    std::vector<std::byte> frame;
    for (;;) {
      std::uint32_t size_be;
      if (!read_all(fd_, &size_be, 4)) return;
      frame.resize(ntohl(size_be));
      if (!read_all(fd_, frame.data(), frame.size())) return;
      const std::int64_t arrived = mono_ns();
      const auto h = kafka::decode_request_header(frame);
      if (!h.ok()) {
        std::fprintf(stderr, "stand-in: undecodable request header; closing\n");
        return;
      }
      Answer a;
      a.due_ns = arrived;
      if (!answer(frame, h, a)) return;
      if (a.bytes.empty()) continue;  // acks=0
      {
        std::lock_guard lk(mu_);
        queue_.push_back(std::move(a));
      }
      cv_.notify_one();
    }
  }

  bool answer(std::span<std::byte> frame, const kafka::DecodedRequestHeader& h, Answer& a) {
    const std::int16_t v = h.header.request_api_version;
    const std::int32_t corr = h.header.correlation_id;
    switch (static_cast<kafka::ApiKey>(h.header.request_api_key)) {
      case kafka::ApiKey::api_versions: {
        kafka::ApiVersionsResponse r;
        auto add = [&r]<class T>(std::type_identity<T>, std::int16_t max) {
          r.api_keys.push_back({T::kApiKey, T::kMinVersion, std::min(max, T::kMaxVersion)});
        };
        add(std::type_identity<kafka::ProduceRequest>{}, 9);
        add(std::type_identity<kafka::MetadataRequest>{}, 12);
        add(std::type_identity<kafka::ApiVersionsRequest>{}, 3);
        add(std::type_identity<kafka::CreateTopicsRequest>{}, 7);
        add(std::type_identity<kafka::InitProducerIdRequest>{}, 4);
        // Never answered, but librdkafka writes RecordBatch v2 only to a broker that lists
        // Fetch v4+ beside Produce v3+ (its MsgVer2 feature).
        r.api_keys.push_back({1, 4, 11});
        // ApiVersions answers in v0 framing when the client asked for more than we know.
        a.bytes = bytes_of(kafka::encode_response(r, std::min<std::int16_t>(v, 3), corr));
        return true;
      }
      case kafka::ApiKey::metadata: {
        kafka::MetadataRequest req;
        if (kafka::decode_request_body(frame, h, req) != kafka::DecodeError::none) return false;
        kafka::MetadataResponse r;
        r.brokers.push_back({1, "127.0.0.1", g.port, std::nullopt});
        r.cluster_id = "stand-in";
        r.controller_id = 1;
        for (const auto& t :
             req.topics.value_or(std::vector<kafka::MetadataRequest::MetadataRequestTopic>{})) {
          if (!t.name) continue;
          kafka::MetadataResponse::MetadataResponseTopic rt;
          rt.name = *t.name;
          rt.topic_id = id_of(*t.name);
          for (int p = 0; p < g.partitions; ++p) {
            kafka::MetadataResponse::MetadataResponsePartition rp;
            rp.partition_index = p;
            rp.leader_id = 1;
            rp.leader_epoch = 0;
            rp.replica_nodes = {1};
            rp.isr_nodes = {1};
            rt.partitions.push_back(std::move(rp));
          }
          r.topics.push_back(std::move(rt));
        }
        a.bytes = bytes_of(kafka::encode_response(r, v, corr));
        return true;
      }
      case kafka::ApiKey::create_topics: {
        kafka::CreateTopicsRequest req;
        if (kafka::decode_request_body(frame, h, req) != kafka::DecodeError::none) return false;
        kafka::CreateTopicsResponse r;
        for (const auto& t : req.topics) {
          kafka::CreateTopicsResponse::CreatableTopicResult tr;
          tr.name = t.name;
          tr.topic_id = id_of(t.name);
          tr.error_message = std::nullopt;
          tr.num_partitions = g.partitions;
          tr.replication_factor = 1;
          r.topics.push_back(std::move(tr));
        }
        a.bytes = bytes_of(kafka::encode_response(r, v, corr));
        return true;
      }
      case kafka::ApiKey::init_producer_id: {
        static std::atomic<std::int64_t> next_pid{1000};
        kafka::InitProducerIdResponse r;
        r.producer_id = next_pid++;
        a.bytes = bytes_of(kafka::encode_response(r, v, corr));
        return true;
      }
      case kafka::ApiKey::produce:
        return answer_produce(frame, h, a);
      default:
        std::fprintf(stderr, "stand-in: api key %d is not spoken here; closing\n",
                     h.header.request_api_key);
        return false;
    }
  }

  bool answer_produce(std::span<std::byte> frame, const kafka::DecodedRequestHeader& h, Answer& a) {
    kafka::ProduceRequest req;
    if (kafka::decode_request_body(frame, h, req) != kafka::DecodeError::none) return false;
    kafka::ProduceResponse r;
    for (const auto& t : req.topic_data) {
      kafka::ProduceResponse::TopicProduceResponse tr;
      tr.name = t.name;
      for (const auto& pd : t.partition_data) {
        std::int64_t records = 0;
        if (!pd.records.is_null()) records = note_records(pd.records.view(), a.record_dues);
        kafka::ProduceResponse::PartitionProduceResponse pr;
        pr.index = pd.index;
        {
          std::lock_guard lk(g_offsets_mu);
          std::int64_t& next = g_offsets[{t.name, pd.index}];
          pr.base_offset = next;
          next += records;
        }
        pr.log_start_offset = 0;
        tr.partition_responses.push_back(std::move(pr));
      }
      r.responses.push_back(std::move(tr));
    }
    if (req.acks == 0) return true;
    a.due_ns += g.delay_ns;
    a.bytes =
        bytes_of(kafka::encode_response(r, h.header.request_api_version, h.header.correlation_id));
    return true;
  }

  // The records of the batches in `b`; the stamped ones' intended send times go to dues.
  static std::int64_t note_records(std::span<const std::byte> b, std::vector<std::int64_t>& dues) {
    std::int64_t count = 0;
    while (b.size() >= io::batch::kHeaderSize) {
      const io::BatchInfo info = io::batch::parse_header(b.data());
      const auto len = static_cast<std::size_t>(info.length);
      if (len < io::batch::kHeaderSize || len > b.size()) break;
      count += info.record_count;
      if (info.compression() == 0) {
        io::batch::RecordReader rr(b.subspan(io::batch::kHeaderSize, len - io::batch::kHeaderSize),
                                   info.record_count);
        for (;;) {
          auto rec = rr.next();
          if (!rec || !*rec) break;
          const auto& value = (*rec)->value;
          if (!value || value->size() < 16) continue;
          std::int64_t due;
          std::uint64_t marker;
          std::memcpy(&due, value->data(), 8);
          std::memcpy(&marker, value->data() + 8, 8);
          if (marker == kStampMarker) dues.push_back(due);
        }
      }
      b = b.subspan(len);
    }
    return count;
  }

  void write_loop() {
    for (;;) {
      Answer a;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        a = std::move(queue_.front());
        queue_.pop_front();
      }
      timespec ts{a.due_ns / 1'000'000'000, a.due_ns % 1'000'000'000};
      while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
      if (!write_all(fd_, a.bytes.data(), a.bytes.size())) return;
      const std::int64_t sent = mono_ns();
      if (!a.record_dues.empty()) {
        std::lock_guard lk(g_samples_mu);
        for (std::int64_t d : a.record_dues)
          g_samples.push_back({d, sent - d});
      }
    }
  }

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Answer> queue_;
  bool closed_ = false;
};

int usage() {
  std::fprintf(stderr, "usage: stand_in --delay-ms MS --out FILE [--port N] [--partitions N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--delay-ms") {
      g.delay_ns = static_cast<std::int64_t>(std::atof(v) * 1e6);
    } else if (a == "--port") {
      g.port = std::atoi(v);
    } else if (a == "--partitions") {
      g.partitions = std::atoi(v);
    } else if (a == "--out") {
      g.out = v;
    } else {
      return usage();
    }
  }
  if (g.out.empty()) return usage();
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // every thread made below inherits it

  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(g.port));
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 64) != 0) {
    std::perror("stand-in: bind/listen");
    return 1;
  }
  socklen_t alen = sizeof addr;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &alen);
  g.port = ntohs(addr.sin_port);
  std::printf("listening %d\n", g.port);
  std::fflush(stdout);

  std::thread acceptor([lfd, one] {
    for (;;) {
      const int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::thread([fd] { Connection(fd).run(); }).detach();
    }
  });
  acceptor.detach();
  int sig = 0;
  sigwait(&stop, &sig);
  std::vector<Sample> out;
  {
    std::lock_guard lk(g_samples_mu);
    out.swap(g_samples);
  }
  FILE* f = std::fopen(g.out.c_str(), "wb");
  if (!f || std::fwrite(out.data(), sizeof(Sample), out.size(), f) != out.size() ||
      std::fclose(f) != 0) {
    std::perror("stand-in: writing the samples");
    return 1;
  }
  std::fprintf(stderr, "stand-in: %zu records timed\n", out.size());
  return 0;
}
