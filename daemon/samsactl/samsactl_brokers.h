// samsactl broker {list,describe,drain,unregister}.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "daemon/admin/admin_json.h"

namespace samsa::samsactl {

using daemon::json::Value;

// Fills req["cmd"] and the arguments ar for the command; the usage error, if any.
std::optional<std::string> broker_request(const std::string& command,
                                          const std::vector<std::string>& args, Value& req,
                                          Value& ar);
std::string format_broker_list(const Value& r);
std::string format_broker_describe(const Value& r);
std::string format_broker_unregister(const Value& r);

// Sends one admin request; 0 and its result, or samsactl's exit code (the error printed).
using Call = std::function<int(const Value& request, Value& result)>;
// broker drain: submits the drain (request from broker_request), then, unless --no-wait,
// prints its progress every second until the broker holds nothing or --timeout passes (exit
// code 1). Returns samsactl's exit code.
int broker_drain(const Value& request, const std::vector<std::string>& args, bool json_out,
                 const Call& call);

}  // namespace samsa::samsactl
