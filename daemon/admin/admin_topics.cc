// Admin commands about topics, partitions and consumer groups. Topic state comes from the
// controller's metadata image; log state (high watermark, offsets, segments, size) from the
// shard that owns each partition; groups and committed offsets from the coordinator.
#include <algorithm>
#include <charconv>

#include "base/bytes.h"
#include "base/log.h"
#include "coordinator/records.h"
#include "daemon/admin/admin_commands.h"
#include "daemon/broker.h"
#include "replication/topic_config.h"

namespace samsa::daemon {
namespace {

json::Value partition_json(const PartitionSample& p) {
  json::Value v;
  v["partition"] = p.partition;
  v["leader_epoch"] = p.leader_epoch;
  v["high_watermark"] = static_cast<long long>(p.high_watermark);
  v["last_stable_offset"] = static_cast<long long>(p.last_stable);
  v["open_transactions"] = static_cast<long long>(p.open_txns);
  v["aborted_transactions_indexed"] = static_cast<long long>(p.aborted_txns);
  v["log_start_offset"] = static_cast<long long>(p.log_start);
  v["log_end_offset"] = static_cast<long long>(p.log_end);
  v["segments"] = p.segments;
  v["size_bytes"] = p.size_bytes;
  v["producers"] = p.producers;
  v["fenced"] = p.fenced;
  v["dir"] = p.dir;
  if (p.compacted) {
    json::Value c;
    c["dirty_ratio"] = p.dirty_ratio;
    c["first_dirty_offset"] = static_cast<long long>(p.first_dirty);
    c["last_cleaning_ms_ago"] = static_cast<long long>(p.last_clean_ms);
    c["passes"] = p.clean_passes;
    v["compaction"] = std::move(c);
  }
  if (p.role.empty()) return v;
  json::Value r;
  r["role"] = p.role;
  r["leader"] = p.leader;
  r["partition_epoch"] = p.partition_epoch;
  r["durable_end_offset"] = static_cast<long long>(p.durable_end);
  r["isr"] = json::int_array(p.isr);
  r["maximal_isr"] = json::int_array(p.maximal_isr);
  json::Value fs = json::Value::array();
  for (const auto& f : p.followers) {
    json::Value fv;
    fv["id"] = f.id;
    fv["fetch_offset"] = static_cast<long long>(f.fetch_offset);
    fv["last_fetch_ms_ago"] = static_cast<long long>(f.last_fetch_ms);
    fv["caught_up_ms_ago"] = static_cast<long long>(f.caught_up_ms);
    fs.push(std::move(fv));
  }
  r["followers"] = std::move(fs);
  r["fetch_in_flight_ms"] = static_cast<long long>(p.fetch_in_flight_ms);
  r["pending_truncation"] = static_cast<long long>(p.pending_truncation);
  v["replica"] = std::move(r);
  return v;
}

// The log state of a topic's partitions (all, or one), from their owning shards.
void sample_partitions(Broker& b, AdminServer& admin, std::string topic, std::int32_t only,
                       std::function<void(std::map<std::int32_t, PartitionSample>,
                                          std::map<std::int32_t, std::string>, bool complete)>
                           done) {
  gather<std::pair<std::vector<PartitionSample>, std::map<std::int32_t, std::string>>>(
      admin, b.reactor_count(), kGatherTimeoutMs,
      [&b, topic, only](std::size_t i, auto deliver) {
        b.on_reactor(i, [topic, only, deliver](ReactorContext& ctx) {
          std::vector<PartitionSample> out;
          std::map<std::int32_t, std::string> failed;
          if (ctx.shard) {
            ctx.shard->for_each([&](replication::Partition& p) {
              if (p.topic() != topic || (only >= 0 && p.index() != only)) return;
              PartitionSample s = sample_partition(p);
              out.push_back(std::move(s));
            });
            const std::string prefix = topic + "-";
            for (const auto& [name, why] : ctx.shard->failed()) {
              if (!name.starts_with(prefix)) continue;
              std::int32_t part = -1;
              const char* b = name.data() + prefix.size();
              const char* e = name.data() + name.size();
              if (std::from_chars(b, e, part).ptr == e) failed[part] = why;
            }
          }
          deliver({std::move(out), std::move(failed)});
        });
      },
      [done](auto got) {
        std::map<std::int32_t, PartitionSample> parts;
        std::map<std::int32_t, std::string> failed;
        bool complete = true;
        for (auto& g : got) {
          if (!g) {
            complete = false;
            continue;
          }
          for (auto& p : g->first)
            parts[p.partition] = std::move(p);
          for (auto& [k, v] : g->second)
            failed[k] = v;
        }
        done(std::move(parts), std::move(failed), complete);
      });
}

// The topic's metadata (controller thread) as JSON, or nullopt if it does not exist.
std::optional<json::Value> topic_meta(const replication::MetadataImage& img,
                                      const std::string& name,
                                      const replication::TopicDefaults& defaults) {
  const auto* t = img.topic(name);
  if (!t) return std::nullopt;
  json::Value v;
  v["name"] = t->name;
  v["id"] = replication::uuid_to_string(t->id);
  v["internal"] = replication::is_internal_topic(t->name);
  json::Value parts = json::Value::array();
  for (const auto& p : t->partitions) {
    json::Value pv;
    pv["partition"] = p.partition;
    pv["leader"] = p.leader;
    pv["leader_epoch"] = p.leader_epoch;
    pv["replicas"] = json::int_array(p.replicas);
    pv["isr"] = json::int_array(p.isr);
    parts.push(std::move(pv));
  }
  v["partitions"] = std::move(parts);
  json::Value overrides = json::Value::object();
  for (const auto& [k, val] : t->configs)
    overrides[k] = val;
  v["config_overrides"] = std::move(overrides);
  json::Value eff = json::Value::object();
  for (const auto& k : replication::topic_config_keys())
    eff[k.name] = replication::topic_config_value(t->configs, defaults, k.name);
  v["configs"] = std::move(eff);
  return v;
}

void topic_list(Broker& b, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  b.on_controller([reply](replication::Controller& c) {
    json::Value list = json::Value::array();
    for (const auto& [name, t] : c.image()->topics()) {
      json::Value v;
      v["name"] = name;
      v["id"] = replication::uuid_to_string(t->id);
      v["partitions"] = t->partitions.size();
      v["replication_factor"] = t->partitions.empty() ? 0 : t->partitions[0].replicas.size();
      v["config_overrides"] = t->configs.size();
      v["internal"] = replication::is_internal_topic(name);
      list.push(std::move(v));
    }
    json::Value out;
    out["topics"] = std::move(list);
    reply.ok(std::move(out));
  });
}

// topic.describe {topic} and partition.describe {topic, partition?}.
void describe(Broker& b, AdminServer& admin, const json::Value& args, Reply reply,
              bool partitions_only) {
  if (!serving(b, reply, true)) return;
  Args a(args, reply);
  auto topic = a.string("topic", true);
  auto partition = a.integer("partition", false, 0, INT32_MAX);
  if (a.failed()) return;
  const std::int32_t only = partition ? static_cast<std::int32_t>(*partition) : -1;
  auto defaults = b.settings()->topic_defaults;
  b.on_controller([&b, &admin, reply, name = *topic, only, partitions_only,
                   defaults](replication::Controller& c) {
    auto meta = topic_meta(*c.image(), name, defaults);
    if (!meta) return reply.error(admin_error::not_found, "no topic " + name);
    if (only >= 0 && static_cast<std::size_t>(only) >= (*meta)["partitions"].size())
      return reply.error(admin_error::not_found,
                         "topic " + name + " has no partition " + std::to_string(only));
    admin.post([&b, &admin, reply, name, only, partitions_only, meta = std::move(*meta)]() mutable {
      sample_partitions(
          b, admin, name, only,
          [reply, only, partitions_only, meta = std::move(meta)](
              std::map<std::int32_t, PartitionSample> logs,
              std::map<std::int32_t, std::string> failed, bool complete) mutable {
            json::Value parts = json::Value::array();
            for (auto& pv : meta["partitions"].items()) {
              const auto p = static_cast<std::int32_t>(pv.find("partition")->as_int());
              if (only >= 0 && p != only) continue;
              auto it = logs.find(p);
              if (it != logs.end()) {
                const json::Value log = partition_json(it->second);
                for (auto& [k, v] : log.members())
                  if (k != "partition" && k != "leader_epoch") pv[k] = v;
              } else if (auto f = failed.find(p); f != failed.end()) {
                pv["error"] = "storage error: " + f->second;
              } else {
                pv["error"] = complete ? "log not open on this node" : "its reactor did not answer";
              }
              parts.push(std::move(pv));
            }
            json::Value out;
            out["topic"] = meta["name"];
            out["id"] = meta["id"];
            out["partitions"] = std::move(parts);
            if (!partitions_only) {
              out["internal"] = meta["internal"];
              out["config_overrides"] = meta["config_overrides"];
              out["configs"] = meta["configs"];
            }
            reply.ok(std::move(out));
          });
    });
  });
}

void topic_create(Broker& b, const json::Value& args, Reply reply) {
  if (!serving(b, reply, true)) return;
  Args a(args, reply);
  auto topic = a.string("topic", true);
  auto partitions = a.integer("partitions", false, 1, 1'000'000);
  auto rf = a.integer("replication_factor", false, 1, 32767);
  const json::Value* configs = a.object("configs", false);
  if (a.failed()) return;
  replication::TopicSpec spec;
  spec.name = *topic;
  spec.partitions = partitions ? static_cast<std::int32_t>(*partitions) : -1;
  spec.replication_factor = rf ? static_cast<std::int16_t>(*rf) : -1;
  if (configs) {
    for (const auto& [k, v] : configs->members()) {
      if (!v.is_string())
        return reply.error(admin_error::invalid_argument,
                           "config " + k + " must be a string value");
      spec.configs[k] = v.as_string();
    }
  }
  LOG_INFO("admin: create topic %s (uid %u)", topic->c_str(),
           static_cast<unsigned>(reply.peer_uid()));
  b.on_controller([reply, spec = std::move(spec)](replication::Controller& c) mutable {
    c.create_topics({std::move(spec)}, false, [reply](std::vector<replication::TopicOutcome> out) {
      const auto& o = out.front();
      if (o.error != kafka::ErrorCode::none)
        return reply.error(lower_error(o.error),
                           o.message.empty() ? std::string(kafka::error_name(o.error)) : o.message);
      json::Value v;
      v["topic"] = o.name;
      v["id"] = replication::uuid_to_string(o.id);
      v["partitions"] = o.partitions;
      v["replication_factor"] = o.replication_factor;
      reply.ok(std::move(v));
    });
  });
}

void topic_delete(Broker& b, const json::Value& args, Reply reply) {
  if (!serving(b, reply, true)) return;
  Args a(args, reply);
  auto topic = a.string("topic", true);
  if (a.failed()) return;
  if (replication::is_internal_topic(*topic))
    return reply.error(admin_error::invalid_argument,
                       *topic + " is internal; it cannot be deleted");
  LOG_INFO("admin: delete topic %s (uid %u)", topic->c_str(),
           static_cast<unsigned>(reply.peer_uid()));
  b.on_controller([reply, name = *topic](replication::Controller& c) {
    c.delete_topics(
        {{name, replication::Uuid{}}}, [reply](std::vector<replication::DeleteOutcome> out) {
          const auto& o = out.front();
          if (o.error != kafka::ErrorCode::none)
            return reply.error(lower_error(o.error), o.message.empty()
                                                         ? std::string(kafka::error_name(o.error))
                                                         : o.message);
          json::Value v;
          v["topic"] = o.name;
          v["id"] = replication::uuid_to_string(o.id);
          v["deleted"] = true;
          reply.ok(std::move(v));
        });
  });
}

void group_list(Broker& b, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  b.on_coordinator([reply](coordinator::GroupCoordinator& g) {
    g.list_groups({}, [&g, reply](coordinator::ListResult r) {
      if (r.error != kafka::ErrorCode::none)
        return reply.error(lower_error(r.error), std::string(kafka::error_name(r.error)));
      std::sort(r.groups.begin(), r.groups.end(),
                [](const auto& x, const auto& y) { return x.group_id < y.group_id; });
      json::Value list = json::Value::array();
      for (const auto& lg : r.groups) {
        json::Value v;
        v["group"] = lg.group_id;
        v["state"] = lg.state;
        v["protocol_type"] = lg.protocol_type;
        v["type"] = lg.type;
        auto snap = g.snapshot(lg.group_id);
        v["members"] = snap ? snap->members.size() : 0;
        v["generation"] = snap ? snap->generation : 0;
        list.push(std::move(v));
      }
      json::Value out;
      out["groups"] = std::move(list);
      reply.ok(std::move(out));
    });
  });
}

// ConsumerProtocolAssignment (any version): the topics and partitions given to a member.
std::optional<json::Value> decode_assignment(const coordinator::Bytes& b) {
  std::span<const std::byte> s(b.data(), b.size());
  std::size_t at = 0;
  auto need = [&](std::size_t n) { return at + n <= s.size(); };
  if (!need(2 + 4)) return std::nullopt;
  at += 2;  // version
  const std::int32_t topics = load_be<std::int32_t>(s.data() + at);
  at += 4;
  if (topics < 0 || topics > 100000) return std::nullopt;
  json::Value out = json::Value::array();
  for (std::int32_t t = 0; t < topics; ++t) {
    if (!need(2)) return std::nullopt;
    const std::int16_t len = load_be<std::int16_t>(s.data() + at);
    at += 2;
    if (len < 0 || !need(static_cast<std::size_t>(len) + 4)) return std::nullopt;
    std::string name(reinterpret_cast<const char*>(s.data() + at), static_cast<std::size_t>(len));
    at += static_cast<std::size_t>(len);
    const std::int32_t n = load_be<std::int32_t>(s.data() + at);
    at += 4;
    if (n < 0 || !need(static_cast<std::size_t>(n) * 4)) return std::nullopt;
    json::Value parts = json::Value::array();
    for (std::int32_t i = 0; i < n; ++i) {
      parts.push(load_be<std::int32_t>(s.data() + at));
      at += 4;
    }
    json::Value tv;
    tv["topic"] = std::move(name);
    tv["partitions"] = std::move(parts);
    out.push(std::move(tv));
  }
  return out;
}

struct GroupAcc {
  json::Value out;
  std::vector<coordinator::FetchedOffset> offsets;
};

json::Value members_json(const coordinator::DescribedGroup& d) {
  json::Value members = json::Value::array();
  for (const auto& m : d.members) {
    json::Value mv;
    mv["member_id"] = m.member_id;
    if (m.group_instance_id) mv["instance_id"] = *m.group_instance_id;
    mv["client_id"] = m.client_id;
    mv["client_host"] = m.client_host;
    if (auto as = decode_assignment(m.assignment)) {
      mv["assignment"] = std::move(*as);
    } else {
      mv["assignment"] = json::Value::array();
    }
    members.push(std::move(mv));
  }
  return members;
}

// The committed offsets with their partitions' high watermarks (got: what each shard found)
// and lags, then the answer.
void answer_offsets(
    Reply reply, const std::shared_ptr<GroupAcc>& acc,
    std::vector<
        std::optional<std::vector<std::pair<std::pair<std::string, std::int32_t>, std::int64_t>>>>&
        got) {
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> hw;
  for (auto& g : got)
    if (g)
      for (auto& [k, v] : *g)
        hw[k] = v;
  json::Value offsets = json::Value::array();
  std::int64_t total = 0;
  std::sort(acc->offsets.begin(), acc->offsets.end(), [](const auto& x, const auto& y) {
    return std::tie(x.topic, x.partition) < std::tie(y.topic, y.partition);
  });
  for (const auto& o : acc->offsets) {
    json::Value ov;
    ov["topic"] = o.topic;
    ov["partition"] = o.partition;
    ov["committed"] = static_cast<long long>(o.offset);
    auto it = hw.find({o.topic, o.partition});
    if (it != hw.end()) {
      const std::int64_t lag = lag_of(it->second, o.offset);
      ov["high_watermark"] = static_cast<long long>(it->second);
      ov["lag"] = static_cast<long long>(lag);
      total += lag;
    } else {
      ov["high_watermark"] = nullptr;
      ov["lag"] = nullptr;
    }
    if (!o.metadata.empty()) ov["metadata"] = o.metadata;
    offsets.push(std::move(ov));
  }
  acc->out["offsets"] = std::move(offsets);
  acc->out["total_lag"] = static_cast<long long>(total);
  reply.ok(std::move(acc->out));
}

void group_describe(Broker& b, AdminServer& admin, const json::Value& args, Reply reply) {
  if (!serving(b, reply, true)) return;
  Args a(args, reply);
  auto group = a.string("group", true);
  if (a.failed()) return;
  b.on_coordinator([&b, &admin, reply, id = *group](coordinator::GroupCoordinator& g) {
    g.describe_groups(
        {id}, [&b, &admin, &g, reply, id](std::vector<coordinator::DescribedGroup> ds) {
          const auto& d = ds.front();
          if (d.error == kafka::ErrorCode::group_id_not_found || d.state == "Dead")
            return reply.error(admin_error::not_found, "no group " + id);
          if (d.error != kafka::ErrorCode::none)
            return reply.error(lower_error(d.error), std::string(kafka::error_name(d.error)));
          auto acc = std::make_shared<GroupAcc>();
          json::Value& out = acc->out;
          out["group"] = d.group_id;
          out["state"] = d.state;
          out["protocol_type"] = d.protocol_type;
          out["protocol"] = d.protocol;
          if (auto snap = g.snapshot(id)) {
            out["generation"] = snap->generation;
            if (snap->leader) out["leader"] = *snap->leader;
          }
          json::Value members = members_json(d);
          out["members"] = std::move(members);
          coordinator::FetchRequest fr;
          fr.group_id = id;
          g.fetch_offsets(std::move(fr), [&b, &admin, reply, acc](coordinator::FetchResult res) {
            for (auto& o : res.offsets)
              if (o.error == kafka::ErrorCode::none) acc->offsets.push_back(std::move(o));
            // High watermarks of the committed partitions, from their shards.
            admin.post([&b, &admin, reply, acc] {
              gather<std::vector<std::pair<std::pair<std::string, std::int32_t>, std::int64_t>>>(
                  admin, b.reactor_count(), kGatherTimeoutMs,
                  [&b, acc](std::size_t i, auto deliver) {
                    std::vector<std::pair<std::string, std::int32_t>> mine;
                    for (const auto& o : acc->offsets)
                      if (b.owner(o.topic, o.partition) == i)
                        mine.emplace_back(o.topic, o.partition);
                    b.on_reactor(i, [mine, deliver](ReactorContext& ctx) {
                      std::vector<std::pair<std::pair<std::string, std::int32_t>, std::int64_t>> hw;
                      for (const auto& [t, p] : mine)
                        if (auto* part = ctx.shard ? ctx.shard->find(t, p) : nullptr)
                          hw.push_back({{t, p}, part->high_watermark()});
                      deliver(std::move(hw));
                    });
                  },
                  [reply, acc](auto got) { answer_offsets(reply, acc, got); });
            });
          });
        });
  });
}

}  // namespace

void register_topic_commands(AdminServer& admin, Broker& b) {
  admin.add_command("topic.list", [&b](const json::Value& a, Reply r) { topic_list(b, a, r); });
  admin.add_command("topic.describe", [&b, &admin](const json::Value& a, Reply r) {
    describe(b, admin, a, r, false);
  });
  admin.add_command("partition.describe", [&b, &admin](const json::Value& a, Reply r) {
    describe(b, admin, a, r, true);
  });
  admin.add_command("topic.create", [&b](const json::Value& a, Reply r) { topic_create(b, a, r); });
  admin.add_command("topic.delete", [&b](const json::Value& a, Reply r) { topic_delete(b, a, r); });
  admin.add_command("group.list", [&b](const json::Value& a, Reply r) { group_list(b, a, r); });
  admin.add_command("group.describe", [&b, &admin](const json::Value& a, Reply r) {
    group_describe(b, admin, a, r);
  });
}

}  // namespace samsa::daemon
