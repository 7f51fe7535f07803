// samsactl broker: the registered brokers (broker.list, broker.describe) as tables, and a
// broker's retirement: drain (broker.drain, then broker.describe each second to follow it) and
// unregister.
#include "daemon/samsactl/samsactl_brokers.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>

#include "base/clock.h"
#include "daemon/samsactl/samsactl_format.h"

namespace samsa::samsactl {
namespace {

constexpr long long kDefaultDrainTimeoutS = 300;

bool parse_int(const std::string& s, long long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::string str(const Value& v, std::string_view key) {
  const Value* x = v.find(key);
  if (!x || x->is_null()) return "-";
  if (x->is_string()) return x->as_string();
  return x->dump();
}

long long num(const Value& v, std::string_view key) {
  const Value* x = v.find(key);
  return x && x->is_number() ? x->as_int() : 0;
}

const std::vector<Value>& arr(const Value& v, std::string_view key) {
  static const std::vector<Value> none;
  const Value* x = v.find(key);
  return x && x->is_array() ? x->items() : none;
}

std::string ids(const Value& v, std::string_view key) {
  std::string s;
  for (const auto& x : arr(v, key))
    s += (s.empty() ? "" : ",") + x.dump();
  return s.empty() ? "-" : s;
}

std::string state_of(const Value& b) {
  const Value* f = b.find("fenced");
  const Value* s = b.find("in_controlled_shutdown");
  if (f && f->is_bool() && f->as_bool()) return "fenced";
  if (s && s->is_bool() && s->as_bool()) return "shutting down";
  return "active";
}

std::string endpoints(const Value& b) {
  std::string s;
  for (const auto& e : arr(b, "endpoints"))
    s += (s.empty() ? "" : " ") + str(e, "name") + "://" + str(e, "host") + ":" + str(e, "port");
  return s.empty() ? "-" : s;
}

// "--timeout S" and "--no-wait" after the id; the usage error, if any.
std::optional<std::string> drain_flags(const std::vector<std::string>& args, bool& wait,
                                       long long& timeout_s) {
  for (std::size_t k = 1; k < args.size(); ++k) {
    const std::string& f = args[k];
    if (f == "--no-wait") {
      wait = false;
    } else if (f == "--timeout" || f.starts_with("--timeout=")) {
      std::string v = f.size() > 9 ? f.substr(10) : (k + 1 < args.size() ? args[++k] : "");
      if (!parse_int(v, timeout_s) || timeout_s <= 0) return "--timeout needs whole seconds";
    } else {
      return "unknown option " + f;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> broker_request(const std::string& command,
                                          const std::vector<std::string>& args, Value& req,
                                          Value& ar) {
  const std::string sub = command.substr(command.find(' ') + 1);
  req["cmd"] = "broker." + sub;
  if (sub == "list")
    return args.empty() ? std::nullopt : std::optional<std::string>("no arguments");
  long long id = 0;
  if (args.empty() || !parse_int(args[0], id) || id < 0) return "a broker id comes first";
  ar["id"] = id;
  if (sub == "describe" && args.size() > 1) return "only a broker id";
  if (sub == "unregister") {
    for (std::size_t k = 1; k < args.size(); ++k) {
      if (args[k] != "--force") return "unknown option " + args[k];
      ar["force"] = true;
    }
  }
  if (sub == "drain") {
    bool wait = true;
    long long t = kDefaultDrainTimeoutS;
    if (auto why = drain_flags(args, wait, t)) return why;
  }
  return std::nullopt;
}

std::string format_broker_list(const Value& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : arr(r, "brokers"))
    rows.push_back({str(b, "id"), str(b, "rack"), state_of(b), str(b, "replicas"),
                    str(b, "leaderships"), endpoints(b)});
  if (rows.empty()) return "no brokers registered\n";
  return table({"ID", "RACK", "STATE", "REPLICAS", "LEADERS", "ENDPOINTS"}, rows);
}

std::string format_broker_describe(const Value& r) {
  std::string out = "broker " + str(r, "id") + ": " + state_of(r) + ", rack " + str(r, "rack") +
                    ", epoch " + str(r, "epoch") + "\nendpoints: " + endpoints(r) + "\n" +
                    str(r, "replicas") + " replicas, " + str(r, "leaderships") + " leaderships\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : arr(r, "partitions"))
    rows.push_back({str(p, "topic"), str(p, "partition"), str(p, "role"), str(p, "leader"),
                    ids(p, "replicas"), ids(p, "isr")});
  if (!rows.empty())
    out += "\n" + table({"TOPIC", "PARTITION", "ROLE", "LEADER", "REPLICAS", "ISR"}, rows);
  rows.clear();
  for (const auto& p : arr(r, "reassignments"))
    rows.push_back({str(p, "topic"), str(p, "partition"), ids(p, "replicas"), ids(p, "adding"),
                    ids(p, "removing")});
  if (!rows.empty())
    out += "\nreassignments in progress:\n" +
           table({"TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"}, rows);
  return out;
}

std::string format_broker_unregister(const Value& r) {
  return "broker " + str(r, "broker") + " unregistered\n";
}

int broker_drain(const Value& request, const std::vector<std::string>& args, bool json_out,
                 const Call& call) {
  bool wait = true;
  long long timeout_s = kDefaultDrainTimeoutS;
  drain_flags(args, wait, timeout_s);  // checked by broker_request
  const std::int64_t start = mono_ns();
  Value plan;
  if (int rc = call(request, plan); rc != 0) return rc;
  const long long id = num(plan, "broker");
  long long total = num(plan, "partitions");
  if (json_out && !wait) std::printf("%s\n", plan.dump().c_str());
  if (!json_out)
    std::printf("broker %lld: %lld partitions to move off it, %lld reassignments submitted (%s)\n",
                id, total, num(plan, "submitted"), str(plan, "via").c_str());
  std::fflush(stdout);
  if (!wait) return 0;
  // Progress lines go to standard error with --json, so standard output stays one JSON value.
  FILE* progress = json_out ? stderr : stdout;
  Value describe;
  describe["v"] = 1;
  describe["cmd"] = "broker.describe";
  describe["args"]["id"] = id;
  // Polled five times a second (the end is seen within 200 ms), printed once a second.
  std::int64_t next_print = start;
  for (;;) {
    Value b;
    if (int rc = call(describe, b); rc != 0) return rc;
    const long long replicas = num(b, "replicas"), leaders = num(b, "leaderships");
    const std::int64_t now = mono_ns();
    const double elapsed = static_cast<double>(now - start) / 1e9;
    const long long moved = std::max(0LL, total - replicas);
    if (replicas == 0 && leaders == 0) {
      std::fprintf(progress, "broker %lld: drained, %lld of %lld partitions moved in %.1f s\n", id,
                   moved, total, elapsed);
      if (json_out) std::printf("%s\n", plan.dump().c_str());
      return 0;
    }
    // Replicas placed on the broker after the plan (a topic created meanwhile) are in no
    // reassignment: plan again for them, or the drain would wait for nothing.
    if (replicas > 0 && num(b, "reassigning") == 0) {
      Value again;
      if (int rc = call(request, again); rc != 0) return rc;
      total = moved + num(again, "partitions");
      std::fprintf(progress,
                   "broker %lld: %lld replicas placed on it since the drain began, %lld more "
                   "reassignments submitted\n",
                   id, num(again, "partitions"), num(again, "submitted"));
    }
    if (now >= next_print) {
      next_print += 1'000'000'000;
      std::string eta = "unknown";
      if (moved > 0)
        eta = std::to_string(static_cast<long long>(
                  static_cast<double>(replicas) * elapsed / static_cast<double>(moved) + 0.5)) +
              " s";
      std::fprintf(progress,
                   "broker %lld: %lld of %lld partitions moved, %lld replicas and %lld "
                   "leaderships left, ETA %s\n",
                   id, moved, total, replicas, leaders, eta.c_str());
      std::fflush(progress);
    }
    if (elapsed >= static_cast<double>(timeout_s)) {
      std::fprintf(stderr,
                   "samsactl: timeout: broker %lld still holds %lld replicas and %lld "
                   "leaderships after %lld s (samsactl broker describe %lld shows them)\n",
                   id, replicas, leaders, timeout_s, id);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace samsa::samsactl
