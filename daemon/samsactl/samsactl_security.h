// samsactl acl {list,add,remove} and samsactl user {list,add,remove}.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/admin/admin_json.h"

namespace samsa::samsactl {

using daemon::json::Value;

// Fills req["cmd"] and the arguments ar for the command; the usage error, if any.
std::optional<std::string> security_request(const std::string& command,
                                            const std::vector<std::string>& args, Value& req,
                                            Value& ar);
std::string format_acl_list(const Value& r);
std::string format_user_list(const Value& r);

}  // namespace samsa::samsactl
