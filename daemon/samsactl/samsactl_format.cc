#include "daemon/samsactl/samsactl_format.h"

#include <cstdio>

namespace samsa::samsactl {
namespace {

// A member as text: strings as they are, numbers plainly, null and absent as "-".
std::string str(const Value& v, std::string_view key) {
  const Value* m = v.find(key);
  if (!m || m->is_null()) return "-";
  switch (m->type()) {
    case Value::Type::string:
      return m->as_string().empty() ? "-" : m->as_string();
    case Value::Type::integer:
      return std::to_string(m->as_int());
    case Value::Type::number: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", m->as_double());
      return buf;
    }
    case Value::Type::boolean:
      return m->as_bool() ? "yes" : "no";
    default:
      return m->dump();
  }
}

double num(const Value& v, std::string_view key) {
  const Value* m = v.find(key);
  return m && m->is_number() ? m->as_double() : 0;
}

const std::vector<Value>& arr(const Value& v, std::string_view key) {
  static const std::vector<Value> empty;
  const Value* m = v.find(key);
  return m && m->is_array() ? m->items() : empty;
}

std::string join_ints(const Value& v, std::string_view key) {
  std::string out;
  for (const auto& x : arr(v, key)) {
    if (!out.empty()) out += ",";
    out += std::to_string(x.as_int());
  }
  return out.empty() ? "-" : out;
}

std::string percent(double ratio) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", ratio * 100);
  return buf;
}

std::string kv(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::size_t w = 0;
  for (const auto& [k, v] : rows)
    w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : rows) {
    out += k;
    out.append(w - k.size() + 2, ' ');
    out += v;
    out += '\n';
  }
  return out;
}

}  // namespace

std::string table(const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(headers.size());
  for (std::size_t i = 0; i < headers.size(); ++i)
    w[i] = headers[i].size();
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i)
      w[i] = std::max(w[i], r[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t i = 0; i < cells.size() && i < w.size(); ++i) {
      l += cells[i];
      if (i + 1 < cells.size()) l.append(w[i] - cells[i].size() + 2, ' ');
    }
    while (!l.empty() && l.back() == ' ')
      l.pop_back();
    out += l;
    out += '\n';
  };
  line(headers);
  for (const auto& r : rows)
    line(r);
  return out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string human_duration(double s) {
  auto t = static_cast<long long>(s);
  char buf[64];
  if (t >= 86400) {
    std::snprintf(buf, sizeof buf, "%lldd %lldh %lldm", t / 86400, t % 86400 / 3600, t % 3600 / 60);
  } else if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh %lldm %llds", t / 3600, t % 3600 / 60, t % 60);
  } else if (t >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm %llds", t / 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  }
  return buf;
}

std::string format_status(const Value& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("version", str(r, "version") + " (pid " + str(r, "pid") + ")");
  rows.emplace_back("state", str(r, "state") + ", up " + human_duration(num(r, "uptime_s")) +
                                 " (since " + str(r, "started_at") + ")");
  rows.emplace_back("node", str(r, "node_id") + ", cluster " + str(r, "cluster_id"));
  std::string listeners;
  for (const auto& l : arr(r, "listeners"))
    listeners += (listeners.empty() ? "" : ", ") + l.as_string();
  rows.emplace_back("listeners", listeners.empty() ? "-" : listeners);
  rows.emplace_back("backend", str(r, "backend"));
  // The backend's own lines, if it has any (dpdk: its device and queues).
  if (const Value* b = r.find(str(r, "backend")); b && b->find("rows")) {
    for (const auto& row : arr(*b, "rows"))
      if (row.size() == 2)
        rows.emplace_back(row.items()[0].as_string(), row.items()[1].as_string());
  }
  rows.emplace_back("config", str(r, "config_file"));
  rows.emplace_back("admin socket", str(r, "admin_socket"));
  rows.emplace_back("metrics", str(r, "metrics_listen"));
  rows.emplace_back("log level", str(r, "log_level"));
  if (const Value* rec = r.find("recovery")) {
    if (const Value* p = rec->find("progress")) rows.emplace_back("recovery", p->as_string());
    for (const auto& d : arr(*rec, "log_dirs")) {
      std::string how;
      const std::string prev = str(d, "previous_shutdown");
      if (prev == "none") {
        how = "new";
      } else if (prev == "clean" && num(d, "scanned_segments") == 0) {
        how = "clean shutdown, recovery scan skipped";
      } else {
        how = prev + " shutdown, " + str(d, "scanned_segments") + " segments scanned, " +
              str(d, "truncated_partitions") + " tails truncated, " + str(*rec, "duration_ms") +
              " ms";
      }
      rows.emplace_back("log dir " + str(d, "path"), "at start: " + str(d, "partitions_opened") +
                                                         " partitions, " + str(d, "segments") +
                                                         " segments, " +
                                                         human_bytes(num(d, "bytes")) + "; " + how);
    }
  }
  if (const Value* c = r.find("controller")) {
    rows.emplace_back("controller", c->find("metadata_offset")
                                        ? "metadata offset " + str(*c, "metadata_offset") + ", " +
                                              str(*c, "topics") + " topics"
                                        : "NOT RESPONDING");
  }
  if (const Value* c = r.find("coordinator")) {
    rows.emplace_back("coordinator",
                      c->find("groups")
                          ? str(*c, "groups") + " groups" +
                                (str(*c, "loaded") == "yes" ? "" : ", loading offsets")
                          : "NOT RESPONDING");
  }
  std::string out = kv(rows);
  if (!arr(r, "reactors").empty()) {
    std::vector<std::vector<std::string>> t;
    for (const auto& x : arr(r, "reactors")) {
      if (const Value* ok = x.find("responding"); ok && !ok->as_bool()) {
        t.push_back({str(x, "id"), "NOT RESPONDING", "-", "-", "-"});
        continue;
      }
      t.push_back({str(x, "id"), percent(num(x, "utilisation")), str(x, "partitions"),
                   str(x, "connections"), str(x, "in_flight")});
    }
    out += "\n" + table({"REACTOR", "UTILISATION", "PARTITIONS", "CONNECTIONS", "IN FLIGHT"}, t);
  }
  return out;
}

std::string format_reload(const Value& r) {
  const auto& changed = arr(r, "changed");
  std::string out = "reloaded " + str(r, "file") + ": ";
  if (changed.empty()) return out + "no setting changed\n";
  out += std::to_string(changed.size()) + (changed.size() == 1 ? " setting" : " settings") +
         " changed\n";
  std::vector<std::vector<std::string>> t;
  for (const auto& c : changed)
    t.push_back(
        {str(c, "key"), str(c, "value"),
         c.find("applied") && c.find("applied")->as_bool() ? "applied" : "at next restart"});
  return out + table({"KEY", "VALUE", "STATUS"}, t);
}

std::string format_drain(const Value& r) {
  return "drained in " + str(r, "elapsed_ms") + " ms: " + str(r, "connections_closed") +
         " connections closed, " + str(r, "requests_in_flight") + " requests were in flight, " +
         str(r, "requests_unanswered") + " left unanswered; logs flushed\n";
}

std::string format_flush(const Value& r) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "flushed %s log dir(s) in %.1f ms\n", str(r, "log_dirs").c_str(),
                num(r, "elapsed_ms"));
  return buf;
}

std::string format_config_get(const Value& r, bool one_key) {
  const auto& list = arr(r, "configs");
  if (one_key && list.size() == 1) {
    const Value& c = list[0];
    std::string v = str(c, "value");
    return kv({{"key", str(c, "key")},
               {"value", v},
               {"source", str(c, "source")},
               {"default", str(c, "default")},
               {"dynamic", str(c, "dynamic")},
               {"about", str(c, "doc")}});
  }
  std::vector<std::vector<std::string>> t;
  for (const auto& c : list)
    t.push_back({str(c, "key"), str(c, "value"), str(c, "source"), str(c, "dynamic")});
  return table({"KEY", "VALUE", "SOURCE", "DYNAMIC"}, t);
}

std::string format_config_set(const Value& r) {
  std::string out =
      str(r, "key") + " = " + str(r, "value") + " (source: " + str(r, "source") + ")\n";
  if (const Value* n = r.find("note")) out += "note: " + n->as_string() + "\n";
  return out;
}

std::string format_log_level(const Value& r) {
  if (str(r, "previous") == str(r, "level")) return "log level: " + str(r, "level") + "\n";
  return "log level: " + str(r, "previous") + " -> " + str(r, "level") + "\n";
}

std::string format_topic_list(const Value& r) {
  std::vector<std::vector<std::string>> t;
  for (const auto& x : arr(r, "topics"))
    t.push_back({str(x, "name"), str(x, "partitions"), str(x, "replication_factor"),
                 str(x, "config_overrides"), str(x, "id")});
  return table({"TOPIC", "PARTITIONS", "RF", "OVERRIDES", "ID"}, t);
}

namespace {

std::string partitions_table(const Value& r, bool with_producers) {
  std::vector<std::vector<std::string>> t;
  for (const auto& p : arr(r, "partitions")) {
    if (p.find("error")) {
      t.push_back(
          {str(p, "partition"), str(p, "leader"), "-", "-", "-", "-", "-", "-", str(p, "error")});
      continue;
    }
    std::vector<std::string> row = {str(p, "partition"),        str(p, "leader"),
                                    str(p, "leader_epoch"),     str(p, "high_watermark"),
                                    str(p, "log_start_offset"), str(p, "log_end_offset"),
                                    str(p, "segments"),         human_bytes(num(p, "size_bytes")),
                                    join_ints(p, "isr")};
    if (with_producers) row.push_back(str(p, "producers"));
    t.push_back(std::move(row));
  }
  std::vector<std::string> h = {"PARTITION",      "LEADER",    "EPOCH",
                                "HIGH WATERMARK", "LOG START", "LOG END",
                                "SEGMENTS",       "SIZE",      "ISR"};
  if (with_producers) h.push_back("PRODUCERS");
  return table(h, t);
}

}  // namespace

std::string format_topic_describe(const Value& r) {
  std::string out = "topic " + str(r, "topic") + " (id " + str(r, "id") + ")" +
                    (str(r, "internal") == "yes" ? ", internal" : "") + "\n\n";
  out += partitions_table(r, false);
  if (const Value* o = r.find("config_overrides"); o && o->size()) {
    std::vector<std::vector<std::string>> t;
    for (const auto& [k, v] : o->members())
      t.push_back({k, v.as_string()});
    out += "\n" + table({"OVERRIDE", "VALUE"}, t);
  }
  return out;
}

std::string format_topic_create(const Value& r) {
  return "created topic " + str(r, "topic") + " (id " + str(r, "id") + ", " + str(r, "partitions") +
         " partitions, replication factor " + str(r, "replication_factor") + ")\n";
}

std::string format_topic_delete(const Value& r) {
  return "deleted topic " + str(r, "topic") + " (id " + str(r, "id") + ")\n";
}

namespace {

// This node's replica of each partition (cluster nodes): what its HW or ISR waits for.
std::string replicas_table(const Value& r) {
  std::vector<std::vector<std::string>> t;
  for (const auto& p : arr(r, "partitions")) {
    const Value* rep = p.find("replica");
    if (!rep) continue;
    std::string followers;
    for (const auto& f : arr(*rep, "followers")) {
      if (!followers.empty()) followers += ", ";
      followers += str(f, "id") + "@" + str(f, "fetch_offset");
      if (num(f, "last_fetch_ms_ago") >= 0)
        followers += " (" + str(f, "last_fetch_ms_ago") + " ms ago)";
    }
    const auto in_flight = num(*rep, "fetch_in_flight_ms");
    t.push_back({str(p, "partition"), str(*rep, "role"), str(*rep, "durable_end_offset"),
                 join_ints(*rep, "maximal_isr"), followers.empty() ? "-" : followers,
                 in_flight >= 0 ? str(*rep, "fetch_in_flight_ms") + " ms" : "-"});
  }
  if (t.empty()) return "";
  return "\nthis node's replicas\n" + table({"PARTITION", "ROLE", "DURABLE END", "MAXIMAL ISR",
                                             "FOLLOWERS (FETCH OFFSET)", "FETCH IN FLIGHT"},
                                            t);
}

}  // namespace

// The cleaner's line per compacted partition.
std::string compaction_lines(const Value& r) {
  std::string out;
  for (const auto& p : arr(r, "partitions")) {
    const Value* c = p.find("compaction");
    if (!c) continue;
    const std::string ago = str(*c, "last_cleaning_ms_ago");
    out += "partition " + str(p, "partition") + " compaction: dirty ratio " +
           str(*c, "dirty_ratio") + ", first dirty offset " + str(*c, "first_dirty_offset") +
           ", last cleaning " + (ago == "-1" ? std::string("none since start") : ago + " ms ago") +
           ", " + str(*c, "passes") + " passes\n";
  }
  return out.empty() ? out : "\n" + out;
}

// The transactions line of each partition with open ones or an LSO behind the HW.
std::string transaction_lines(const Value& r) {
  std::string out;
  for (const auto& p : arr(r, "partitions")) {
    const Value* lso = p.find("last_stable_offset");
    if (!lso) continue;
    const std::string open = str(p, "open_transactions");
    const std::string l = str(p, "last_stable_offset"), hw = str(p, "high_watermark");
    if (open == "0" && l == hw) continue;
    long long lag = 0;
    try {
      lag = std::stoll(hw) - std::stoll(l);
    } catch (...) {
    }
    out += "partition " + str(p, "partition") + " transactions: " + open +
           " open, last stable offset " + l + " (" + std::to_string(lag) +
           " behind the high watermark), " + str(p, "aborted_transactions_indexed") +
           " aborted indexed\n";
  }
  return out.empty() ? out : "\n" + out;
}

std::string format_partition_describe(const Value& r) {
  return "topic " + str(r, "topic") + "\n\n" + partitions_table(r, true) + replicas_table(r) +
         compaction_lines(r) + transaction_lines(r);
}

std::string format_group_list(const Value& r) {
  std::vector<std::vector<std::string>> t;
  for (const auto& g : arr(r, "groups"))
    t.push_back({str(g, "group"), str(g, "state"), str(g, "members"), str(g, "generation"),
                 str(g, "protocol_type"), str(g, "type")});
  return table({"GROUP", "STATE", "MEMBERS", "GENERATION", "PROTOCOL TYPE", "TYPE"}, t);
}

std::string format_group_describe(const Value& r) {
  std::string out = "group " + str(r, "group") + ": " + str(r, "state") + ", generation " +
                    str(r, "generation") + ", protocol " + str(r, "protocol_type") + "/" +
                    str(r, "protocol") + ", total lag " + str(r, "total_lag") + "\n";
  std::vector<std::vector<std::string>> members;
  for (const auto& m : arr(r, "members")) {
    std::string assigned;
    for (const auto& t : arr(m, "assignment"))
      assigned +=
          (assigned.empty() ? "" : " ") + str(t, "topic") + ":" + join_ints(t, "partitions");
    members.push_back({str(m, "member_id"), str(m, "client_id"), str(m, "client_host"),
                       assigned.empty() ? "-" : assigned});
  }
  out += "\n" + table({"MEMBER", "CLIENT", "HOST", "ASSIGNMENT"}, members);
  std::vector<std::vector<std::string>> offsets;
  for (const auto& o : arr(r, "offsets"))
    offsets.push_back({str(o, "topic"), str(o, "partition"), str(o, "committed"),
                       str(o, "high_watermark"), str(o, "lag")});
  out += "\n" + table({"TOPIC", "PARTITION", "COMMITTED", "HIGH WATERMARK", "LAG"}, offsets);
  return out;
}

namespace {

// "100@127.0.0.1:9093" for a voter whose endpoint the answer names, else its id.
std::string voter_name(const Value& quorum, const Value& voter) {
  std::string out = str(voter, "id");
  for (const auto& n : arr(quorum, "nodes"))
    if (str(n, "id") == out && !arr(n, "listeners").empty()) {
      const Value& l = arr(n, "listeners").front();
      return out + "@" + str(l, "host") + ":" + str(l, "port");
    }
  return out;
}

std::string ago(const Value& v, std::string_view key) {
  const std::string ms = str(v, key);
  return ms == "-" ? "-" : ms + " ms ago";
}

std::string node_line(const Value& n) {
  if (n.find("error")) return str(n, "error");
  std::string out = str(n, "id") + " (" + (str(n, "voter") == "yes" ? "voter" : "observer") + ", ";
  if (str(n, "role") == "leader") {
    out += "leading";
  } else {
    out += str(n, "role");
    if (str(n, "leader_id") != "-1") out += ", following " + str(n, "leader_id");
  }
  out += " in epoch " + str(n, "leader_epoch") + "): metadata log " + str(n, "log_start_offset") +
         ".." + str(n, "log_end_offset") + ", high watermark " + str(n, "high_watermark") +
         ", applied to " + str(n, "applied_offset");
  return out;
}

}  // namespace

// The --status facts as lines, then the --replication table, then this node's own view.
std::string format_quorum(const Value& r) {
  static const Value empty = Value::object();
  const Value* qp = r.find("quorum");
  const Value& q = qp ? *qp : empty;
  // A controller that does not lead knows the leader and the voters, not their progress.
  const bool progress = q.find("leader_id") && !q.find("error");
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("cluster", str(r, "cluster_id"));
  if (q.find("leader_id")) {
    rows.emplace_back("leader", str(q, "leader_id"));
    rows.emplace_back("leader epoch", str(q, "leader_epoch"));
    rows.emplace_back("high watermark", str(q, "high_watermark"));
    if (progress)
      rows.emplace_back("max follower lag", str(q, "max_follower_lag") + " records, " +
                                                str(q, "max_follower_lag_time_ms") + " ms");
    std::string voters, observers;
    for (const auto& v : arr(q, "voters"))
      voters += (voters.empty() ? "" : ", ") + voter_name(q, v);
    for (const auto& o : arr(q, "observers"))
      observers += (observers.empty() ? "" : ", ") + str(o, "id");
    rows.emplace_back("voters", voters.empty() ? "-" : voters);
    if (progress) rows.emplace_back("observers", observers.empty() ? "-" : observers);
  }
  rows.emplace_back("answered by", str(r, "quorum_source"));
  if (q.find("error")) rows.emplace_back("error", str(q, "error"));
  if (q.find("leader_id") && !progress)
    rows.emplace_back("replication", "known to the leader only: samsactl quorum on node " +
                                         str(q, "leader_id") + " or on a broker shows it");
  std::string out = kv(rows);
  std::vector<std::vector<std::string>> t;
  for (const char* part : {"voters", "observers"})
    for (const auto& x : arr(q, part))
      t.push_back({str(x, "id"), str(x, "log_end_offset"), str(x, "lag"),
                   ago(x, "last_fetch_ms_ago"), ago(x, "last_caught_up_ms_ago"), str(x, "status")});
  if (progress && !t.empty())
    out += "\n" + table({"NODE", "LOG END", "LAG", "LAST FETCH", "LAST CAUGHT UP", "STATUS"}, t);
  if (const Value* n = r.find("node")) out += "\n" + kv({{"this node", node_line(*n)}});
  return out;
}

std::string format_generic(const Value& r) {
  if (r.is_string()) return r.as_string();
  if (r.is_object()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& [k, v] : r.members())
      rows.emplace_back(k, v.is_string() ? v.as_string() : v.dump());
    return kv(rows);
  }
  return r.dump() + "\n";
}

}  // namespace samsa::samsactl
