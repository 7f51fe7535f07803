// samsactl acl and samsactl user: their flags into the admin request's arguments, and their
// answers as text.
#include "daemon/samsactl/samsactl_security.h"

#include <charconv>
#include <cstdio>
#include <iostream>

#include "daemon/samsactl/samsactl_format.h"

namespace samsa::samsactl {
namespace {

// "--flag VALUE" or "--flag=VALUE" at args[k] (k moves past the value).
std::optional<std::string> value_of(const std::vector<std::string>& args, std::size_t& k,
                                    std::string_view flag) {
  const std::string& f = args[k];
  if (f.size() > flag.size() && f.starts_with(flag) && f[flag.size()] == '=')
    return f.substr(flag.size() + 1);
  if (f == flag && k + 1 < args.size()) return args[++k];
  return std::nullopt;
}

bool is_flag(const std::string& f, std::string_view flag) {
  return f == flag || (f.starts_with(flag) && f.size() > flag.size() && f[flag.size()] == '=');
}

std::optional<std::string> acl_args(const std::vector<std::string>& args, Value& ar) {
  for (std::size_t k = 0; k < args.size(); ++k) {
    const std::string& f = args[k];
    std::optional<std::string> v;
    if (is_flag(f, "--allow") || is_flag(f, "--deny")) {
      const bool allow = is_flag(f, "--allow");
      if (!(v = value_of(args, k, allow ? "--allow" : "--deny")))
        return f + " needs a principal (User:NAME)";
      ar["principal"] = *v;
      ar["permission"] = allow ? "allow" : "deny";
    } else if (is_flag(f, "--operation")) {
      if (!(v = value_of(args, k, "--operation"))) return "--operation needs an operation";
      ar["operation"] = *v;
    } else if (is_flag(f, "--host")) {
      if (!(v = value_of(args, k, "--host"))) return "--host needs an address";
      ar["host"] = *v;
    } else if (f == "--cluster") {
      ar["resource_type"] = "cluster";
    } else if (f == "--prefixed") {
      ar["pattern"] = "prefixed";
    } else if (is_flag(f, "--topic") || is_flag(f, "--group") || is_flag(f, "--transactional-id")) {
      const std::string flag = f.substr(0, f.find('='));
      if (!(v = value_of(args, k, flag))) return flag + " needs a name";
      ar["resource_type"] = flag == "--transactional-id" ? "transactional_id" : flag.substr(2);
      ar["name"] = *v;
    } else {
      return "unknown option " + f;
    }
  }
  if (!ar.find("principal")) return "--allow PRINCIPAL or --deny PRINCIPAL is needed";
  if (!ar.find("operation")) return "--operation is needed";
  if (!ar.find("resource_type"))
    return "a resource is needed: --topic, --group, --transactional-id or --cluster";
  return std::nullopt;
}

std::optional<std::string> user_args(bool add, const std::vector<std::string>& args, Value& ar) {
  if (args.empty() || args[0].starts_with("--")) return "a user name comes first";
  ar["user"] = args[0];
  for (std::size_t k = 1; k < args.size(); ++k) {
    const std::string& f = args[k];
    std::optional<std::string> v;
    long long n = 0;
    if (is_flag(f, "--mechanism")) {
      if (!(v = value_of(args, k, "--mechanism"))) return "--mechanism needs SCRAM-SHA-256|512";
      ar["mechanism"] = *v;
    } else if (add && is_flag(f, "--iterations")) {
      v = value_of(args, k, "--iterations");
      if (!v || std::from_chars(v->data(), v->data() + v->size(), n).ec != std::errc())
        return "--iterations needs a number";
      ar["iterations"] = n;
    } else {
      return "unknown option " + f;
    }
  }
  if (!ar.find("mechanism")) return "--mechanism SCRAM-SHA-256 or SCRAM-SHA-512 is needed";
  if (add) {
    // The password from standard input, never from the command line (ps would show it).
    std::string password;
    if (!std::getline(std::cin, password) || password.empty())
      return "the password is read from standard input: echo PASSWORD | samsactl user add ...";
    if (!password.empty() && password.back() == '\r') password.pop_back();
    ar["password"] = password;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> security_request(const std::string& command,
                                            const std::vector<std::string>& args, Value& req,
                                            Value& ar) {
  if (command == "acl list" || command == "user list") {
    if (!args.empty()) return command + " takes no arguments";
    req["cmd"] = command == "acl list" ? "acl.list" : "user.list";
    return std::nullopt;
  }
  if (command == "acl add" || command == "acl remove") {
    req["cmd"] = command == "acl add" ? "acl.add" : "acl.remove";
    return acl_args(args, ar);
  }
  if (command == "user add" || command == "user remove") {
    req["cmd"] = command == "user add" ? "user.add" : "user.remove";
    return user_args(command == "user add", args, ar);
  }
  return "not a security command: " + command;
}

std::string format_acl_list(const Value& r) {
  std::vector<std::vector<std::string>> rows;
  const Value* acls = r.find("acls");
  if (acls && acls->is_array())
    for (const auto& a : acls->items()) {
      auto s = [&](const char* k) {
        const Value* v = a.find(k);
        return v && v->is_string() ? v->as_string() : std::string("-");
      };
      rows.push_back({s("permission"), s("principal"), s("operation"), s("resource_type"),
                      s("name"), s("pattern"), s("host")});
    }
  std::string out =
      table({"PERMISSION", "PRINCIPAL", "OPERATION", "RESOURCE", "NAME", "PATTERN", "HOST"}, rows);
  const Value* on = r.find("authorizer");
  if (on && on->is_bool() && !on->as_bool())
    out += "(authorizer.class.name is not set: these ACLs are not enforced)\n";
  return out;
}

std::string format_user_list(const Value& r) {
  std::vector<std::vector<std::string>> rows;
  const Value* users = r.find("users");
  if (users && users->is_array())
    for (const auto& u : users->items()) {
      const Value* name = u.find("user");
      const Value* m = u.find("mechanism");
      const Value* it = u.find("iterations");
      rows.push_back({name && name->is_string() ? name->as_string() : "-",
                      m && m->is_string() ? m->as_string() : "-",
                      it && it->is_int() ? std::to_string(it->as_int()) : "-"});
    }
  return table({"USER", "MECHANISM", "ITERATIONS"}, rows);
}

}  // namespace samsa::samsactl
