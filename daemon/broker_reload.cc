// Settings that change while the Broker runs: the file re-read (SIGHUP, samsactl reload) and
// dynamic broker configs from the metadata log, both handed to every thread the same way.
#include "base/log.h"
#include "daemon/broker.h"
#include "daemon/broker_internal.h"

namespace samsa::daemon {

std::expected<std::vector<Broker::ConfigChanged>, std::string> Broker::reload() {
  std::lock_guard lk(config_mu_);
  std::vector<std::string> warnings;
  Config next_config = config_;
  auto changed = next_config.reload_file(&warnings);
  for (const auto& w : warnings)
    LOG_WARN("%s", w.c_str());
  if (!changed) return std::unexpected(changed.error());
  auto settings = make_settings(next_config, cluster_id_);
  if (!settings) return std::unexpected(settings.error());
  config_ = std::move(next_config);
  std::vector<ConfigChanged> out;
  for (const auto& key : *changed) {
    const ConfigKey* k = Config::find_key(key);
    ConfigChanged c{key, config_.get_string(key), !k || k->dynamic};
    if (!c.applied)
      LOG_WARN("config %s changed in the file; it takes effect at the next restart", key.c_str());
    else
      LOG_INFO("config %s is now %s", key.c_str(),
               Config::sensitive(key) ? "[hidden]" : c.value.c_str());
    out.push_back(std::move(c));
  }
  apply_settings(*settings);
  return out;
}

void Broker::apply_dynamic_configs(const replication::MetadataImage& image) {
  std::lock_guard lk(config_mu_);
  const auto& defaults = image.broker_configs("");
  const auto& own = image.broker_configs(std::to_string(settings_->node_id));
  if (defaults == applied_dynamic_default_ && own == applied_dynamic_broker_) return;
  Config next = config_;
  auto feed = [&](Config::Layer layer, const replication::MetadataImage::ConfigMap& want) {
    std::vector<std::string> gone;
    for (const auto& [k, v] : next.layer_values(layer))
      if (!want.contains(k)) gone.push_back(k);
    for (const auto& k : gone)
      (void)next.set_dynamic(k, std::nullopt, layer);
    for (const auto& [k, v] : want) {
      // Records are validated before they are written; one that no longer validates (a key
      // an older samsa knew) is skipped, never fatal.
      if (auto r = next.set_dynamic(k, v, layer); !r)
        LOG_WARN("dynamic config %s=%s ignored: %s", k.c_str(), v.c_str(), r.error().c_str());
    }
  };
  feed(Config::Layer::dynamic_default, defaults);
  feed(Config::Layer::dynamic, own);
  auto settings = make_settings(next, cluster_id_);
  if (!settings) {
    LOG_ERROR("dynamic configs not applied: %s", settings.error().c_str());
    return;
  }
  for (const auto& [key, before] : config_.effective()) {
    std::string after = next.get_string(key);
    if (after != config_.get_string(key))
      LOG_INFO("config %s is now %s (dynamic)", key.c_str(),
               Config::sensitive(key) ? "[hidden]" : after.c_str());
  }
  config_ = std::move(next);
  applied_dynamic_default_ = defaults;
  applied_dynamic_broker_ = own;
  apply_settings(*settings);
}

void Broker::apply_settings(std::shared_ptr<const BrokerSettings> made) {
  if (auto lvl = log::parse_level(config_.get_string("samsa.log.level"))) log::set_level(*lvl);
  // Listener-level settings stay as started; topic defaults and request-path settings apply now.
  auto next = std::make_shared<BrokerSettings>(*made);
  if (settings_) {
    next->listeners = settings_->listeners;
    next->advertised = settings_->advertised;
  }
  settings_ = next;
  // Atomics every reactor reads on its next fetch: in force before the change is answered.
  replication_quotas_.leader.set_limit(next->cluster.leader_throttled_rate);
  replication_quotas_.follower.set_limit(next->cluster.follower_throttled_rate);
  if (cleaner_) {
    cleaner_->set_io_rate(
        static_cast<double>(config_.get_int("log.cleaner.io.max.bytes.per.second")));
  }
  const std::size_t n = reactors_.size();
  for (auto& t : reactors_) {
    if (!t->ctx->reactor) continue;
    t->ctx->reactor->post_fn([ctx = t->ctx, next, n] {
      ctx->settings = next;
      if (ctx->shard) {
        ctx->shard->set_defaults(next->topic_defaults);
        ctx->shard->set_partition_options(next->partition);
      }
      ctx->fetch_sessions->configure(session_slots_per_reactor(*next, n),
                                     next->fetch_session_eviction_ms);
    });
  }
  if (coordinator_reactor_) {
    on_coordinator(
        [o = coordinator_options(config_)](coordinator::GroupCoordinator& g) { g.set_options(o); });
  }
  if (controller_reactor_) {
    on_controller([next](replication::Controller& c) {
      c.set_defaults(next->topic_defaults);
      c.set_default_partitions(next->num_partitions);
      c.set_delete_topic_enable(next->delete_topic_enable);
      c.set_max_partitions(next->max_partitions, next->max_partitions_per_request);
    });
  }
}

std::optional<std::string> Broker::check_broker_config(const std::string& key,
                                                       const std::optional<std::string>& value) {
  if (auto why = Config::check_dynamic(key, value)) return why;
  if (!value) return std::nullopt;
  // Values that pass alone but not together (make_settings' derived checks) are refused too.
  std::lock_guard lk(config_mu_);
  Config trial = config_;
  if (auto r = trial.set_dynamic(key, value, Config::Layer::dynamic); !r) return r.error();
  if (auto s = make_settings(trial, cluster_id_); !s) return s.error();
  return std::nullopt;
}

std::string Broker::broker_config_value(const std::string& key) {
  std::lock_guard lk(config_mu_);
  return config_.get_string(key);
}

}  // namespace samsa::daemon
