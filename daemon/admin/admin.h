// daemon::AdminServer — the admin socket (DESIGN.md decision 11) and the optional Prometheus
// metrics listener, served by one thread ("admin") with its own io::Reactor.
//
// Admin socket: a Unix stream socket (samsa.admin.socket, mode 0660, group samsa). Each peer is
// checked with SO_PEERCRED/SO_PEERGROUPS: root, the daemon's own user and members of group
// samsa are served; anyone else gets one access_denied line and is closed. The protocol is one
// JSON object per line each way, at most 1 MiB a line:
//   {"v":1,"cmd":"topic.list","args":{...}}
//   -> {"ok":true,"result":...} | {"ok":false,"error":{"code":"...","message":"..."}}
// Requests on one connection are answered in order. Bad input gets an error line and the
// connection stays usable: malformed JSON (bad_request), an over-long line (line_too_long; the
// rest of that line is read and dropped), an unknown command (unknown_command), arguments of
// the wrong type (invalid_argument). A connection that sends no complete request for
// idle_timeout_ms is closed; a command that takes longer than command_timeout_ms is answered
// with a timeout error (a reactor that stopped turning cannot hold samsactl forever).
//
// Commands run on the admin thread and reach the reactors, the controller and the coordinator
// only through their queues; they answer through a Reply, from any thread.
//
// Metrics listener (samsa.metrics.listen, host:port, off when empty): HTTP/1.1 GET /metrics
// answered with the "metrics" command's text, one request per connection.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "daemon/admin/admin_json.h"
#include "io/reactor.h"

namespace samsa::daemon {

class AdminServer;
struct Mailbox;

// Answers one admin request exactly once, from any thread (copies share the answer: the first
// call wins, later ones are ignored). A Reply dropped without an answer answers "internal".
class Reply {
 public:
  struct State;
  Reply() = default;
  explicit Reply(std::shared_ptr<State> s) : s_(std::move(s)) {}
  void ok(json::Value result) const;
  void error(std::string code, std::string message) const;
  // Who asked (SO_PEERCRED of the admin connection; uid 0 for the metrics listener).
  uid_t peer_uid() const;

 private:
  std::shared_ptr<State> s_;
};

// Error codes of the protocol (samsactl maps access_denied to exit code 3, the rest to 1).
namespace admin_error {
inline constexpr const char* bad_request = "bad_request";
inline constexpr const char* unsupported_version = "unsupported_version";
inline constexpr const char* unknown_command = "unknown_command";
inline constexpr const char* invalid_argument = "invalid_argument";
inline constexpr const char* line_too_long = "line_too_long";
inline constexpr const char* access_denied = "access_denied";
inline constexpr const char* not_found = "not_found";
inline constexpr const char* invalid_config = "invalid_config";
inline constexpr const char* timeout = "timeout";
inline constexpr const char* unavailable = "unavailable";  // starting, draining, stopping
inline constexpr const char* failed = "failed";
inline constexpr const char* internal = "internal";
}  // namespace admin_error

class AdminServer {
 public:
  struct Options {
    std::string socket_path;
    std::string metrics_listen;  // "host:port"; empty: no metrics listener
    std::int64_t idle_timeout_ms = 30000;
    std::int64_t command_timeout_ms = 30000;
    std::size_t max_line_bytes = 1u << 20;
    std::size_t max_connections = 64;
    // Group whose members may use the socket (and that owns it); absent: root and self only.
    std::string group = "samsa";
    // Fail the start when the socket cannot be bound; otherwise log it and serve without.
    bool socket_required = false;
  };
  using Command = std::function<void(const json::Value& args, Reply reply)>;

  // Binds the socket (none when socket_path is empty) and the metrics listener, then starts the
  // thread. A socket file left by a dead process is replaced; one that a live process answers
  // on is an error.
  static std::expected<std::unique_ptr<AdminServer>, std::string> start(Options opts);
  ~AdminServer();  // closes both listeners, removes the socket file, joins the thread
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Any thread, before or after start-up: later registrations replace earlier ones.
  void add_command(std::string name, Command c);
  // The thread's reactor: commands post their continuations here.
  io::Reactor& reactor() { return *reactor_; }
  const Options& options() const { return opts_; }
  std::uint16_t metrics_port() const { return metrics_port_; }
  // Runs f on the admin thread.
  template <class F>
  void post(F&& f) {
    reactor_->post_fn(std::forward<F>(f));
  }

  struct Conn;
  struct Listener;
  struct Pending;

 private:
  AdminServer() = default;
  void run();
  void arm_accept(Listener& l);
  void on_accept(Listener& l);
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void process_lines(Conn& c);
  void process_http(Conn& c);
  void dispatch(Conn& c, std::string_view line);
  void send(Conn& c, const std::string& bytes);
  void flush(Conn& c);
  void arm_poll(Conn& c, unsigned events);
  void close(Conn& c);
  void maybe_close(Conn& c);
  void reap(Conn& c);
  void run_command(std::shared_ptr<Conn> c, const std::string& name, json::Value args, bool http);
  void complete(std::uint64_t id, bool ok, json::Value v);

  friend struct Reply::State;

  Options opts_;
  std::unique_ptr<io::Reactor> reactor_;
  std::thread thread_;
  std::unique_ptr<Listener> admin_listener_;
  std::unique_ptr<Listener> metrics_listener_;
  std::uint16_t metrics_port_ = 0;
  gid_t group_gid_ = static_cast<gid_t>(-1);
  std::shared_ptr<Mailbox> mailbox_;
  std::map<Conn*, std::shared_ptr<Conn>> conns_;
  std::map<std::uint64_t, std::unique_ptr<Pending>> pending_;
  std::uint64_t next_request_id_ = 1;
  std::map<std::string, Command, std::less<>> commands_;  // admin thread only
  bool stopping_ = false;
};

}  // namespace samsa::daemon
