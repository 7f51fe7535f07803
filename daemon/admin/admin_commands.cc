#include "daemon/admin/admin_commands.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "base/log.h"
#include "daemon/broker.h"
#include "daemon/systemd.h"

namespace samsa::daemon {

// ---- arguments ----

bool Args::fail(std::string msg) {
  if (!failed_) r_.error(admin_error::invalid_argument, std::move(msg));
  failed_ = true;
  return false;
}

std::optional<std::string> Args::string(const char* name, bool required) {
  const json::Value* v = a_.find(name);
  if (!v || v->is_null()) {
    if (required) fail(std::string("missing argument \"") + name + "\"");
    return std::nullopt;
  }
  if (!v->is_string()) {
    fail(std::string("argument \"") + name + "\" must be a string");
    return std::nullopt;
  }
  return v->as_string();
}

std::optional<std::int64_t> Args::integer(const char* name, bool required, std::int64_t min,
                                          std::int64_t max) {
  const json::Value* v = a_.find(name);
  if (!v || v->is_null()) {
    if (required) fail(std::string("missing argument \"") + name + "\"");
    return std::nullopt;
  }
  if (!v->is_int()) {
    fail(std::string("argument \"") + name + "\" must be an integer");
    return std::nullopt;
  }
  if (v->as_int() < min || v->as_int() > max) {
    fail(std::string("argument \"") + name + "\" must be in [" + std::to_string(min) + ", " +
         std::to_string(max) + "]");
    return std::nullopt;
  }
  return v->as_int();
}

const json::Value* Args::object(const char* name, bool required) {
  const json::Value* v = a_.find(name);
  if (!v || v->is_null()) {
    if (required) fail(std::string("missing argument \"") + name + "\"");
    return nullptr;
  }
  if (!v->is_object()) {
    fail(std::string("argument \"") + name + "\" must be an object");
    return nullptr;
  }
  return v;
}

namespace {

const char* layer_name(Config::Layer l) {
  switch (l) {
    case Config::Layer::defaults:
      return "default";
    case Config::Layer::file:
      return "file";
    case Config::Layer::dynamic_default:
      return "dynamic-default";
    case Config::Layer::dynamic:
      return "dynamic";
    case Config::Layer::override_:
      return "override";
  }
  return "?";
}

std::string iso_time(std::int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

bool serving(Broker& b, const Reply& r, bool drained_ok) {
  auto s = b.state();
  if (s == Broker::State::serving || s == Broker::State::draining ||
      (drained_ok && s == Broker::State::drained))
    return true;
  r.error(
      admin_error::unavailable,
      std::string("samsad is ") + Broker::state_name(s) +
          (s == Broker::State::starting ? " (recovering its logs; samsactl status shows how far)"
                                        : ""));
  return false;
}

std::string lower_error(kafka::ErrorCode e) {
  std::string s(kafka::error_name(e));
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s.empty() ? "kafka_error_" + std::to_string(kafka::code(e)) : s;
}

namespace {

json::Value recovery_json(Broker& b) {
  json::Value r;
  r["duration_ms"] = b.recovery_ms();
  json::Value dirs = json::Value::array();
  const auto& summaries = b.recovery();
  for (std::size_t i = 0; i < b.log_dirs().size(); ++i) {
    const auto& d = b.log_dirs()[i];
    auto s = i < summaries.size() ? summaries[i] : d->recovery_summary();
    json::Value e;
    e["path"] = d->root().string();
    e["previous_shutdown"] = s.clean ? "clean" : s.found == 0 ? "none" : "unclean";
    e["partitions_found"] = s.found;
    e["partitions_opened"] = s.opened;
    e["segments"] = s.segments;
    e["bytes"] = s.bytes;
    e["scanned_segments"] = s.scanned_segments;
    e["truncated_partitions"] = s.truncated;
    dirs.push(std::move(e));
  }
  r["log_dirs"] = std::move(dirs);
  return r;
}

std::optional<json::Value> backend_json(const net::Backend& backend) {
  const net::BackendStatus st = backend.status();
  if (st.fields.empty() && st.rows.empty()) return std::nullopt;
  json::Value v;
  for (const auto& [k, f] : st.fields)
    std::visit([&](const auto& x) { v[k] = x; }, f);
  json::Value rows = json::Value::array();
  for (const auto& [label, line] : st.rows) {
    json::Value row = json::Value::array();
    row.push(label);
    row.push(line);
    rows.push(std::move(row));
  }
  v["rows"] = std::move(rows);
  return v;
}

// One part of `status` from its thread: reactor i (i < n), the controller (n), the coordinator.
void status_part(Broker& b, std::size_t n, std::size_t i,
                 std::function<void(json::Value)> deliver) {
  if (i < n) {
    b.on_reactor(i, [deliver](ReactorContext& ctx) {
      ReactorSample s = sample_reactor(ctx, false);
      json::Value v;
      v["id"] = s.index;
      v["utilisation"] = s.utilisation;
      v["partitions"] = ctx.shard ? ctx.shard->partition_count() : 0;
      v["failed_partitions"] = s.failed_partitions.size();
      v["connections"] = s.connections;
      v["in_flight"] = s.in_flight;
      v["turns"] = s.turns;
      deliver(std::move(v));
    });
  } else if (i == n) {
    b.on_controller([deliver](replication::Controller& c) {
      json::Value v;
      v["metadata_offset"] = static_cast<long long>(c.image()->offset());
      v["topics"] = c.image()->topics().size();
      deliver(std::move(v));
    });
  } else {
    b.on_coordinator([deliver](coordinator::GroupCoordinator& g) {
      json::Value v;
      v["groups"] = g.group_count();
      v["started"] = g.started();
      v["loaded"] = g.loaded();
      deliver(std::move(v));
    });
  }
}

void status(Broker& b, AdminServer& admin, const json::Value&, Reply reply) {
  const Config cfg = b.config();
  const auto settings = b.settings();
  json::Value out;
  out["version"] = SAMSA_VERSION;
  out["pid"] = static_cast<long long>(::getpid());
  out["node_id"] = settings->node_id;
  out["cluster_id"] = settings->cluster_id;
  out["state"] = Broker::state_name(b.state());
  out["started_at"] = iso_time(b.start_wall_ms());
  out["uptime_s"] = static_cast<double>(mono_ns() - b.start_mono_ns()) / 1e9;
  json::Value listeners = json::Value::array();
  for (const auto& e : settings->listeners)
    listeners.push(e.name + "://" + (e.host.empty() ? std::string("0.0.0.0") : e.host) + ":" +
                   std::to_string(e.port));
  out["listeners"] = std::move(listeners);
  out["backend"] = cfg.get_string("samsa.net.backend");
  // The backend's own part (dpdk: its device and queues) under its name.
  if (auto v = backend_json(b.backend())) out[b.backend().name()] = std::move(*v);
  out["config_file"] = cfg.file();
  out["admin_socket"] = cfg.get_string("samsa.admin.socket");
  out["metrics_listen"] = cfg.get_string("samsa.metrics.listen");
  out["log_level"] = log::level_name(log::level());
  if (b.state() == Broker::State::starting) {
    out["recovery"] = recovery_json(b);
    out["recovery"]["progress"] = b.progress_line();
    reply.ok(std::move(out));
    return;
  }
  out["recovery"] = recovery_json(b);
  const std::size_t n = b.reactor_count();
  // Targets: every reactor, then the controller, then the coordinator.
  gather<json::Value>(
      admin, n + 2, kGatherTimeoutMs,
      [&b, n](std::size_t i, std::function<void(json::Value)> deliver) {
        status_part(b, n, i, std::move(deliver));
      },
      [reply, n, out = std::move(out)](std::vector<std::optional<json::Value>> got) mutable {
        json::Value reactors = json::Value::array();
        for (std::size_t i = 0; i < n; ++i) {
          if (got[i]) {
            (*got[i])["responding"] = true;
            reactors.push(std::move(*got[i]));
          } else {
            json::Value v;
            v["id"] = i;
            v["responding"] = false;
            reactors.push(std::move(v));
          }
        }
        out["reactors"] = std::move(reactors);
        auto part = [&](std::optional<json::Value>& v) {
          if (!v) {
            json::Value x;
            x["responding"] = false;
            return x;
          }
          (*v)["responding"] = true;
          return std::move(*v);
        };
        out["controller"] = part(got[n]);
        out["coordinator"] = part(got[n + 1]);
        reply.ok(std::move(out));
      });
}

json::Value config_entry(const Config& cfg, const ConfigKey& k) {
  json::Value e;
  e["key"] = k.name;
  // Passwords and keys stay in the config file: the socket's peers are admins, but its answers
  // end up in terminals and bug reports.
  e["value"] = Config::sensitive(k.name) && cfg.is_set(k.name) ? std::string("[hidden]")
                                                               : cfg.get_string(k.name);
  e["source"] = layer_name(cfg.source(k.name));
  e["default"] = k.default_value;
  e["dynamic"] = k.dynamic;
  e["doc"] = k.doc;
  return e;
}

void config_get(Broker& b, const json::Value& args, Reply reply) {
  Args a(args, reply);
  auto key = a.string("key", false);
  if (a.failed()) return;
  const Config cfg = b.config();
  json::Value list = json::Value::array();
  if (key) {
    const ConfigKey* k = Config::find_key(*key);
    if (!k) return reply.error(admin_error::not_found, "unknown config key " + *key);
    list.push(config_entry(cfg, *k));
  } else {
    for (const auto& k : Config::keys())
      list.push(config_entry(cfg, k));
  }
  json::Value out;
  out["file"] = cfg.file();
  out["configs"] = std::move(list);
  reply.ok(std::move(out));
}

// Stored in the metadata log (a ConfigRecord for this broker), applied by every thread when
// the image that carries it is published, answered once applied everywhere.
void config_set(Broker& b, const json::Value& args, Reply reply) {
  if (!serving(b, reply)) return;
  Args a(args, reply);
  auto key = a.string("key", true);
  auto value = a.string("value", false);
  if (a.failed()) return;
  const ConfigKey* k = Config::find_key(*key);
  if (!k) return reply.error(admin_error::invalid_config, "unknown config key " + *key);
  if (!k->dynamic)
    return reply.error(
        admin_error::invalid_config,
        *key + " cannot change at run time: set it in " +
            (b.config().file().empty() ? std::string("the config file") : b.config().file()) +
            " and restart samsad");
  // The same checks as IncrementalAlterConfigs (the controller asks the broker again).
  if (auto why = Config::check_dynamic(*key, value))
    return reply.error(admin_error::invalid_config, *why);
  replication::ConfigAlteration change;
  change.resource = replication::ConfigResource::broker;
  change.name = std::to_string(b.settings()->node_id);  // this broker, not the cluster default
  change.ops.push_back(
      {*key, value ? replication::ConfigOpType::set : replication::ConfigOpType::remove, value});
  LOG_INFO("admin: config set %s=%s (uid %u)", key->c_str(), value ? value->c_str() : "<default>",
           static_cast<unsigned>(reply.peer_uid()));
  b.on_controller([&b, reply, change, key = *key](replication::Controller& c) {
    c.alter_configs({change}, false, [&b, reply, key](std::vector<replication::ConfigOutcome> res) {
      const auto& o = res.front();
      if (o.error != kafka::ErrorCode::none) {
        reply.error(
            o.error == kafka::ErrorCode::invalid_config ? admin_error::invalid_config
                                                        : admin_error::failed,
            std::string(kafka::error_name(o.error)) + (o.message.empty() ? "" : ": " + o.message));
        return;
      }
      // Every reactor has applied the image (and the settings posted before it); the
      // coordinator's options were posted with them: one more round trip covers it.
      b.on_coordinator([&b, reply, key](coordinator::GroupCoordinator&) {
        const Config cfg = b.config();
        json::Value out = config_entry(cfg, *Config::find_key(key));
        if (cfg.source(key) == Config::Layer::override_)
          out["note"] = "stored, but an --override on samsad's command line still wins";
        reply.ok(std::move(out));
      });
    });
  });
}

void reload(Broker& b, AdminServer& admin, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  systemd::notify_reloading();
  auto changed = b.reload();
  if (!changed) {
    systemd::notify_ready(b.status_line());
    LOG_ERROR("reload failed, keeping the running configuration: %s", changed.error().c_str());
    return reply.error(admin_error::invalid_config, changed.error());
  }
  json::Value list = json::Value::array();
  for (const auto& c : *changed) {
    json::Value e;
    e["key"] = c.key;
    e["value"] = c.value;
    e["applied"] = c.applied;
    if (!c.applied) e["note"] = "takes effect at the next restart";
    list.push(std::move(e));
  }
  // The settings were posted to every thread; one more round trip to each proves them applied.
  const std::size_t n = b.reactor_count();
  gather<bool>(
      admin, n + 2, kGatherTimeoutMs * 3,
      [&b, n](std::size_t i, std::function<void(bool)> deliver) {
        if (i < n) {
          b.on_reactor(i, [deliver](ReactorContext&) { deliver(true); });
        } else if (i == n) {
          b.on_controller([deliver](replication::Controller&) { deliver(true); });
        } else {
          b.on_coordinator([deliver](coordinator::GroupCoordinator&) { deliver(true); });
        }
      },
      [&b, reply, list = std::move(list)](std::vector<std::optional<bool>> got) mutable {
        systemd::notify_ready(b.status_line());
        for (const auto& g : got) {
          if (!g)
            return reply.error(admin_error::timeout,
                               "the new settings were handed to every thread, but not all "
                               "confirmed them in time");
        }
        json::Value out;
        out["file"] = b.config().file();
        out["changed"] = std::move(list);
        reply.ok(std::move(out));
      });
}

void log_level(const json::Value& args, Reply reply) {
  Args a(args, reply);
  auto level = a.string("level", false);
  if (a.failed()) return;
  json::Value out;
  out["previous"] = log::level_name(log::level());
  if (level) {
    auto l = log::parse_level(*level);
    if (!l)
      return reply.error(admin_error::invalid_argument,
                         "level must be one of error, warn, info, debug");
    log::set_level(*l);
    LOG_INFO("admin: log level set to %s (until the next reload or restart)", log::level_name(*l));
  }
  out["level"] = log::level_name(log::level());
  reply.ok(std::move(out));
}

void flush(Broker& b, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  const std::int64_t t0 = mono_ns();
  std::string err = b.flush_logs();
  if (!err.empty()) return reply.error(admin_error::failed, err);
  json::Value out;
  out["log_dirs"] = b.log_dirs().size();
  out["elapsed_ms"] = static_cast<double>(mono_ns() - t0) / 1e6;
  reply.ok(std::move(out));
}

// Asks the log cleaner to look at every compacted log now and clean those with anything dirty,
// whatever their min.cleanable.dirty.ratio (the passes run in the background).
void clean(Broker& b, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  io::LogCleaner* c = b.cleaner();
  if (!c) return reply.error(admin_error::unavailable, "the log cleaner is not running");
  const auto before = c->stats();
  c->check_now(true);
  json::Value out;
  out["requested"] = true;
  out["passes_so_far"] = before.passes;
  out["note"] = "passes run in the background: see samsa_log_cleaner_passes_total";
  reply.ok(std::move(out));
}

void drain(Broker& b, const json::Value&, Reply reply) {
  if (b.state() == Broker::State::draining || b.state() == Broker::State::drained)
    return reply.error(admin_error::unavailable, "already draining");
  if (!serving(b, reply)) return;
  b.drain([reply](Broker::DrainResult r) {
    if (!r.flush_error.empty()) return reply.error(admin_error::failed, r.flush_error);
    json::Value out;
    out["connections_closed"] = r.connections;
    out["requests_in_flight"] = r.in_flight;
    out["requests_unanswered"] = r.left;
    out["elapsed_ms"] = static_cast<long long>(r.elapsed_ms);
    out["state"] = "drained";
    reply.ok(std::move(out));
  });
}

void metrics(Broker& b, AdminServer& admin, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  auto base = std::make_shared<BrokerSample>();
  base->version = SAMSA_VERSION;
  const auto settings = b.settings();
  base->node_id = settings->node_id;
  base->cluster_id = settings->cluster_id;
  base->uptime_s = static_cast<double>(mono_ns() - b.start_mono_ns()) / 1e9;
  base->start_time_s = static_cast<double>(b.start_wall_ms()) / 1e3;
  base->io_workers = count_io_workers();
  base->backend = &b.backend();
  if (const io::LogCleaner* c = b.cleaner()) base->cleaner = c->stats();
  if (settings->cluster_broker())
    base->replication_throttles = {b.replication_quotas().leader.stats(mono_ms()),
                                   b.replication_quotas().follower.stats(mono_ms())};
  const std::size_t n = b.reactor_count();
  using Part = std::variant<ReactorSample, std::vector<GroupSample>,
                            std::pair<std::int64_t, std::size_t>, TxnCoordinatorSample>;
  gather<Part>(
      admin, n + 3, kGatherTimeoutMs,
      [&b, n](std::size_t i, std::function<void(Part)> deliver) {
        if (i < n) {
          b.on_reactor(i, [deliver](ReactorContext& ctx) { deliver(sample_reactor(ctx)); });
        } else if (i == n) {
          b.on_controller([deliver](replication::Controller& c) {
            deliver(std::pair<std::int64_t, std::size_t>(c.image()->offset(),
                                                         c.image()->topics().size()));
          });
        } else if (i == n + 2) {
          b.on_txn_coordinator([deliver](coordinator::TxnCoordinator& t) {
            deliver(TxnCoordinatorSample{t.stats(), t.transaction_count()});
          });
        } else {
          // Every group's committed offsets: list, then fetch each (answers come on this thread).
          b.on_coordinator([deliver](coordinator::GroupCoordinator& g) {
            g.list_groups({}, [&g, deliver](coordinator::ListResult lr) {
              auto acc = std::make_shared<std::vector<GroupSample>>();
              auto left = std::make_shared<std::size_t>(lr.groups.size());
              if (lr.groups.empty()) return deliver(std::vector<GroupSample>{});
              for (const auto& lg : lr.groups) {
                GroupSample gs;
                gs.group = lg.group_id;
                gs.state = lg.state;
                if (auto snap = g.snapshot(lg.group_id)) gs.members = snap->members.size();
                coordinator::FetchRequest fr;
                fr.group_id = lg.group_id;
                g.fetch_offsets(std::move(fr),
                                [acc, left, gs, deliver](coordinator::FetchResult res) mutable {
                                  for (const auto& o : res.offsets)
                                    if (o.error == kafka::ErrorCode::none)
                                      gs.offsets.push_back({o.topic, o.partition, o.offset});
                                  acc->push_back(std::move(gs));
                                  if (--*left == 0) deliver(std::move(*acc));
                                });
              }
            });
          });
        }
      },
      [reply, base, n](std::vector<std::optional<Part>> got) {
        BrokerSample& s = *base;
        for (std::size_t i = 0; i < n; ++i) {
          if (got[i]) {
            s.reactors.push_back(std::get<ReactorSample>(std::move(*got[i])));
          } else {
            s.reactors.push_back(std::nullopt);
          }
        }
        if (got[n]) {
          auto [off, topics] = std::get<std::pair<std::int64_t, std::size_t>>(*got[n]);
          s.metadata_offset = off;
          s.topics = topics;
        }
        if (got[n + 1]) s.groups = std::get<std::vector<GroupSample>>(std::move(*got[n + 1]));
        if (got[n + 2]) s.txn = std::get<TxnCoordinatorSample>(std::move(*got[n + 2]));
        reply.ok(json::Value(render_prometheus(s)));
      });
}

// Test-only: blocks one of the broker's loops, as a bug or a stuck system call would, so
// tests can watch systemd's watchdog restart samsad. Refused unless samsa.testing.hooks=true.
void testing_stall(Broker& b, const json::Value& args, Reply reply) {
  if (!b.testing_hooks())
    return reply.error(admin_error::unavailable,
                       "testing hooks are off (samsa.testing.hooks=false)");
  if (!serving(b, reply)) return;
  Args a(args, reply);
  auto target = a.string("target", false);
  auto index = a.integer("index", false, 0, 1 << 16);
  auto seconds = a.integer("seconds", true, 1, 3600);
  if (a.failed()) return;
  const std::string t = target.value_or("reactor");
  const auto secs = std::chrono::seconds(*seconds);
  LOG_WARN("testing hook: stalling %s %lld for %lld s", t.c_str(),
           static_cast<long long>(index.value_or(0)), static_cast<long long>(*seconds));
  if (t == "reactor") {
    const auto i = static_cast<std::size_t>(index.value_or(0));
    if (i >= b.reactor_count())
      return reply.error(admin_error::invalid_argument, "no reactor " + std::to_string(i));
    b.on_reactor(i, [secs](ReactorContext&) { std::this_thread::sleep_for(secs); });
  } else if (t == "controller") {
    b.on_controller([secs](replication::Controller&) { std::this_thread::sleep_for(secs); });
  } else if (t == "coordinator") {
    b.on_coordinator([secs](coordinator::GroupCoordinator&) { std::this_thread::sleep_for(secs); });
  } else {
    return reply.error(admin_error::invalid_argument,
                       "target must be reactor, controller or coordinator");
  }
  json::Value out;
  out["stalled"] = t;
  out["seconds"] = static_cast<long long>(*seconds);
  reply.ok(std::move(out));
}

}  // namespace

void register_admin_commands(AdminServer& admin, Broker& b) {
  admin.add_command("status",
                    [&b, &admin](const json::Value& a, Reply r) { status(b, admin, a, r); });
  admin.add_command("config.get", [&b](const json::Value& a, Reply r) { config_get(b, a, r); });
  admin.add_command("config.set", [&b](const json::Value& a, Reply r) { config_set(b, a, r); });
  admin.add_command("reload",
                    [&b, &admin](const json::Value& a, Reply r) { reload(b, admin, a, r); });
  admin.add_command("log.level", [](const json::Value& a, Reply r) { log_level(a, r); });
  admin.add_command("flush", [&b](const json::Value& a, Reply r) { flush(b, a, r); });
  admin.add_command("clean", [&b](const json::Value& a, Reply r) { clean(b, a, r); });
  admin.add_command("drain", [&b](const json::Value& a, Reply r) { drain(b, a, r); });
  admin.add_command("metrics",
                    [&b, &admin](const json::Value& a, Reply r) { metrics(b, admin, a, r); });
  admin.add_command("testing.stall",
                    [&b](const json::Value& a, Reply r) { testing_stall(b, a, r); });
  register_topic_commands(admin, b);
  register_quorum_command(admin, b);
  register_security_commands(admin, b);
  register_broker_commands(admin, b);
}

}  // namespace samsa::daemon
