#include "daemon/cluster/controller_channel.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "net/backend.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/describe_cluster_request.h"
#include "net/kafka/gen/describe_cluster_response.h"
#include "net/kafka/wire.h"

namespace samsa::cluster {
namespace {

// The most a controller's answer may hold (a metadata fetch asks for 8 MiB).
constexpr std::uint32_t kMaxAnswerBytes = 64u << 20;

// What the calling thread and the reactor share. gen names the current connection: the
// callbacks of an earlier one (still on their way when it was given up) are ignored.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t gen = 0;
  bool up = false;    // on_connected, and no failure since
  bool down = false;  // the attempt or the connection failed
  std::optional<std::vector<std::byte>> answer;
  std::uint64_t released = 0;  // connections destroyed on the reactor
};

// The reactor's side of one connection. Created and destroyed on the reactor only; a task
// dropped unrun (the reactor gone at exit) leaks it rather than touch it from another thread.
struct Side final : net::ClientHandler {
  Side(std::shared_ptr<Shared> s, std::uint64_t g) : sh(std::move(s)), gen(g) {}
  void on_connected(net::ClientConnection&) override {
    std::lock_guard lk(sh->mu);
    if (gen != sh->gen) return;
    sh->up = true;
    sh->cv.notify_all();
  }
  void on_response(net::ClientConnection&, net::Buffer frame) override {
    std::lock_guard lk(sh->mu);
    if (gen != sh->gen) return;
    sh->answer.emplace(frame.data(), frame.data() + frame.size());
    sh->cv.notify_all();
  }
  void on_disconnected(net::ClientConnection&, int) override { failed(); }
  void failed() {
    std::lock_guard lk(sh->mu);
    if (gen != sh->gen) return;
    sh->up = false;
    sh->down = true;
    sh->cv.notify_all();
  }

  std::shared_ptr<Shared> sh;
  const std::uint64_t gen;
  std::unique_ptr<net::ClientConnection> conn;
};

class ReactorChannel final : public ControllerChannel {
 public:
  ReactorChannel(io::Reactor& r, net::ClientFactory f)
      : r_(r), factory_(std::move(f)), sh_(std::make_shared<Shared>()) {}
  ~ReactorChannel() override { disconnect(); }

  bool connect(const std::string& host, std::uint16_t port) override {
    disconnect();
    std::uint64_t gen = 0;
    {
      std::lock_guard lk(sh_->mu);
      gen = ++sh_->gen;
      sh_->up = sh_->down = false;
      sh_->answer.reset();
    }
    auto* side = new Side(sh_, gen);
    side_ = side;
    net::ClientOptions o;
    o.host = host;
    o.port = port;
    o.max_frame_bytes = kMaxAnswerBytes;
    o.connect_timeout_ms = kConnectTimeoutMs;
    o.request_timeout_ms = 0;  // exchange()'s deadline rules
    r_.post_fn([side, f = factory_, o = std::move(o), r = &r_]() mutable {
      side->conn =
          f ? f(*r, *side, std::move(o)) : net::ClientConnection::create(*r, *side, std::move(o));
    });
    bool up = false;
    {
      std::unique_lock lk(sh_->mu);
      sh_->cv.wait_for(lk, std::chrono::milliseconds(kConnectTimeoutMs + 500),
                       [&] { return sh_->up || sh_->down; });
      up = sh_->up;
    }
    if (!up) disconnect();
    return up;
  }

  void disconnect() override {
    if (!side_) return;
    Side* side = side_;
    side_ = nullptr;
    std::uint64_t want = 0;
    {
      std::lock_guard lk(sh_->mu);
      ++sh_->gen;  // what the old connection still reports is ignored
      sh_->up = sh_->down = false;
      sh_->answer.reset();
      want = ++releases_;
    }
    r_.post_fn([side, sh = sh_] {
      side->conn.reset();  // on the reactor, as ClientConnection requires
      delete side;
      std::lock_guard lk(sh->mu);
      ++sh->released;
      sh->cv.notify_all();
    });
    // The connection is gone from the stack before the caller goes on (at shutdown the stack
    // is detached and destroyed after the link stops). A stopped reactor never runs the task.
    std::unique_lock lk(sh_->mu);
    sh_->cv.wait_for(lk, std::chrono::seconds(2),
                     [&] { return sh_->released >= want || r_.stopping(); });
  }

  bool connected() const override { return side_ != nullptr; }

  std::optional<std::vector<std::byte>> exchange(std::span<const std::byte> frame,
                                                 std::int64_t timeout_ms,
                                                 const std::atomic<bool>& stop) override {
    if (!side_) return std::nullopt;
    {
      std::lock_guard lk(sh_->mu);
      if (!sh_->up) return std::nullopt;
      sh_->answer.reset();
    }
    net::Buffer b(frame.size());
    std::memcpy(b.data(), frame.data(), frame.size());
    r_.post_fn([side = side_, b = std::move(b)]() mutable {
      if (!side->conn || !side->conn->send(std::move(b))) side->failed();
    });
    const std::int64_t deadline = mono_ms() + timeout_ms;
    std::unique_lock lk(sh_->mu);
    for (;;) {
      if (sh_->answer) {
        auto out = std::move(sh_->answer);
        sh_->answer.reset();
        return out;
      }
      const std::int64_t left = deadline - mono_ms();
      if (sh_->down || left <= 0 || stop.load() || r_.stopping()) return std::nullopt;
      sh_->cv.wait_for(lk, std::chrono::milliseconds(std::min<std::int64_t>(left, 100)));
    }
  }

 private:
  static constexpr std::int64_t kConnectTimeoutMs = 1000;

  io::Reactor& r_;
  net::ClientFactory factory_;
  std::shared_ptr<Shared> sh_;
  Side* side_ = nullptr;  // the current connection's (touched on the reactor only)
  std::uint64_t releases_ = 0;
};

}  // namespace

std::unique_ptr<ControllerChannel> reactor_controller_channel(io::Reactor& r,
                                                              net::ClientFactory factory) {
  return std::make_unique<ReactorChannel>(r, std::move(factory));
}

namespace {

std::expected<std::string, std::string> ask_cluster_id(ControllerChannel& ch,
                                                       const std::string& host, std::uint16_t port,
                                                       std::int64_t timeout_ms) {
  const std::int64_t deadline = mono_ms() + timeout_ms;
  std::atomic<bool> never{false};
  std::int64_t next_line = 0;
  while (mono_ms() < deadline) {
    if (ch.connect(host, port)) {
      kafka::DescribeClusterRequest req;
      auto frame = kafka::flatten(kafka::encode_request(req, 0, 1, "samsa-broker"));
      auto resp = ch.exchange(frame, 5000, never);
      ch.disconnect();
      if (resp) {
        auto h = kafka::decode_response_header(*resp, kafka::DescribeClusterResponse::kApiKey, 0);
        kafka::DescribeClusterResponse r;
        if (h.ok() && kafka::decode_response_body(*resp, h, 0, r) == kafka::DecodeError::none &&
            r.error_code == 0 && !r.cluster_id.empty())
          return r.cluster_id;
      }
    }
    if (mono_ms() >= next_line) {
      LOG_INFO("waiting for the controller at %s:%u to learn the cluster id", host.c_str(), port);
      next_line = mono_ms() + 10'000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return std::unexpected("controller.quorum.bootstrap.servers: the controller at " + host + ":" +
                         std::to_string(port) + " did not answer within " +
                         std::to_string(timeout_ms / 1000) +
                         " s; a new broker learns the cluster id from it");
}

}  // namespace

std::expected<std::string, std::string> controller_cluster_id(net::Backend& backend,
                                                              const std::string& host,
                                                              std::uint16_t port,
                                                              std::int64_t timeout_ms) {
  std::mutex mu;
  std::condition_variable cv;
  io::Reactor* reactor = nullptr;
  std::string error;
  std::thread t([&] {
    set_thread_name("cluster-boot");
    auto r = io::Reactor::create({.name = "cluster-boot"});
    if (!r) {
      std::lock_guard lk(mu);
      error = std::string("cluster-boot: io_uring setup failed: ") + std::strerror(-r.error());
      cv.notify_all();
      return;
    }
    backend.attach(net::Backend::kBootReactor, **r);
    {
      std::lock_guard lk(mu);
      reactor = r->get();
    }
    cv.notify_all();
    (*r)->run();
    backend.detach(net::Backend::kBootReactor);
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return reactor || !error.empty(); });
  }
  if (!reactor) {
    t.join();
    return std::unexpected(error);
  }
  std::expected<std::string, std::string> id;
  {
    auto ch = reactor_controller_channel(*reactor, backend.client_factory());
    id = ask_cluster_id(*ch, host, port, timeout_ms);
  }  // its connection is gone before the backend's device changes reactors
  reactor->stop();
  t.join();
  return id;
}

}  // namespace samsa::cluster
