// samsactl's human output: aligned tables and short summaries of the admin socket's answers
// (samsactl --json prints the answers themselves).
#pragma once

#include <string>
#include <vector>

#include "daemon/admin/admin_json.h"

namespace samsa::samsactl {

using daemon::json::Value;

// Columns padded to their widest cell, two spaces apart; the last column is not padded.
std::string table(const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows);
std::string human_bytes(double bytes);
std::string human_duration(double seconds);

// One function per command: the answer's result as text for a person.
std::string format_status(const Value& r);
std::string format_reload(const Value& r);
std::string format_drain(const Value& r);
std::string format_flush(const Value& r);
std::string format_config_get(const Value& r, bool one_key);
std::string format_config_set(const Value& r);
std::string format_log_level(const Value& r);
std::string format_topic_list(const Value& r);
std::string format_topic_describe(const Value& r);
std::string format_topic_create(const Value& r);
std::string format_topic_delete(const Value& r);
std::string format_partition_describe(const Value& r);
std::string format_group_list(const Value& r);
std::string format_group_describe(const Value& r);
std::string format_quorum(const Value& r);
std::string format_generic(const Value& r);

}  // namespace samsa::samsactl
