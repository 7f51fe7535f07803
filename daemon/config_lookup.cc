// Config's table of keys: the broker's (config_keys.cc), the cluster's (config_keys_cluster.cc),
// the security ones (config_keys_security.cc) and the replication throttles'
// (config_keys_replication.cc) as one
// list, and the lookup of a key, listener-prefixed ones too.
#include <string_view>
#include <vector>

#include "daemon/config.h"

namespace samsa::daemon {

const std::vector<ConfigKey>& broker_config_keys();       // config_keys.cc
const std::vector<ConfigKey>& security_config_keys();     // config_keys_security.cc
const std::vector<ConfigKey>& replication_config_keys();  // config_keys_replication.cc
const std::vector<ConfigKey>& cluster_config_keys();      // config_keys_cluster.cc

const std::vector<ConfigKey>& Config::keys() {
  static const std::vector<ConfigKey> all = [] {
    std::vector<ConfigKey> v = broker_config_keys();
    const auto& cluster = cluster_config_keys();
    v.insert(v.end(), cluster.begin(), cluster.end());
    const auto& sec = security_config_keys();
    v.insert(v.end(), sec.begin(), sec.end());
    const auto& repl = replication_config_keys();
    v.insert(v.end(), repl.begin(), repl.end());
    return v;
  }();
  return all;
}

// A listener's own ssl.* or sasl.* setting (listener.name.<l>.<key>, or
// listener.name.<l>.<mechanism>.sasl.jaas.config) is declared by the key it overrides.
const ConfigKey* Config::find_key(std::string_view name) {
  for (const auto& k : keys())
    if (k.name == name) return &k;
  constexpr std::string_view kPrefix = "listener.name.";
  if (!name.starts_with(kPrefix)) return nullptr;
  std::string_view rest = name.substr(kPrefix.size());
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return nullptr;
  rest = rest.substr(dot + 1);
  if (rest.ends_with("sasl.jaas.config")) rest = "sasl.jaas.config";
  if (!rest.starts_with("ssl.") && !rest.starts_with("sasl.") &&
      rest != "connections.max.reauth.ms")
    return nullptr;
  for (const auto& k : keys())
    if (k.name == rest) return &k;
  return nullptr;
}

}  // namespace samsa::daemon
