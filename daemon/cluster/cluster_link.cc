#include "daemon/cluster/cluster_link.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "io/record_batch.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/broker_heartbeat_request.h"
#include "net/kafka/gen/broker_heartbeat_response.h"
#include "net/kafka/gen/broker_registration_request.h"
#include "net/kafka/gen/broker_registration_response.h"
#include "net/kafka/gen/fetch_request.h"
#include "net/kafka/gen/fetch_response.h"
#include "net/kafka/wire.h"
#include "replication/cluster_wire.h"

namespace samsa::cluster {
namespace {

using kafka::ErrorCode;

constexpr std::int16_t kRegistrationVersion = 4;
constexpr std::int16_t kHeartbeatVersion = 1;
constexpr std::int16_t kFetchVersion = 12;  // topics by name
constexpr std::int64_t kRequestTimeoutMs = 3000;
// How long a forwarded request may wait for the controller to be reachable, or an answer for
// the metadata that shows its effect.
constexpr std::int64_t kForwardWaitMs = 10'000;
constexpr std::int32_t kFetchWaitMs = 100;
constexpr std::int32_t kFetchMaxBytes = 8 << 20;

// The end of the whole batches in buf: the offset after the last one's last record.
std::int64_t end_of_batches(std::span<const std::byte> buf, std::int64_t from) {
  std::size_t pos = 0;
  std::int64_t end = from;
  while (pos + io::batch::kHeaderSize <= buf.size()) {
    io::BatchInfo info = io::batch::parse_header(buf.data() + pos);
    if (info.length <= 0 || pos + static_cast<std::size_t>(info.length) > buf.size()) break;
    end = info.base_offset + info.last_offset_delta + 1;
    pos += static_cast<std::size_t>(info.length);
  }
  return end;
}

}  // namespace

ClusterLink::ClusterLink(Options o) : opts_(std::move(o)), channel_(std::move(opts_.channel)) {}

ClusterLink::~ClusterLink() {
  stop();
}

void ClusterLink::start() {
  thread_ = std::thread([this] { run(); });
}

void ClusterLink::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  std::deque<Forward> left;
  {
    std::lock_guard lk(mu_);
    left.swap(queue_);
  }
  for (auto& f : left)
    f.done(std::nullopt, -1);
  for (auto& b : barriers_)
    b.done(std::nullopt, -1);
  barriers_.clear();
}

bool ClusterLink::controlled_shutdown(std::int64_t timeout_ms) {
  if (!thread_.joinable()) return false;
  want_shut_down_.store(true);
  const std::int64_t start = mono_ms();
  const std::int64_t end = start + timeout_ms;
  while (!may_shut_down_.load() && mono_ms() < end) {
    // No controller to ask (it stopped first): nothing will move the leaderships; stop now
    // rather than after the whole timeout.
    if (!connected_.load() && mono_ms() - start > 300) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return may_shut_down_.load();
}

void ClusterLink::forward(std::vector<std::byte> frame, ForwardDone done) {
  std::lock_guard lk(mu_);
  queue_.push_back(Forward{std::move(frame), std::move(done), mono_ms()});
}

bool ClusterLink::connect_controller() {
  const bool ok = channel_->connect(opts_.host, opts_.port);
  connected_.store(ok);
  return ok;
}

void ClusterLink::disconnect() {
  channel_->disconnect();
  connected_.store(false);
}

std::optional<std::vector<std::byte>> ClusterLink::exchange(std::span<const std::byte> frame,
                                                            std::int64_t timeout_ms) {
  return channel_->exchange(frame, timeout_ms, stop_);
}

bool ClusterLink::do_register() {
  replication::BrokerRegistration reg;
  reg.broker_id = opts_.node_id;
  reg.incarnation_id = opts_.incarnation_id;
  reg.endpoints = opts_.endpoints;
  auto body = replication::registration_request(reg, opts_.cluster_id);
  const std::int32_t corr = next_correlation_++;
  auto frame =
      kafka::flatten(kafka::encode_request(body, kRegistrationVersion, corr, "samsa-broker"));
  auto resp = exchange(frame, kRequestTimeoutMs);
  if (!resp) return false;
  auto h = kafka::decode_response_header(*resp, kafka::BrokerRegistrationResponse::kApiKey,
                                         kRegistrationVersion);
  kafka::BrokerRegistrationResponse r;
  if (!h.ok() ||
      kafka::decode_response_body(*resp, h, kRegistrationVersion, r) != kafka::DecodeError::none)
    return false;
  auto a = replication::registration_answer_of(r);
  if (a.error != ErrorCode::none) {
    // DUPLICATE_BROKER_REGISTRATION: our previous incarnation's session has not expired yet.
    if (a.error != last_refusal_ || mono_ms() - last_refusal_ms_ > 10'000) {
      LOG_WARN("registration with the controller refused (%s); retrying",
               std::string(kafka::error_name(a.error)).c_str());
      last_refusal_ = a.error;
      last_refusal_ms_ = mono_ms();
    }
    return true;  // the connection is fine; try again after a pause
  }
  epoch_ = a.broker_epoch;
  fenced_ = true;
  registered_ms_ = mono_ms();
  next_heartbeat_ms_ = 0;
  LOG_INFO("registered with the controller %s:%u as broker %d (epoch %lld)", opts_.host.c_str(),
           opts_.port, opts_.node_id, static_cast<long long>(epoch_));
  return true;
}

bool ClusterLink::do_heartbeat() {
  replication::Heartbeat hb;
  hb.broker_id = opts_.node_id;
  hb.broker_epoch = epoch_;
  hb.current_metadata_offset = applied_.load(std::memory_order_acquire);
  hb.want_shut_down = want_shut_down_.load();
  auto body = replication::heartbeat_request(hb);
  const std::int32_t corr = next_correlation_++;
  auto frame = kafka::flatten(kafka::encode_request(body, kHeartbeatVersion, corr, "samsa-broker"));
  auto resp = exchange(frame, kRequestTimeoutMs);
  if (!resp) return false;
  auto h = kafka::decode_response_header(*resp, kafka::BrokerHeartbeatResponse::kApiKey,
                                         kHeartbeatVersion);
  kafka::BrokerHeartbeatResponse r;
  if (!h.ok() ||
      kafka::decode_response_body(*resp, h, kHeartbeatVersion, r) != kafka::DecodeError::none)
    return false;
  auto a = replication::heartbeat_answer_of(r);
  // While shutting down, ask again soon until the controller lets this broker go.
  next_heartbeat_ms_ = mono_ms() + (hb.want_shut_down ? 20 : opts_.heartbeat_interval_ms);
  if (a.error == ErrorCode::stale_broker_epoch) {
    LOG_WARN("the controller no longer knows broker epoch %lld; registering again",
             static_cast<long long>(epoch_));
    epoch_ = -1;
    return true;
  }
  if (a.error != ErrorCode::none) return true;
  if (hb.want_shut_down && a.should_shut_down && !may_shut_down_.load()) {
    LOG_INFO("controlled shutdown: the controller moved this broker's leaderships away");
    may_shut_down_.store(true);
  }
  if (fenced_ && !a.is_fenced)
    LOG_INFO("unfenced by the controller %lld ms after registering (metadata offset %lld)",
             static_cast<long long>(mono_ms() - registered_ms_),
             static_cast<long long>(hb.current_metadata_offset));
  if (!fenced_ && a.is_fenced && !hb.want_shut_down) LOG_WARN("fenced by the controller");
  fenced_ = a.is_fenced;
  return true;
}

bool ClusterLink::do_fetch(std::int32_t max_wait_ms) {
  kafka::FetchRequest req;
  req.cluster_id = opts_.cluster_id.empty() ? std::nullopt : std::optional(opts_.cluster_id);
  req.replica_id = opts_.node_id;
  req.max_wait_ms = max_wait_ms;
  req.min_bytes = 1;
  req.max_bytes = kFetchMaxBytes;
  req.session_id = 0;
  req.session_epoch = -1;
  kafka::FetchRequest::FetchTopic t;
  t.topic = "__cluster_metadata";
  kafka::FetchRequest::FetchPartition p;
  p.partition = 0;
  p.fetch_offset = fetch_offset_;
  p.partition_max_bytes = kFetchMaxBytes;
  t.partitions.push_back(p);
  req.topics.push_back(std::move(t));
  const std::int32_t corr = next_correlation_++;
  auto frame = kafka::flatten(kafka::encode_request(req, kFetchVersion, corr, "samsa-broker"));
  const std::int64_t sent_ms = mono_ms();
  auto resp = exchange(frame, kRequestTimeoutMs + max_wait_ms);
  if (!resp) return false;
  auto h = kafka::decode_response_header(*resp, kafka::FetchResponse::kApiKey, kFetchVersion);
  kafka::FetchResponse r;
  if (!h.ok() ||
      kafka::decode_response_body(*resp, h, kFetchVersion, r) != kafka::DecodeError::none)
    return false;
  if (r.responses.empty() || r.responses.front().partitions.empty()) return false;
  const auto& pd = r.responses.front().partitions.front();
  LOG_DEBUG("metadata fetch at %lld: error %d, hw %lld, %zu bytes",
            static_cast<long long>(fetch_offset_), pd.error_code,
            static_cast<long long>(pd.high_watermark), pd.records.view().size());
  if (pd.error_code != 0) {
    LOG_WARN("metadata fetch at offset %lld: error %d", static_cast<long long>(fetch_offset_),
             pd.error_code);
    return false;
  }
  high_watermark_ = pd.high_watermark;
  for (auto& b : barriers_)
    if (b.target < 0) b.target = high_watermark_ - 1;
  auto view = pd.records.view();
  const std::int64_t end = end_of_batches(view, fetch_offset_);
  // An empty answer before the wait was over (a controller shutting down answers at once):
  // wait it out here rather than asking again in a tight loop.
  if (view.empty() && barriers_.empty()) {
    const std::int64_t left = sent_ms + max_wait_ms - mono_ms();
    if (left > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(left, 100)));
  }
  if (end > fetch_offset_ || applied_.load() < 0) {
    std::vector<std::byte> bytes(view.begin(), view.end());
    fetch_offset_ = std::max(end, fetch_offset_);
    opts_.on_metadata(std::move(bytes), high_watermark_);
  }
  // Forwarded answers go out once what was committed before them has been fetched.
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (it->target >= 0 && fetch_offset_ > it->target) {
      it->done(std::move(it->answer), it->target);
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
  return true;
}

bool ClusterLink::do_forward() {
  Forward f;
  {
    std::lock_guard lk(mu_);
    if (queue_.empty()) return true;
    f = std::move(queue_.front());
    queue_.pop_front();
  }
  // The client's frame under our correlation id (bytes 4-7 of the request header).
  std::vector<std::byte> frame(f.frame.size() + 4);
  const auto n = static_cast<std::uint32_t>(f.frame.size());
  const auto corr = static_cast<std::uint32_t>(next_correlation_++);
  for (int i = 0; i < 4; ++i)
    frame[static_cast<std::size_t>(i)] = static_cast<std::byte>(n >> (24 - 8 * i));
  std::copy(f.frame.begin(), f.frame.end(), frame.begin() + 4);
  for (int i = 0; i < 4; ++i)
    frame[static_cast<std::size_t>(8 + i)] = static_cast<std::byte>(corr >> (24 - 8 * i));
  auto resp = exchange(frame, 30'000);
  if (!resp) {
    // The connection failed under it (a controller restart, say): sent again on the next one,
    // as Kafka's forwarding does, until expire_waiting gives it up. Failing it at once closed
    // the client's connection although the controller was back within milliseconds.
    std::lock_guard lk(mu_);
    queue_.push_front(std::move(f));
    return false;
  }
  barriers_.push_back(Barrier{std::move(*resp), std::move(f.done), -1, mono_ms()});
  return true;
}

void ClusterLink::expire_waiting() {
  const std::int64_t now = mono_ms();
  const bool gone = !channel_->connected() && want_shut_down_.load();
  std::deque<Forward> late;
  {
    std::lock_guard lk(mu_);
    while (!queue_.empty() && (gone || now - queue_.front().queued_ms > kForwardWaitMs)) {
      late.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  if (!late.empty())
    LOG_WARN("%zu requests for the controller given up: it has not been reachable", late.size());
  for (auto& f : late)
    f.done(std::nullopt, -1);
  // The controller committed these; only the metadata showing it is late. Answer anyway.
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (gone || now - it->answered_ms > kForwardWaitMs) {
      it->done(std::move(it->answer), -1);
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
}

void ClusterLink::run() {
  set_thread_name("cluster-link");
  bool announced = false;
  while (!stop_.load()) {
    expire_waiting();
    if (!channel_->connected()) {
      if (!connect_controller()) {
        if (!announced || mono_ms() - fetch_log_ms_ > 10'000) {
          LOG_WARN("cannot reach the controller at %s:%u; retrying", opts_.host.c_str(),
                   opts_.port);
          fetch_log_ms_ = mono_ms();
          announced = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      announced = false;
    }
    bool ok = true;
    if (epoch_ < 0) {
      ok = do_register();
      if (ok && epoch_ < 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    const std::int64_t now = mono_ms();
    // A fenced broker that has caught up with its registration asks at once to be unfenced.
    const bool catch_up = fenced_ && !want_shut_down_.load() && epoch_ >= 0 &&
                          applied_.load() >= epoch_ &&
                          now >= next_heartbeat_ms_ - opts_.heartbeat_interval_ms + 20;
    if (ok && epoch_ >= 0 && (now >= next_heartbeat_ms_ || catch_up)) ok = do_heartbeat();
    if (ok) ok = do_forward();
    if (ok) {
      const std::int64_t until_hb = epoch_ >= 0 ? next_heartbeat_ms_ - mono_ms() : kFetchWaitMs;
      const bool hurry = !barriers_.empty() || catch_up;
      const auto wait = static_cast<std::int32_t>(
          std::clamp<std::int64_t>(until_hb, 0, hurry ? 0 : kFetchWaitMs));
      ok = do_fetch(wait);
    }
    if (!ok) {
      LOG_WARN("lost the connection to the controller at %s:%u; reconnecting", opts_.host.c_str(),
               opts_.port);
      disconnect();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  disconnect();
}

}  // namespace samsa::cluster
