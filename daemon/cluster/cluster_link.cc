#include "daemon/cluster/cluster_link.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/broker_heartbeat_request.h"
#include "net/kafka/gen/broker_heartbeat_response.h"
#include "net/kafka/gen/broker_registration_request.h"
#include "net/kafka/gen/broker_registration_response.h"
#include "net/kafka/gen/describe_quorum_request.h"
#include "net/kafka/gen/describe_quorum_response.h"
#include "net/kafka/wire.h"
#include "replication/cluster_wire.h"

namespace samsa::cluster {
namespace {

using kafka::ErrorCode;

constexpr std::int16_t kRegistrationVersion = 4;
constexpr std::int16_t kHeartbeatVersion = 1;
constexpr std::int16_t kDescribeQuorumVersion = 0;
constexpr std::int64_t kRequestTimeoutMs = 3000;
// How long a forwarded request may wait for the controller to be reachable, or an answer for
// the metadata that shows its effect.
constexpr std::int64_t kForwardWaitMs = 10'000;
// The longest the loop sleeps between turns while nothing is queued.
constexpr std::int64_t kIdleWaitMs = 100;

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
  interrupt_.store(true);
  if (thread_.joinable()) thread_.join();
  std::deque<Forward> left;
  {
    std::lock_guard lk(mu_);
    left.swap(queue_);
  }
  for (auto& f : left)
    f.done(std::nullopt, -1);
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
  {
    std::lock_guard lk(mu_);
    queue_.push_back(Forward{std::move(frame), std::move(done), mono_ms()});
  }
  wake_.notify_one();
}

void ClusterLink::set_controller(const std::string& host, std::uint16_t port) {
  {
    std::lock_guard lk(mu_);
    if (host == opts_.host && port == opts_.port && !moved_) return;
    next_host_ = host;
    next_port_ = port;
    moved_ = true;
    if (host != opts_.host || port != opts_.port) interrupt_.store(true);
  }
  wake_.notify_one();
}

// Between exchanges: a new active controller means a new connection.
void ClusterLink::follow_controller() {
  std::lock_guard lk(mu_);
  if (!moved_) return;
  moved_ = false;
  if (!stop_.load()) interrupt_.store(false);
  if (next_host_ == opts_.host && next_port_ == opts_.port) return;
  LOG_INFO("the active controller is now at %s:%u", next_host_.c_str(), next_port_);
  opts_.host = next_host_;
  opts_.port = next_port_;
  channel_->disconnect();
  connected_.store(false);
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
  return channel_->exchange(frame, timeout_ms, interrupt_);
}

bool ClusterLink::do_register() {
  replication::BrokerRegistration reg;
  reg.broker_id = opts_.node_id;
  reg.incarnation_id = opts_.incarnation_id;
  reg.endpoints = opts_.endpoints;
  reg.log_dirs = opts_.log_dirs;
  reg.rack = opts_.rack;
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

// The controller's high watermark now (DescribeQuorum on the same connection): asked after a
// forwarded answer, it covers the change that answer reports, so the broker answers its client
// once its own image (fetched by the quorum observer, replication::Controller) reaches it.
std::optional<std::int64_t> ClusterLink::controller_high_watermark() {
  kafka::DescribeQuorumRequest req;
  auto& t = req.topics.emplace_back();
  t.topic_name = "__cluster_metadata";
  t.partitions.emplace_back().partition_index = 0;
  const std::int32_t corr = next_correlation_++;
  auto frame =
      kafka::flatten(kafka::encode_request(req, kDescribeQuorumVersion, corr, "samsa-broker"));
  auto resp = exchange(frame, kRequestTimeoutMs);
  if (!resp) return std::nullopt;
  auto h = kafka::decode_response_header(*resp, kafka::DescribeQuorumResponse::kApiKey,
                                         kDescribeQuorumVersion);
  kafka::DescribeQuorumResponse r;
  if (!h.ok() ||
      kafka::decode_response_body(*resp, h, kDescribeQuorumVersion, r) != kafka::DecodeError::none)
    return std::nullopt;
  if (r.error_code != 0 || r.topics.empty() || r.topics.front().partitions.empty())
    return std::nullopt;
  const auto& p = r.topics.front().partitions.front();
  if (p.error_code != 0) return std::nullopt;
  return p.high_watermark;
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
  const auto hw = controller_high_watermark();
  // Without it the answer goes at once (the change is committed; only this broker's image may
  // lag behind it a moment).
  f.done(std::move(*resp), hw ? *hw - 1 : -1);
  return hw.has_value();
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
}

void ClusterLink::run() {
  set_thread_name("cluster-link");
  bool announced = false;
  while (!stop_.load()) {
    expire_waiting();
    follow_controller();
    if (!channel_->connected()) {
      if (!connect_controller()) {
        if (!announced || mono_ms() - unreachable_log_ms_ > 10'000) {
          LOG_WARN("cannot reach the controller at %s:%u; retrying", opts_.host.c_str(),
                   opts_.port);
          unreachable_log_ms_ = mono_ms();
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
      // Until the next heartbeat, or a forward queued meanwhile.
      const std::int64_t until_hb = epoch_ >= 0 ? next_heartbeat_ms_ - mono_ms() : kIdleWaitMs;
      const std::int64_t wait = std::clamp<std::int64_t>(until_hb, 0, catch_up ? 10 : kIdleWaitMs);
      std::unique_lock lk(mu_);
      wake_.wait_for(lk, std::chrono::milliseconds(wait),
                     [&] { return !queue_.empty() || moved_ || stop_.load(); });
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
