// Build-time generator of the two documents that list every broker setting, from the one
// table that declares them (daemon/config.cc), so neither can drift from the code:
//   gen_docs properties FILE   the packaged /etc/samsa/samsa.properties, fully commented
//   gen_docs man FILE          samsa.properties(5)
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "daemon/config.h"

namespace {

using samsa::daemon::Config;
using samsa::daemon::ConfigKey;
using samsa::daemon::ConfigType;

std::string type_text(const ConfigKey& k) {
  std::string t;
  switch (k.type) {
    case ConfigType::boolean:
      return "true or false";
    case ConfigType::int32:
    case ConfigType::int64:
      t = k.type == ConfigType::int32 ? "integer" : "long";
      if (k.min != INT64_MIN || k.max != INT64_MAX) {
        t += " in [" + std::to_string(k.min) + ", ";
        t += (k.max == INT32_MAX   ? std::string("2147483647")
              : k.max == INT64_MAX ? std::string("9223372036854775807")
                                   : std::to_string(k.max));
        t += "]";
      }
      return t;
    case ConfigType::string:
      return "string";
    case ConfigType::list:
      return "comma-separated list";
    case ConfigType::enumeration:
      return "one of " + std::string(k.choices);
  }
  return "?";
}

// Wraps text at 96 columns with a prefix on every line.
std::string wrap(std::string_view text, std::string_view prefix) {
  std::string out, line(prefix);
  std::size_t i = 0;
  while (i < text.size()) {
    auto sp = text.find(' ', i);
    std::string_view word = text.substr(i, sp == std::string_view::npos ? sp : sp - i);
    if (line.size() > prefix.size() && line.size() + 1 + word.size() > 96) {
      out += line + "\n";
      line = prefix;
    }
    if (line.size() > prefix.size()) line += ' ';
    line += word;
    if (sp == std::string_view::npos) break;
    i = sp + 1;
  }
  if (line.size() > prefix.size()) out += line + "\n";
  return out;
}

std::string properties() {
  std::string o =
      "# /etc/samsa/samsa.properties: settings of samsad, the samsa log broker.\n"
      "#\n"
      "# Kafka's property names where the concept is the same; samsa's own under \"samsa.\".\n"
      "# Every setting is listed below, commented out, with its default: uncomment and change\n"
      "# what you need. Precedence: samsad --override > dynamic settings stored with\n"
      "# `samsactl config set` > this file > defaults. Settings marked dynamic change with\n"
      "# `systemctl reload samsa` (samsactl reload); the others need a restart. Unknown keys\n"
      "# are logged as warnings; an invalid value stops samsad with a message naming the key.\n"
      "# samsa.properties(5) describes each setting.\n";
  for (const ConfigKey& k : Config::keys()) {
    o += "\n";
    // "# " before the description, none before the setting: uncommenting is deleting one '#'.
    o += wrap(std::string(k.name) + ": " + type_text(k) + (k.dynamic ? "; dynamic" : ""), "# ");
    if (!k.doc.empty()) o += wrap(k.doc, "#   ");
    o += "#" + std::string(k.name) + "=" + std::string(k.default_value) + "\n";
  }
  return o;
}

std::string roff(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') {
      o += "\\e";
    } else if (c == '-') {
      o += "\\-";
    } else {
      o += c;
    }
  }
  if (!o.empty() && (o[0] == '.' || o[0] == '\'')) o.insert(0, "\\&");
  return o;
}

std::string manpage() {
  std::string o =
      ".TH SAMSA.PROPERTIES 5 \"\" \"samsa " SAMSA_VERSION
      "\" \"File Formats\"\n"
      ".SH NAME\n"
      "samsa.properties \\- settings of the samsa log broker\n"
      ".SH SYNOPSIS\n"
      ".I /etc/samsa/samsa.properties\n"
      ".SH DESCRIPTION\n"
      "The settings of\n.BR samsad (8)\n"
      "in Java properties syntax: one\n.IB key = value\n"
      "per line (or\n.IB key : value\n"
      "or\n.I key value\\/),\n"
      "with\n.B #\nor\n.B !\n"
      "starting a comment line, a backslash at the end of a line continuing it, and the escapes\n"
      ".BR \\et ,\n.BR \\en ,\n.B \\e\\e\nand\n.BR \\euXXXX .\n"
      ".PP\n"
      "Names are Apache Kafka's where the concept is the same\n"
      "(listeners, log.dirs, num.partitions, log.retention.ms, ...);\n"
      "samsa's own settings start with\n.BR samsa. .\n"
      "Topics take Kafka's topic configs (retention.ms, segment.bytes, cleanup.policy, ...),\n"
      "set with\n.B samsactl topic create \\-\\-config\nor a Kafka admin client.\n"
      ".PP\n"
      "Precedence, highest first:\n"
      ".B samsad \\-\\-override\n"
      "on the command line, dynamic settings stored in the cluster metadata log with\n"
      ".BR \"samsactl config set\" ,\n"
      "this file, the defaults below.\n"
      "Settings marked\n.I dynamic\n"
      "change on\n.B systemctl reload samsa\n(which runs\n.BR \"samsactl reload\" )\n"
      "or SIGHUP; the others take effect at the next start.\n"
      "Unknown keys are logged as warnings; an invalid value stops samsad with a message\n"
      "naming the key, and a reload with one changes nothing.\n"
      ".SH SETTINGS\n";
  for (const ConfigKey& k : Config::keys()) {
    o += ".TP\n.B " + roff(k.name) + "\n";
    o += roff(type_text(k)) + "; default ";
    o += k.default_value.empty() ? std::string("unset") : "\\fB" + roff(k.default_value) + "\\fR";
    o += k.dynamic ? "; dynamic.\n" : ".\n";
    if (!k.doc.empty()) o += roff(k.doc) + "\n";
  }
  o += ".SH FILES\n"
       ".TP\n.I /etc/samsa/samsa.properties\n"
       "This file; the packaged copy lists every setting, commented out, with its default.\n"
       ".TP\n.I /var/lib/samsa\nThe default log.dir.\n"
       ".TP\n.I /run/samsa/admin.sock\nThe default samsa.admin.socket.\n"
       ".SH SEE ALSO\n"
       ".BR samsad (8),\n.BR samsactl (8)\n";
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gen_docs properties|man FILE\n");
    return 2;
  }
  std::string what = argv[1];
  std::string text = what == "properties" ? properties() : what == "man" ? manpage() : "";
  if (text.empty()) return 2;
  std::ofstream out(argv[2], std::ios::trunc);
  out << text;
  return out ? 0 : 1;
}
