// samsad — the samsa broker daemon.
//   samsad [--config FILE] [--override key=value]... [--version] [--help]
// Without --config it reads /etc/samsa/samsa.properties if present, else runs on defaults.
// Signals: SIGTERM/SIGINT shut down gracefully (during start-up too, within a second: a node
// waiting for its quorum stops, exit 0), SIGHUP re-reads the config file (as
// `samsactl reload`, which is synchronous). Under systemd (Type=notify): READY after recovery,
// STATUS lines, and WATCHDOG=1 only while every loop of the broker is turning.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <expected>
#include <filesystem>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/thread.h"
#include "daemon/broker.h"
#include "daemon/config.h"
#include "daemon/systemd.h"

namespace {

constexpr const char* kDefaultConfig = "/etc/samsa/samsa.properties";

void usage(FILE* out) {
  std::fprintf(out,
               "usage: samsad [--config FILE] [--override key=value]...\n"
               "  --config FILE        Kafka-style properties (default %s if present)\n"
               "  --override key=value overrides one setting; repeatable\n"
               "  --version            print the version and exit\n",
               kDefaultConfig);
}

struct Args {
  std::string config_file;
  bool config_given = false;
  std::vector<std::string> overrides;
};

// The command line, or the exit code when there is nothing to run (--help, --version, a bad
// argument).
std::expected<Args, int> parse_args(int argc, char** argv) {
  Args out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (a.size() > std::strlen(flag) && a[std::strlen(flag)] == '=')
        return a.substr(std::strlen(flag) + 1);
      if (i + 1 >= argc) {
        std::fprintf(stderr, "samsad: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return std::unexpected(0);
    } else if (a == "--version") {
      std::printf("samsad %s\n", SAMSA_VERSION);
      return std::unexpected(0);
    } else if (a.starts_with("--config")) {
      out.config_file = value("--config");
      out.config_given = true;
    } else if (a.starts_with("--override")) {
      out.overrides.push_back(value("--override"));
    } else {
      std::fprintf(stderr, "samsad: unknown argument %s\n", a.c_str());
      usage(stderr);
      return std::unexpected(2);
    }
  }
  if (!out.config_given && std::filesystem::exists(kDefaultConfig))
    out.config_file = kDefaultConfig;
  return out;
}

// Signals are taken synchronously through a signalfd on this thread; they are blocked before
// any other thread starts so every thread inherits the mask.
int take_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &mask, SFD_CLOEXEC);
}

// Until SIGTERM or SIGINT: the watchdog pinged while every loop turns, SIGHUP reloads.
void serve(samsa::daemon::Broker& broker, int sfd) {
  using namespace samsa;
  const std::int64_t watchdog_us = daemon::systemd::watchdog_usec();
  for (;;) {
    pollfd pfd{sfd, POLLIN, 0};
    int timeout_ms = watchdog_us > 0 ? static_cast<int>(watchdog_us / 2000) : -1;
    int n = poll(&pfd, 1, timeout_ms);
    if (watchdog_us > 0) {
      // Ping only while every reactor is turning: a stuck loop must get us restarted.
      if (broker.healthy()) daemon::systemd::notify_watchdog();
    }
    if (n <= 0) continue;
    signalfd_siginfo si;
    if (read(sfd, &si, sizeof si) != sizeof si) continue;
    if (si.ssi_signo == SIGHUP) {
      // As samsactl reload, without waiting for the threads to confirm.
      daemon::systemd::notify_reloading();
      auto r = broker.reload();
      if (!r) LOG_ERROR("reload failed, keeping the running configuration: %s", r.error().c_str());
      daemon::systemd::notify_ready(broker.status_line());
      continue;
    }
    LOG_INFO("signal %u: shutting down", si.ssi_signo);
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace samsa;
  set_thread_name("samsad");
  // Under systemd, straight to the journal with structured fields.
  daemon::systemd::log_to_journal_if_connected();
  auto args = parse_args(argc, argv);
  if (!args) return args.error();

  std::vector<std::string> warnings;
  auto cfg = daemon::Config::load(args->config_file, args->overrides, &warnings);
  if (!cfg) {
    LOG_ERROR("invalid configuration: %s", cfg.error().c_str());
    return 1;
  }
  for (const auto& w : warnings)
    LOG_WARN("%s", w.c_str());
  if (auto lvl = log::parse_level(cfg->get_string("samsa.log.level"))) log::set_level(*lvl);
  const int sfd = take_signals();

  // READY=1 only once every log is recovered and every listener is open; meanwhile STATUS shows
  // how far recovery is, and each step forward pushes systemd's start timeout out, so a large
  // data dir can take its time while a stuck start still times out.
  daemon::systemd::notify_status("starting: replaying cluster metadata");
  std::string last_progress;
  // SIGTERM and SIGINT wait in the signalfd (blocked) until serve(); pending, they end a start
  // that is still waiting (for the quorum, or on a long recovery).
  auto stop_pending = [] {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
  };
  auto broker = daemon::Broker::start(
      std::move(*cfg),
      [&](const std::string& line) {
        daemon::systemd::notify_status(line);
        if (line != last_progress) daemon::systemd::notify_extend_timeout(30'000'000);
        last_progress = line;
      },
      stop_pending);
  if (!broker && broker.error() == daemon::Broker::kStoppedDuringStart) {
    LOG_INFO("signal received during start-up: stopped");
    return 0;
  }
  if (!broker) {
    LOG_ERROR("start failed: %s", broker.error().c_str());
    daemon::systemd::notify_status("start failed: " + broker.error());
    return 1;
  }
  daemon::systemd::notify_ready((*broker)->status_line());
  serve(**broker, sfd);
  daemon::systemd::notify_stopping();
  (*broker)->shutdown();
  broker->reset();
  LOG_INFO("stopped");
  return 0;
}
