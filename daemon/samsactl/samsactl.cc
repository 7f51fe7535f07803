// samsactl — the command line of samsad's admin socket (DESIGN.md decision 11).
//   samsactl [--socket PATH] [--json] [--timeout SECONDS] COMMAND [ARGS]
// Exit codes: 0 ok, 1 error reply, 2 usage, 3 daemon unreachable or access refused.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "daemon/admin/admin_json.h"
#include "daemon/config.h"
#include "daemon/samsactl/samsactl_brokers.h"
#include "daemon/samsactl/samsactl_format.h"
#include "daemon/samsactl/samsactl_security.h"

namespace {

using samsa::daemon::json::Value;
namespace fmt = samsa::samsactl;

constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitUnreachable = 3;
constexpr const char* kDefaultConfig = "/etc/samsa/samsa.properties";
constexpr const char* kDefaultSocket = "/run/samsa/admin.sock";

struct Command {
  const char* name;   // as typed: "topic describe"
  const char* args;   // usage of its arguments
  const char* about;  // one line
  const char* help;   // more, for COMMAND --help
};

const Command kCommands[] = {
    {"status", "", "version, uptime, listeners, reactors and their load, recovery",
     "Shows what samsad is and how it is doing: version, pid, state (starting while it\n"
     "recovers its logs, then serving), uptime, node and cluster ids, listeners, network\n"
     "backend, what start-up found in each log dir, the controller and coordinator, and each\n"
     "reactor with its loop utilisation over the last second, partitions and connections.\n"},
    {"reload", "", "re-read the config file and apply it; waits until applied",
     "Re-reads samsad's properties file and applies every dynamic setting on every thread\n"
     "before answering; lists the settings whose value changed (those that are not dynamic\n"
     "take effect at the next restart). An invalid value changes nothing and fails. This is\n"
     "the unit's ExecReload; SIGHUP does the same without waiting.\n"},
    {"drain", "", "stop taking clients, finish in-flight requests, flush",
     "Stops accepting connections, closes the open ones once their requests are answered\n"
     "(at most samsa.shutdown.timeout.ms), syncs every log and writes the checkpoints, then\n"
     "reports. samsad keeps running but serves no client until it is restarted.\n"},
    {"clean", "", "compact every compacted log with dirty records now",
     "Asks the log cleaner to look at every log whose cleanup.policy has compact and clean\n"
     "each one with dirty records now, whatever its min.cleanable.dirty.ratio (records newer\n"
     "than min.compaction.lag.ms, above the high watermark or in the active segment stay).\n"
     "Answers at once; the passes run in the background (samsactl metrics:\n"
     "samsa_log_cleaner_passes_total, samsactl partition describe: last cleaning).\n"},
    {"flush", "", "sync every log to disk and write the checkpoints",
     "fdatasync of everything in every log dir (syncfs) and the recovery-point and\n"
     "log-start checkpoints written. Useful before a snapshot of the file system.\n"},
    {"config get", "[KEY]", "effective settings, where each comes from",
     "Every setting (or KEY) with its effective value and its source: default, file,\n"
     "dynamic (stored in the metadata log by `config set`) or override (--override on\n"
     "samsad's command line). Precedence: override > dynamic > file > default.\n"},
    {"config set", "KEY [VALUE]", "store a dynamic setting in the metadata log (no VALUE: remove)",
     "Stores KEY=VALUE as a dynamic broker setting in the cluster metadata log, so it\n"
     "survives restarts, and answers once every thread applies it. Without VALUE the stored\n"
     "setting is removed and the file's (or the default) applies again. Only settings marked\n"
     "dynamic in `config get` can be set.\n"},
    {"log-level", "[LEVEL]", "show or set the log level: error, warn, info, debug",
     "Sets the log level at once, until the next reload or restart (samsa.log.level is the\n"
     "lasting setting). Without LEVEL, shows it.\n"},
    {"metrics", "", "metrics in Prometheus' text format",
     "Prints the metrics exposition: requests and latency per API and version, bytes in and\n"
     "out per topic, partition sizes and offsets, group lag, fsync latency, group commit\n"
     "sizes, reactor utilisation, connections and back-pressure.\n"},
    {"topic list", "", "topics with their partition counts",
     "Every topic in the cluster metadata, internal ones included.\n"},
    {"topic describe", "TOPIC", "a topic's partitions, their logs and the topic's configs",
     "Per partition: leader, leader epoch, high watermark, log start and end offsets,\n"
     "segments, size on disk and in-sync replicas; then the topic's config overrides\n"
     "(--json also lists every effective topic config).\n"},
    {"topic create", "TOPIC [--partitions N] [--replication-factor N] [--config KEY=VALUE]...",
     "create a topic",
     "Creates TOPIC, committed to the cluster metadata log before the answer. Without\n"
     "--partitions or --replication-factor the broker's num.partitions and\n"
     "default.replication.factor apply. --config sets a topic config (retention.ms,\n"
     "segment.bytes, cleanup.policy, ...); repeat it for more.\n"},
    {"topic delete", "TOPIC", "delete a topic and its data",
     "Deletes TOPIC from the cluster metadata; its partitions' directories are removed.\n"},
    {"partition describe", "TOPIC[:PARTITION]", "leader, offsets, segments, size, producers",
     "As topic describe, for one partition (TOPIC:P) or all of TOPIC's, with the number of\n"
     "idempotent producers whose state the partition keeps.\n"},
    {"group list", "", "consumer groups with their state and members",
     "Every consumer group the coordinator knows: state, members, generation, protocol.\n"},
    {"group describe", "GROUP", "members, assignment, committed offsets and lag",
     "A group's members with the partitions assigned to each, and its committed offsets\n"
     "with the lag behind each partition's high watermark.\n"},
    {"quorum", "", "the controller quorum: leader, epoch, voters, observers and their lag",
     "What kafka-metadata-quorum describe --status and --replication show: the leader and\n"
     "its epoch, the high watermark, the largest follower lag, the voters (with their\n"
     "endpoints) and observers, and per replica its metadata log end offset, its lag behind\n"
     "the leader's and when it last fetched and last caught up. A controller answers from its\n"
     "own state (one that does not lead names the leader; the replication figures are the\n"
     "leader's); a broker asks the active controller, as Kafka's brokers do. Then this\n"
     "node's own view: the leader it follows, its epoch, its metadata log and how far it has\n"
     "applied it (shown even when the controllers cannot be reached).\n"},
    {"acl list", "", "the ACLs in the cluster metadata (what kafka-acls --list shows)",
     "Every ACL: permission, principal, operation, resource and its pattern, host. Says so\n"
     "when authorizer.class.name is not set (the ACLs are then kept but not enforced).\n"},
    {"acl add",
     "--allow|--deny PRINCIPAL --operation OP --topic|--group|--transactional-id NAME|--cluster "
     "[--prefixed] [--host HOST]",
     "add an ACL",
     "Adds one ACL, committed to the cluster metadata log, as kafka-acls --add does: e.g.\n"
     "  samsactl acl add --allow User:alice --operation Read --topic orders --prefixed\n"
     "Operations: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction,\n"
     "DescribeConfigs, AlterConfigs, IdempotentWrite. No Kafka login is needed: this is how\n"
     "the first ACLs are made when every listener needs one.\n"},
    {"acl remove",
     "--allow|--deny PRINCIPAL --operation OP --topic|--group|--transactional-id NAME|--cluster "
     "[--prefixed] [--host HOST]",
     "remove the ACL given exactly", "Removes the ACL that matches every part given.\n"},
    {"user list", "", "SCRAM users: mechanism and iterations",
     "Every SCRAM credential in the cluster metadata (never a password or a key).\n"},
    {"user add", "USER --mechanism SCRAM-SHA-256|SCRAM-SHA-512 [--iterations N]",
     "set a SCRAM user's password (read from standard input)",
     "Stores USER's SCRAM credential for the mechanism, salted and derived here, as\n"
     "kafka-configs --alter --entity-type users --add-config 'SCRAM-SHA-256=[...]' does. The\n"
     "password is the first line of standard input:\n"
     "  echo \"$PASSWORD\" | samsactl user add alice --mechanism SCRAM-SHA-512\n"
     "Iterations: 4096 (the default) to 16384.\n"},
    {"user remove", "USER --mechanism SCRAM-SHA-256|SCRAM-SHA-512",
     "remove a SCRAM user's credential", "Removes USER's credential for the mechanism.\n"},
    {"broker list", "", "registered brokers: rack, endpoints, state, replicas, leaderships",
     "Every broker registered in the cluster metadata: its rack, listeners, whether it is\n"
     "fenced or in controlled shutdown, and how many replicas and leaderships it holds.\n"},
    {"broker describe", "ID", "one broker, the partitions it hosts and its reassignments",
     "As broker list for broker ID, with each partition it hosts (leader or follower) and\n"
     "the reassignments in progress that touch it.\n"},
    {"broker drain", "ID [--no-wait] [--timeout SECONDS]", "move every replica off a broker",
     "Moves every replica (and so every leadership) off broker ID with one\n"
     "AlterPartitionReassignments: each goes to a usable broker (registered, unfenced, not\n"
     "shutting down) that does not hold the partition, the least loaded, keeping the\n"
     "partition's rack spread when brokers have racks. Then prints the progress every second\n"
     "until the broker holds nothing (--timeout, default 300 s: exit 1); --no-wait returns\n"
     "once the reassignments are submitted. Works on any node's admin socket.\n"},
    {"broker unregister", "ID [--force]", "retire a decommissioned broker's registration",
     "UnregisterBroker for broker ID, once it is stopped. Refused while the broker still\n"
     "holds replicas (drain it first) unless --force.\n"},
    {"testing stall", "[reactor N|controller|coordinator] SECONDS",
     "test-only: block a broker loop (needs samsa.testing.hooks=true)",
     "Blocks one of samsad's loops for SECONDS, as a bug would, so a test can watch systemd's\n"
     "watchdog restart samsad. samsad refuses it unless samsa.testing.hooks=true.\n"},
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: samsactl [--socket PATH] [--json] [--timeout SECONDS] COMMAND [ARGS]\n"
               "\n"
               "Talks to a running samsad through its admin socket (samsa.admin.socket, by\n"
               "default %s).\n"
               "\n"
               "commands:\n",
               kDefaultSocket);
  std::size_t w = 0;
  for (const auto& c : kCommands)
    w = std::max(w, std::strlen(c.name) + (*c.args ? std::strlen(c.args) + 1 : 0));
  w = std::min<std::size_t>(w, 34);
  for (const auto& c : kCommands) {
    std::string head = std::string(c.name) + (*c.args ? std::string(" ") + c.args : "");
    if (head.size() > w) {
      std::fprintf(out, "  %s\n  %*s  %s\n", head.c_str(), static_cast<int>(w), "", c.about);
    } else {
      std::fprintf(out, "  %-*s  %s\n", static_cast<int>(w), head.c_str(), c.about);
    }
  }
  std::fprintf(out,
               "\n"
               "options:\n"
               "  --socket PATH      admin socket (default: $SAMSA_ADMIN_SOCKET, else\n"
               "                     samsa.admin.socket in %s, else %s)\n"
               "  --json             print the daemon's answer as JSON, for scripts\n"
               "  --timeout SECONDS  give up waiting for an answer (default 60)\n"
               "  COMMAND --help     more about one command\n"
               "\n"
               "exit codes: 0 ok, 1 the daemon answered with an error, 2 usage, 3 the daemon\n"
               "cannot be reached or refused access. See samsactl(8).\n",
               kDefaultConfig, kDefaultSocket);
}

void command_help(const Command& c) {
  std::printf("usage: samsactl [--socket PATH] [--json] %s%s%s\n\n%s\n%s", c.name,
              *c.args ? " " : "", c.args, c.about, c.help);
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "samsactl: %s\n(samsactl --help lists the commands)\n", msg.c_str());
  return kExitUsage;
}

std::string default_socket() {
  if (const char* e = std::getenv("SAMSA_ADMIN_SOCKET"); e && *e) return e;
  std::ifstream in(kDefaultConfig);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    if (auto props = samsa::daemon::parse_properties(ss.str()); props) {
      auto it = props->find("samsa.admin.socket");
      if (it != props->end() && !it->second.empty()) return it->second;
    }
  }
  return kDefaultSocket;
}

bool is_help(const std::string& a) {
  return a == "--help" || a == "-h" || a == "help";
}

// One request, one answer line.
int call(const std::string& path, const Value& request, double timeout_s, Value* answer) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) {
    std::fprintf(stderr, "samsactl: socket path too long: %s\n", path.c_str());
    return kExitUsage;
  }
  std::memcpy(sa.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::fprintf(stderr, "samsactl: socket: %s\n", std::strerror(errno));
    return kExitUnreachable;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EACCES || e == EPERM) {
      std::fprintf(stderr,
                   "samsactl: %s: permission denied. Run samsactl as root or as a member of "
                   "group samsa (usermod -aG samsa $USER, then log in again).\n",
                   path.c_str());
    } else if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) {
      std::fprintf(stderr,
                   "samsactl: %s: samsad is not running (%s). Start it (systemctl start samsa) "
                   "or point --socket at the path its samsa.admin.socket names.\n",
                   path.c_str(), std::strerror(e));
    } else {
      std::fprintf(stderr, "samsactl: %s: cannot connect: %s\n", path.c_str(), std::strerror(e));
    }
    return kExitUnreachable;
  }
  std::string line = request.dump() + "\n";
  std::size_t off = 0;
  int send_error = 0;
  while (off < line.size()) {
    ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // samsad may have answered already and closed (access_denied): read that answer.
      send_error = n < 0 ? errno : EPIPE;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  std::string in;
  const std::int64_t deadline = samsa::mono_ns() + static_cast<std::int64_t>(timeout_s * 1e9);
  for (;;) {
    auto nl = in.find('\n');
    if (nl != std::string::npos) {
      in.resize(nl);
      break;
    }
    const std::int64_t left_ms = (deadline - samsa::mono_ns()) / 1'000'000;
    if (left_ms <= 0) {
      std::fprintf(stderr, "samsactl: %s: no answer from samsad within %.0f s\n", path.c_str(),
                   timeout_s);
      ::close(fd);
      return kExitUnreachable;
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left_ms, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : send_error;
      std::fprintf(stderr, "samsactl: %s: samsad closed the connection without an answer%s\n",
                   path.c_str(), e ? (std::string(" (") + std::strerror(e) + ")").c_str() : "");
      ::close(fd);
      return kExitUnreachable;
    }
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  auto v = samsa::daemon::json::parse(in, 64);
  if (!v || !v->is_object()) {
    std::fprintf(stderr, "samsactl: %s: not an answer samsactl understands: %s\n", path.c_str(),
                 v ? "not an object" : v.error().c_str());
    return kExitError;
  }
  *answer = std::move(*v);
  return kExitOk;
}

bool parse_int(const std::string& s, long long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

struct Options {
  std::string socket;
  bool json_out = false;
  double timeout_s = 60;
  std::size_t first_word = 0;  // where the command starts
};

// The options before the command, or the exit code when there is nothing to run.
std::expected<Options, int> parse_options(const std::vector<std::string>& a) {
  Options o;
  std::size_t i = 0;
  for (; i < a.size(); ++i) {
    const std::string& x = a[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      const std::size_t fl = std::strlen(flag);
      if (x.size() > fl && x[fl] == '=') return x.substr(fl + 1);
      if (i + 1 >= a.size()) return std::nullopt;
      return a[++i];
    };
    if (x == "--json") {
      o.json_out = true;
    } else if (x.starts_with("--socket")) {
      auto v = value("--socket");
      if (!v) return std::unexpected(usage_error("--socket needs a path"));
      o.socket = *v;
    } else if (x.starts_with("--timeout")) {
      auto v = value("--timeout");
      long long t = 0;
      if (!v || !parse_int(*v, t) || t <= 0)
        return std::unexpected(usage_error("--timeout needs whole seconds"));
      o.timeout_s = static_cast<double>(t);
    } else if (is_help(x)) {
      usage(stdout);
      return std::unexpected(kExitOk);
    } else if (x == "--version") {
      std::printf("samsactl %s\n", SAMSA_VERSION);
      return std::unexpected(kExitOk);
    } else if (x.starts_with("-")) {
      return std::unexpected(usage_error("unknown option " + x));
    } else {
      break;
    }
  }
  if (i >= a.size()) {
    usage(stderr);
    return std::unexpected(kExitUsage);
  }
  o.first_word = i;
  return o;
}

// The command rest names (one word or two, "topic describe") and how many words it took; for a
// group's name alone, its commands are listed (and the exit code returned).
std::expected<std::pair<const Command*, std::size_t>, int> find_command(
    const std::vector<std::string>& rest) {
  // Commands are one word or two ("topic describe").
  const Command* cmd = nullptr;
  std::size_t words = 0;
  for (const auto& c : kCommands) {
    std::string name = c.name;
    auto sp = name.find(' ');
    if (sp == std::string::npos) {
      if (rest[0] == name) cmd = &c, words = 1;
    } else if (rest[0] == name.substr(0, sp)) {
      if (rest.size() >= 2 && rest[1] == name.substr(sp + 1)) cmd = &c, words = 2;
    }
  }
  if (!cmd) {
    // "samsactl topic" or "samsactl topic --help": list that group's commands.
    bool group = false;
    for (const auto& c : kCommands) {
      std::string name = c.name;
      if (name.starts_with(rest[0] + " ")) {
        if (!group) std::printf("samsactl %s commands:\n", rest[0].c_str());
        group = true;
        std::printf("  %s %s\n      %s\n", c.name, c.args, c.about);
      }
    }
    if (group) return std::unexpected(rest.size() >= 2 && is_help(rest[1]) ? kExitOk : kExitUsage);
    return std::unexpected(usage_error("unknown command \"" + rest[0] + "\""));
  }
  return std::make_pair(cmd, words);
}

// topic create's flags into its arguments.
int topic_create_flags(const std::vector<std::string>& args, Value& ar) {
  for (std::size_t k = 1; k < args.size(); ++k) {
    const std::string& f = args[k];
    auto next = [&](const char* flag) -> std::optional<std::string> {
      const std::size_t fl = std::strlen(flag);
      if (f.size() > fl && f[fl] == '=') return f.substr(fl + 1);
      if (f.size() == fl && k + 1 < args.size()) return args[++k];
      return std::nullopt;
    };
    long long n = 0;
    if (f.starts_with("--partitions")) {
      auto v = next("--partitions");
      if (!v || !parse_int(*v, n)) return usage_error("--partitions needs a number");
      ar["partitions"] = n;
    } else if (f.starts_with("--replication-factor")) {
      auto v = next("--replication-factor");
      if (!v || !parse_int(*v, n)) return usage_error("--replication-factor needs a number");
      ar["replication_factor"] = n;
    } else if (f.starts_with("--config")) {
      auto v = next("--config");
      auto eq = v ? v->find('=') : std::string::npos;
      if (!v || eq == std::string::npos || eq == 0) return usage_error("--config needs KEY=VALUE");
      ar["configs"][v->substr(0, eq)] = v->substr(eq + 1);
    } else {
      return usage_error("topic create: unknown option " + f);
    }
  }
  return kExitOk;
}

// The admin request for the command and its arguments.
std::expected<Value, int> build_request(const Command& command,
                                        const std::vector<std::string>& args) {
  const Command* cmd = &command;
  const std::string name = cmd->name;
  Value req;
  req["v"] = 1;
  Value ar = Value::object();
  auto nargs = [&](std::size_t lo, std::size_t hi) {
    return args.size() >= lo && args.size() <= hi;
  };
  auto bad = [&]() {
    return usage_error("usage: samsactl " + name +
                       (*cmd->args ? " " + std::string(cmd->args) : ""));
  };
  if (name == "status" || name == "reload" || name == "drain" || name == "flush" ||
      name == "clean" || name == "metrics" || name == "topic list" || name == "group list" ||
      name == "quorum") {
    if (!args.empty()) return std::unexpected(bad());
    std::string c = name;
    if (c == "topic list") c = "topic.list";
    if (c == "group list") c = "group.list";
    req["cmd"] = c;
  } else if (name == "config get") {
    if (!nargs(0, 1)) return std::unexpected(bad());
    req["cmd"] = "config.get";
    if (!args.empty()) ar["key"] = args[0];
  } else if (name == "config set") {
    if (!nargs(1, 2)) return std::unexpected(bad());
    req["cmd"] = "config.set";
    ar["key"] = args[0];
    if (args.size() == 2) ar["value"] = args[1];
  } else if (name == "log-level") {
    if (!nargs(0, 1)) return std::unexpected(bad());
    req["cmd"] = "log.level";
    if (!args.empty()) ar["level"] = args[0];
  } else if (name == "topic describe" || name == "topic delete") {
    if (!nargs(1, 1)) return std::unexpected(bad());
    req["cmd"] = name == "topic describe" ? "topic.describe" : "topic.delete";
    ar["topic"] = args[0];
  } else if (name == "topic create") {
    if (args.empty()) return std::unexpected(bad());
    req["cmd"] = "topic.create";
    ar["topic"] = args[0];
    if (int rc = topic_create_flags(args, ar); rc != kExitOk) return std::unexpected(rc);
  } else if (name == "partition describe") {
    if (!nargs(1, 1)) return std::unexpected(bad());
    req["cmd"] = "partition.describe";
    std::string t = args[0];
    auto colon = t.rfind(':');
    if (colon != std::string::npos) {
      long long p = 0;
      if (!parse_int(t.substr(colon + 1), p) || p < 0)
        return std::unexpected(
            usage_error("partition describe: expected TOPIC or TOPIC:PARTITION"));
      ar["partition"] = p;
      t.resize(colon);
    }
    ar["topic"] = t;
  } else if (name == "group describe") {
    if (!nargs(1, 1)) return std::unexpected(bad());
    req["cmd"] = "group.describe";
    ar["group"] = args[0];
  } else if (name.starts_with("acl ") || name.starts_with("user ")) {
    if (auto why = fmt::security_request(name, args, req, ar))
      return std::unexpected(usage_error(name + ": " + *why));
  } else if (name.starts_with("broker ")) {
    if (auto why = fmt::broker_request(name, args, req, ar))
      return std::unexpected(usage_error(name + ": " + *why));
  } else if (name == "testing stall") {
    req["cmd"] = "testing.stall";
    long long n = 0;
    std::size_t k = 0;
    if (k < args.size() &&
        (args[k] == "reactor" || args[k] == "controller" || args[k] == "coordinator")) {
      ar["target"] = args[k];
      if (args[k++] == "reactor") {
        if (k >= args.size() || !parse_int(args[k], n)) return std::unexpected(bad());
        ar["index"] = n;
        ++k;
      }
    }
    if (k + 1 != args.size() || !parse_int(args[k], n)) return std::unexpected(bad());
    ar["seconds"] = n;
  } else {
    return std::unexpected(bad());
  }

  req["args"] = std::move(ar);
  return req;
}

// An error answer printed (and its exit code), or kExitOk.
int check_answer(const Value& answer, const Options& o) {
  const std::string& socket = o.socket;
  const bool json_out = o.json_out;
  const Value* ok = answer.find("ok");
  if (!ok || !ok->is_bool()) {
    std::fprintf(stderr, "samsactl: malformed answer: %s\n", answer.dump().c_str());
    return kExitError;
  }
  if (!ok->as_bool()) {
    const Value* e = answer.find("error");
    std::string code = e && e->find("code") && e->find("code")->is_string()
                           ? e->find("code")->as_string()
                           : "error";
    std::string msg = e && e->find("message") && e->find("message")->is_string()
                          ? e->find("message")->as_string()
                          : answer.dump();
    if (json_out) std::printf("%s\n", answer.dump().c_str());
    if (code == "access_denied") {
      std::fprintf(stderr,
                   "samsactl: %s: %s. Run samsactl as root or as a member of group samsa "
                   "(usermod -aG samsa $USER, then log in again).\n",
                   socket.c_str(), msg.c_str());
      return kExitUnreachable;
    }
    std::fprintf(stderr, "samsactl: %s: %s\n", code.c_str(), msg.c_str());
    return kExitError;
  }
  return kExitOk;
}

std::string format_result(const std::string& name, const Value& r, bool with_key) {
  std::string out;
  if (name == "status") {
    out = fmt::format_status(r);
  } else if (name == "reload") {
    out = fmt::format_reload(r);
  } else if (name == "drain") {
    out = fmt::format_drain(r);
  } else if (name == "flush") {
    out = fmt::format_flush(r);
  } else if (name == "config get") {
    out = fmt::format_config_get(r, with_key);
  } else if (name == "config set") {
    out = fmt::format_config_set(r);
  } else if (name == "log-level") {
    out = fmt::format_log_level(r);
  } else if (name == "metrics") {
    out = r.is_string() ? r.as_string() : r.dump() + "\n";
  } else if (name == "topic list") {
    out = fmt::format_topic_list(r);
  } else if (name == "topic describe") {
    out = fmt::format_topic_describe(r);
  } else if (name == "topic create") {
    out = fmt::format_topic_create(r);
  } else if (name == "topic delete") {
    out = fmt::format_topic_delete(r);
  } else if (name == "partition describe") {
    out = fmt::format_partition_describe(r);
  } else if (name == "group list") {
    out = fmt::format_group_list(r);
  } else if (name == "group describe") {
    out = fmt::format_group_describe(r);
  } else if (name == "quorum") {
    out = fmt::format_quorum(r);
  } else if (name == "acl list") {
    out = fmt::format_acl_list(r);
  } else if (name == "user list") {
    out = fmt::format_user_list(r);
  } else if (name == "broker list") {
    out = fmt::format_broker_list(r);
  } else if (name == "broker describe") {
    out = fmt::format_broker_describe(r);
  } else if (name == "broker unregister") {
    out = fmt::format_broker_unregister(r);
  } else {
    out = fmt::format_generic(r);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  auto opts = parse_options(a);
  if (!opts) return opts.error();
  std::vector<std::string> rest(a.begin() + static_cast<long>(opts->first_word), a.end());
  auto found = find_command(rest);
  if (!found) return found.error();
  const auto [cmd, words] = *found;
  std::vector<std::string> args(rest.begin() + static_cast<long>(words), rest.end());
  for (const auto& x : args)
    if (is_help(x)) {
      command_help(*cmd);
      return kExitOk;
    }
  auto req = build_request(*cmd, args);
  if (!req) return req.error();
  if (opts->socket.empty()) opts->socket = default_socket();
  if (std::string_view(cmd->name) == "broker drain")
    return fmt::broker_drain(*req, args, opts->json_out, [&](const Value& q, Value& result) {
      Value a;
      int rc = call(opts->socket, q, opts->timeout_s, &a);
      if (rc == kExitOk) rc = check_answer(a, *opts);
      if (const Value* x = a.find("result"); rc == kExitOk && x) result = *x;
      return rc;
    });
  Value answer;
  if (int rc = call(opts->socket, *req, opts->timeout_s, &answer); rc != kExitOk) return rc;
  if (int rc = check_answer(answer, *opts); rc != kExitOk) return rc;
  const Value* result = answer.find("result");
  static const Value null_value;
  const Value& r = result ? *result : null_value;
  if (opts->json_out) {
    std::printf("%s\n", r.dump().c_str());
    return kExitOk;
  }
  const std::string out = format_result(cmd->name, r, !args.empty());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}
