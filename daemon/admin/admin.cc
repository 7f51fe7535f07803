#include "daemon/admin/admin.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"

namespace samsa::daemon {

// ---- answers travelling back to the admin thread ----

// The admin thread's address for answers. Commands may answer after the server stopped (a
// reactor finishing late): the mailbox then drops them instead of posting to a dead reactor.
struct Mailbox {
  std::mutex mu;
  AdminServer* srv = nullptr;
  bool open = true;
  template <class F>
  void post(F&& f) {
    std::lock_guard lk(mu);
    if (open) srv->post(std::forward<F>(f));
  }
};

struct Reply::State {
  std::shared_ptr<Mailbox> mailbox;
  std::uint64_t id = 0;
  uid_t uid = 0;
  std::atomic<bool> answered{false};

  void answer(bool ok, json::Value v) {
    if (answered.exchange(true)) return;
    mailbox->post([mb = mailbox.get(), id = id, ok, v = std::move(v)]() mutable {
      mb->srv->complete(id, ok, std::move(v));
    });
  }
  ~State() {
    if (!answered.load()) {
      json::Value e;
      e["code"] = admin_error::internal;
      e["message"] = "the command finished without an answer";
      answer(false, std::move(e));
    }
  }
};

void Reply::ok(json::Value result) const {
  if (s_) s_->answer(true, std::move(result));
}

void Reply::error(std::string code, std::string message) const {
  if (!s_) return;
  json::Value e;
  e["code"] = std::move(code);
  e["message"] = std::move(message);
  s_->answer(false, std::move(e));
}

uid_t Reply::peer_uid() const {
  return s_ ? s_->uid : 0;
}

// ---- connections ----

struct AdminServer::Pending : io::Timer {  // fires on the command timeout
  AdminServer* srv = nullptr;
  std::uint64_t id = 0;
  std::shared_ptr<Conn> conn;
  bool http = false;
  std::string command;
};

struct AdminServer::Listener {
  int fd = -1;
  bool http = false;
  struct Op : io::Completion {
    Listener* l = nullptr;
  } op;
  bool armed = false;
  AdminServer* srv = nullptr;
};

struct AdminServer::Conn {
  AdminServer* srv = nullptr;
  int fd = -1;
  bool http = false;
  uid_t uid = 0;
  std::string in;
  std::string out;
  std::size_t out_off = 0;
  bool busy = false;        // a request is being answered
  bool discarding = false;  // dropping the rest of an over-long line
  bool close_after_flush = false;
  bool closed = false;  // no more I/O; freed once the poll op is back
  struct PollOp : io::Completion {
    Conn* c = nullptr;
  } poll;
  bool poll_armed = false;
  unsigned poll_events = 0;
  struct Idle : io::Timer {
    Conn* c = nullptr;
  } idle;
};

namespace {

std::string peer_denied_line(const std::string& group) {
  json::Value r;
  r["ok"] = false;
  r["error"]["code"] = admin_error::access_denied;
  r["error"]["message"] = "access denied: only root, the daemon's user and members of group " +
                          group + " may use the admin socket";
  return r.dump() + "\n";
}

// host:port with an optional [v6] host; empty host means every interface.
std::expected<std::pair<std::string, std::uint16_t>, std::string> parse_host_port(
    const std::string& s) {
  std::string host, port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return std::unexpected("expected host:port, got " + s);
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) return std::unexpected("expected host:port, got " + s);
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  unsigned p = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || ptr != port.data() + port.size() || p > 65535 || port.empty())
    return std::unexpected("bad port in " + s);
  return std::pair{host, static_cast<std::uint16_t>(p)};
}

std::expected<int, std::string> bind_tcp(const std::string& spec, std::uint16_t* bound) {
  auto hp = parse_host_port(spec);
  if (!hp) return std::unexpected(hp.error());
  const auto& [host, port] = *hp;
  sockaddr_storage ss{};
  socklen_t len = 0;
  sockaddr_in6 a6{};
  sockaddr_in a4{};
  int family = AF_INET;
  if (host.empty() || host == "0.0.0.0") {
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons(port);
    std::memcpy(&ss, &a4, sizeof a4);
    len = sizeof a4;
  } else if (inet_pton(AF_INET, host.c_str(), &a4.sin_addr) == 1) {
    a4.sin_family = AF_INET;
    a4.sin_port = htons(port);
    std::memcpy(&ss, &a4, sizeof a4);
    len = sizeof a4;
  } else if (inet_pton(AF_INET6, host.c_str(), &a6.sin6_addr) == 1) {
    family = AF_INET6;
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(port);
    std::memcpy(&ss, &a6, sizeof a6);
    len = sizeof a6;
  } else if (host == "localhost") {
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a4.sin_port = htons(port);
    std::memcpy(&ss, &a4, sizeof a4);
    len = sizeof a4;
  } else {
    return std::unexpected("not a numeric address: " + host);
  }
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::unexpected(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 64) != 0) {
    std::string e = std::strerror(errno);
    ::close(fd);
    return std::unexpected(spec + ": " + e);
  }
  sockaddr_storage got{};
  socklen_t gl = sizeof got;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &gl) == 0) {
    *bound = got.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&got)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  }
  return fd;
}

std::expected<int, std::string> bind_unix(const std::string& path, gid_t group) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa.sun_path)
    return std::unexpected("samsa.admin.socket: path must be 1.." +
                           std::to_string(sizeof sa.sun_path - 1) + " bytes: " + path);
  std::memcpy(sa.sun_path, path.data(), path.size());
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    if (ec) return std::unexpected("cannot create " + parent.string() + ": " + ec.message());
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return std::unexpected(path + " exists and is not a socket; not replacing it");
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (probe >= 0) ::close(probe);
    if (live) return std::unexpected("another process serves the admin socket " + path);
    ::unlink(path.c_str());  // left by a process that died
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::unexpected(std::string("socket: ") + std::strerror(errno));
  // Never a moment with looser permissions than 0660.
  mode_t old = ::umask(0117);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int err = errno;
  ::umask(old);
  if (rc != 0) {
    ::close(fd);
    return std::unexpected("bind " + path + ": " + std::strerror(err));
  }
  if (group != static_cast<gid_t>(-1) && ::getegid() != group &&
      ::chown(path.c_str(), static_cast<uid_t>(-1), group) != 0) {
    LOG_WARN("admin socket %s: cannot give it to group %u: %s", path.c_str(),
             static_cast<unsigned>(group), std::strerror(errno));
  }
  ::chmod(path.c_str(), 0660);
  if (::listen(fd, 64) != 0) {
    err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return std::unexpected("listen " + path + ": " + std::strerror(err));
  }
  return fd;
}

}  // namespace

// ---- server ----

std::expected<std::unique_ptr<AdminServer>, std::string> AdminServer::start(Options opts) {
  std::unique_ptr<AdminServer> s(new AdminServer());
  s->opts_ = std::move(opts);
  s->mailbox_ = std::make_shared<Mailbox>();
  s->mailbox_->srv = s.get();
  if (!s->opts_.group.empty()) {
    std::vector<char> buf(16384);
    group gr;
    group* res = nullptr;
    if (::getgrnam_r(s->opts_.group.c_str(), &gr, buf.data(), buf.size(), &res) == 0 && res)
      s->group_gid_ = res->gr_gid;
  }
  if (!s->opts_.socket_path.empty()) {
    auto afd = bind_unix(s->opts_.socket_path, s->group_gid_);
    if (afd) {
      s->admin_listener_ = std::make_unique<Listener>();
      s->admin_listener_->fd = *afd;
      s->admin_listener_->srv = s.get();
    } else if (s->opts_.socket_required) {
      return std::unexpected(afd.error());
    } else {
      LOG_ERROR("no admin socket (samsactl cannot reach this samsad): %s", afd.error().c_str());
    }
  }
  if (!s->opts_.metrics_listen.empty()) {
    auto mfd = bind_tcp(s->opts_.metrics_listen, &s->metrics_port_);
    if (!mfd) {
      if (s->admin_listener_) {
        ::close(s->admin_listener_->fd);
        ::unlink(s->opts_.socket_path.c_str());
      }
      return std::unexpected("samsa.metrics.listen: " + mfd.error());
    }
    s->metrics_listener_ = std::make_unique<Listener>();
    s->metrics_listener_->fd = *mfd;
    s->metrics_listener_->http = true;
    s->metrics_listener_->srv = s.get();
  }

  std::mutex mu;
  std::condition_variable cv;
  std::string error;
  bool ready = false;
  AdminServer* raw = s.get();
  s->thread_ = std::thread([raw, &mu, &cv, &error, &ready] {
    set_thread_name("admin");
    auto r = io::Reactor::create({.name = "admin", .sq_entries = 256, .io_workers = 0});
    {
      std::lock_guard lk(mu);
      if (r) {
        raw->reactor_ = std::move(*r);
      } else {
        error = std::string("admin: io_uring setup failed: ") + std::strerror(-r.error());
      }
      ready = true;
    }
    cv.notify_all();
    if (raw->reactor_) raw->run();
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return ready; });
  if (!error.empty()) {
    lk.unlock();
    s->thread_.join();
    return std::unexpected(error);
  }
  return s;
}

void AdminServer::add_command(std::string name, Command c) {
  post([this, name = std::move(name), c = std::move(c)]() mutable {
    commands_[std::move(name)] = std::move(c);
  });
}

AdminServer::~AdminServer() {
  if (thread_.joinable()) {
    if (reactor_) {
      post([this] {
        stopping_ = true;
        for (Listener* l : {admin_listener_.get(), metrics_listener_.get()}) {
          if (l && l->fd >= 0) {
            if (l->armed)
              io_uring_prep_poll_remove(reactor_->sqe_noreply(), reinterpret_cast<__u64>(&l->op));
            ::shutdown(l->fd, SHUT_RDWR);
          }
        }
        std::vector<Conn*> all;
        for (auto& [p, c] : conns_)
          all.push_back(p);
        for (Conn* c : all)
          close(*c);
        reactor_->stop();
      });
    }
    thread_.join();
  }
  {
    std::lock_guard lk(mailbox_->mu);
    mailbox_->open = false;
  }
  pending_.clear();
  for (Listener* l : {admin_listener_.get(), metrics_listener_.get()})
    if (l && l->fd >= 0) ::close(l->fd);
  if (admin_listener_) ::unlink(opts_.socket_path.c_str());
  for (auto& [p, c] : conns_)
    if (c->fd >= 0) ::close(c->fd);
  conns_.clear();
}

void AdminServer::run() {
  if (admin_listener_) arm_accept(*admin_listener_);
  if (metrics_listener_) arm_accept(*metrics_listener_);
  reactor_->run();
}

void AdminServer::arm_accept(Listener& l) {
  l.op.l = &l;
  l.op.fn = [](io::Completion* c, int res, std::uint32_t) {
    Listener* l = static_cast<Listener::Op*>(c)->l;
    l->armed = false;
    if (l->srv->stopping_ || res == -ECANCELED) return;
    l->srv->on_accept(*l);
  };
  io_uring_prep_poll_add(reactor_->sqe(&l.op), l.fd, POLLIN);
  l.armed = true;
}

void AdminServer::on_accept(Listener& l) {
  for (int i = 0; i < 64; ++i) {
    int fd = ::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        LOG_WARN("admin: accept: %s", std::strerror(errno));
      break;
    }
    auto c = std::make_shared<Conn>();
    c->srv = this;
    c->fd = fd;
    c->http = l.http;
    c->poll.c = c.get();
    c->idle.c = c.get();
    c->idle.fn = [](io::Timer* t) {
      Conn* c = static_cast<Conn::Idle*>(t)->c;
      LOG_DEBUG("admin: closing a connection idle for %lld ms",
                static_cast<long long>(c->srv->opts_.idle_timeout_ms));
      c->srv->close(*c);
    };
    conns_[c.get()] = c;
    if (conns_.size() > opts_.max_connections) {
      // One line per second at most: a flood must not flood the journal too.
      static std::int64_t last_warn_ns = 0;
      if (mono_ns() - last_warn_ns > 1'000'000'000) {
        last_warn_ns = mono_ns();
        LOG_WARN("admin: more than %zu connections; refusing new ones", opts_.max_connections);
      }
      close(*c);
      continue;
    }
    if (!l.http) {
      ucred cred{};
      socklen_t len = sizeof cred;
      bool allowed = false;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        c->uid = cred.uid;
        allowed = cred.uid == 0 || cred.uid == ::geteuid();
        if (!allowed && group_gid_ != static_cast<gid_t>(-1)) {
          allowed = cred.gid == group_gid_;
          // Supplementary groups of the peer (Linux 4.13+).
          gid_t groups[256];
          socklen_t gl = sizeof groups;
          if (!allowed && ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0) {
            for (std::size_t k = 0; k < gl / sizeof(gid_t); ++k)
              allowed |= groups[k] == group_gid_;
          }
        }
      }
      if (!allowed) {
        LOG_WARN("admin: refused uid %u (pid %d): not root, not the daemon's user, not in group %s",
                 static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid), opts_.group.c_str());
        c->close_after_flush = true;
        send(*c, peer_denied_line(opts_.group));
        continue;
      }
    }
    reactor_->arm(&c->idle, mono_ns() + opts_.idle_timeout_ms * 1'000'000);
    arm_poll(*c, POLLIN);
  }
  if (!stopping_) arm_accept(l);
}

void AdminServer::arm_poll(Conn& c, unsigned events) {
  if (c.closed || c.poll_armed) return;
  c.poll.fn = [](io::Completion* comp, int res, std::uint32_t) {
    Conn* c = static_cast<Conn::PollOp*>(comp)->c;
    c->poll_armed = false;
    AdminServer* s = c->srv;
    if (c->closed) {
      s->reap(*c);
      return;
    }
    if (res < 0) {
      s->close(*c);
      return;
    }
    if (res & (POLLOUT | POLLERR | POLLHUP)) s->on_writable(*c);
    if (!c->closed && (res & (POLLIN | POLLERR | POLLHUP))) s->on_readable(*c);
    if (!c->closed && !c->poll_armed) {
      if (c->out_off < c->out.size()) {
        s->arm_poll(*c, POLLOUT);
      } else if (!c->busy && !c->close_after_flush) {
        s->arm_poll(*c, POLLIN);
      }
    }
    if (!c->closed) s->maybe_close(*c);
  };
  c.poll_events = events;
  io_uring_prep_poll_add(reactor_->sqe(&c.poll), c.fd, events);
  c.poll_armed = true;
}

void AdminServer::on_readable(Conn& c) {
  char buf[65536];
  std::size_t got = 0;
  // Bounded per wake-up so one chatty client cannot starve the others; while a request is
  // being answered nothing more is read (the poll is re-armed for input only when idle).
  while (got < (4u << 20) && !c.busy && !c.closed) {
    ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close(c);
      return;
    }
    if (n == 0) {
      // The peer is done sending: answer what it asked, then close.
      c.close_after_flush = true;
      break;
    }
    got += static_cast<std::size_t>(n);
    std::string_view chunk(buf, static_cast<std::size_t>(n));
    if (c.discarding) {
      auto nl = chunk.find('\n');
      if (nl == std::string_view::npos) continue;
      c.discarding = false;
      chunk.remove_prefix(nl + 1);
    }
    c.in.append(chunk);
    if (c.http) {
      if (c.in.size() > 16384) {
        c.in.clear();
        c.close_after_flush = true;
        send(c,
             "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
             "Connection: close\r\n\r\n");
        return;
      }
      process_http(c);
    } else {
      process_lines(c);
    }
  }
  if (c.closed) return;
  if (c.http) {
    process_http(c);
  } else {
    process_lines(c);
  }
  maybe_close(c);
}

// Closes a connection whose peer stopped sending once everything it asked is answered and sent.
void AdminServer::maybe_close(Conn& c) {
  if (c.closed || !c.close_after_flush || c.busy || c.out_off < c.out.size()) return;
  if (!c.http && c.in.find('\n') != std::string::npos) return;  // more requests to answer
  close(c);
}

void AdminServer::process_lines(Conn& c) {
  while (!c.busy && !c.closed) {
    auto nl = c.in.find('\n');
    if (nl == std::string::npos) {
      // An over-long line is answered at once; the rest of it is dropped as it arrives, and
      // the connection stays usable for the next line.
      if (c.in.size() > opts_.max_line_bytes) {
        c.in.clear();
        c.discarding = true;
        json::Value r;
        r["ok"] = false;
        r["error"]["code"] = admin_error::line_too_long;
        r["error"]["message"] = "request line longer than " + std::to_string(opts_.max_line_bytes) +
                                " bytes; the rest of it is dropped";
        send(c, r.dump() + "\n");
      }
      return;
    }
    std::string line = c.in.substr(0, nl);
    c.in.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are noise
    if (line.size() > opts_.max_line_bytes) {
      json::Value r;
      r["ok"] = false;
      r["error"]["code"] = admin_error::line_too_long;
      r["error"]["message"] =
          "request line longer than " + std::to_string(opts_.max_line_bytes) + " bytes";
      send(c, r.dump() + "\n");
      continue;
    }
    // A complete request: the idle clock restarts once it is answered.
    reactor_->disarm(&c.idle);
    dispatch(c, line);
  }
}

void AdminServer::dispatch(Conn& c, std::string_view line) {
  auto bad = [&](const char* code, std::string msg) {
    json::Value r;
    r["ok"] = false;
    r["error"]["code"] = code;
    r["error"]["message"] = std::move(msg);
    send(c, r.dump() + "\n");
    reactor_->arm(&c.idle, mono_ns() + opts_.idle_timeout_ms * 1'000'000);
  };
  auto req = json::parse(line);
  if (!req) return bad(admin_error::bad_request, "not JSON: " + req.error());
  if (!req->is_object()) return bad(admin_error::bad_request, "a request is a JSON object");
  const json::Value* v = req->find("v");
  if (!v || !v->is_int())
    return bad(admin_error::bad_request, "\"v\" (protocol version) is missing");
  if (v->as_int() != 1)
    return bad(admin_error::unsupported_version,
               "protocol version " + std::to_string(v->as_int()) + " is not served (only 1)");
  const json::Value* cmd = req->find("cmd");
  if (!cmd || !cmd->is_string()) return bad(admin_error::bad_request, "\"cmd\" must be a string");
  json::Value args = json::Value::object();
  if (const json::Value* a = req->find("args")) {
    if (!a->is_object() && !a->is_null())
      return bad(admin_error::invalid_argument, "\"args\" must be an object");
    if (a->is_object()) args = *a;
  }
  auto it = commands_.find(cmd->as_string());
  if (it == commands_.end())
    return bad(admin_error::unknown_command,
               "unknown command \"" + cmd->as_string() + "\" (samsactl --help lists them)");
  auto self = conns_.find(&c);
  if (self == conns_.end()) return;
  run_command(self->second, cmd->as_string(), std::move(args), false);
}

void AdminServer::run_command(std::shared_ptr<Conn> c, const std::string& name, json::Value args,
                              bool http) {
  auto it = commands_.find(name);
  if (it == commands_.end()) return;
  const std::uint64_t id = next_request_id_++;
  auto p = std::make_unique<Pending>();
  p->srv = this;
  p->id = id;
  p->conn = c;
  p->http = http;
  p->command = name;
  p->fn = [](io::Timer* t) {
    auto* p = static_cast<Pending*>(t);
    json::Value e;
    e["code"] = admin_error::timeout;
    e["message"] = "\"" + p->command + "\" did not finish within " +
                   std::to_string(p->srv->opts_.command_timeout_ms) +
                   " ms (a reactor, the controller or the coordinator is not answering)";
    p->srv->complete(p->id, false, std::move(e));
  };
  reactor_->arm(p.get(), mono_ns() + opts_.command_timeout_ms * 1'000'000);
  pending_[id] = std::move(p);
  c->busy = true;

  auto state = std::make_shared<Reply::State>();
  state->mailbox = mailbox_;
  state->id = id;
  state->uid = c->uid;
  it->second(args, Reply(std::move(state)));
}

// Admin thread: the answer to request id (or its timeout); later answers find nothing.
void AdminServer::complete(std::uint64_t id, bool ok, json::Value v) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  reactor_->disarm(p.get());
  std::shared_ptr<Conn> conn = std::move(p->conn);
  conn->busy = false;
  if (conn->closed) return;
  if (p->http) {
    std::string body;
    std::string status = "200 OK";
    if (ok && v.is_string()) {
      body = v.as_string();
    } else {
      status = "503 Service Unavailable";
      const json::Value* m = v.find("message");
      body = (m && m->is_string() ? m->as_string() : std::string("metrics unavailable")) + "\n";
    }
    conn->close_after_flush = true;
    send(*conn, "HTTP/1.1 " + status +
                    "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                    "Content-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    return;
  }
  json::Value r;
  r["ok"] = ok;
  r[ok ? "result" : "error"] = std::move(v);
  std::string line;
  r.dump_to(line);
  line.push_back('\n');
  send(*conn, line);
  if (conn->closed) return;
  reactor_->arm(&conn->idle, mono_ns() + opts_.idle_timeout_ms * 1'000'000);
  // Pipelined requests wait in conn->in; take the next one on the next turn (an answer given
  // synchronously must not re-enter the loop that dispatched it).
  reactor_->defer_fn([this, conn] {
    if (conn->closed) return;
    process_lines(*conn);
    if (conn->closed || conn->busy || conn->poll_armed) return;
    if (conn->out_off < conn->out.size()) {
      arm_poll(*conn, POLLOUT);
    } else if (conn->close_after_flush) {
      maybe_close(*conn);
    } else {
      arm_poll(*conn, POLLIN);
    }
  });
}

void AdminServer::process_http(Conn& c) {
  if (c.busy || c.closed) return;
  auto end = c.in.find("\r\n\r\n");
  if (end == std::string::npos) end = c.in.find("\n\n");
  if (end == std::string::npos) return;
  reactor_->disarm(&c.idle);
  auto line_end = c.in.find_first_of("\r\n");
  std::string request_line = c.in.substr(0, line_end);
  c.in.clear();
  auto sp1 = request_line.find(' ');
  auto sp2 = sp1 == std::string::npos ? std::string::npos : request_line.find(' ', sp1 + 1);
  std::string method = request_line.substr(0, sp1);
  std::string target =
      sp1 == std::string::npos
          ? std::string()
          : request_line.substr(sp1 + 1,
                                sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
  auto q = target.find('?');
  std::string path = target.substr(0, q);
  auto simple = [&](const char* status, const std::string& body) {
    send(c, std::string("HTTP/1.1 ") + status +
                "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    c.close_after_flush = true;
  };
  if (method != "GET" && method != "HEAD") return simple("405 Method Not Allowed", "GET only\n");
  if (path == "/") return simple("200 OK", "samsad metrics: /metrics\n");
  if (path != "/metrics") return simple("404 Not Found", "not found; try /metrics\n");
  auto it = commands_.find("metrics");
  if (it == commands_.end()) return simple("503 Service Unavailable", "starting\n");
  auto self = conns_.find(&c);
  if (self == conns_.end()) return;
  run_command(self->second, "metrics", json::Value::object(), true);
}

void AdminServer::send(Conn& c, const std::string& bytes) {
  if (c.closed) return;
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
  c.out += bytes;
  flush(c);
}

void AdminServer::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close(c);
      return;
    }
    c.out_off += static_cast<std::size_t>(n);
  }
  if (c.out_off < c.out.size()) {
    if (!c.poll_armed) arm_poll(c, POLLOUT);
    return;
  }
  maybe_close(c);
}

void AdminServer::on_writable(Conn& c) {
  flush(c);
}

void AdminServer::close(Conn& c) {
  if (c.closed) return;
  c.closed = true;
  reactor_->disarm(&c.idle);
  ::shutdown(c.fd, SHUT_RDWR);
  if (c.poll_armed) {
    // Freed when the poll reports back (it points at c).
    io_uring_prep_poll_remove(reactor_->sqe_noreply(), reinterpret_cast<__u64>(&c.poll));
    return;
  }
  reap(c);
}

void AdminServer::reap(Conn& c) {
  if (c.fd >= 0) {
    ::close(c.fd);
    c.fd = -1;
  }
  conns_.erase(&c);  // may free c
}

}  // namespace samsa::daemon
