#include "examples/common/config_file.h"

#include <toml++/toml.h>

#include "io/json.h"

namespace reprise::train_cli {

using cli::UsageError;

std::vector<ConfigEntry> read_config_file(const std::string& path, const FlagTable& table) {
  toml::table file;
  try {
    file = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    // Line 0: no line to point at (the file cannot be read).
    const auto line = e.source().begin.line;
    throw UsageError("--config " + path + (line > 0 ? ":" + std::to_string(line) : "") + ": " +
                     std::string(e.description()));
  }
  std::vector<ConfigEntry> entries;
  for (const auto& [key, node] : file) {
    const std::string name(key.str());
    const std::string where = path + ":" + std::to_string(key.source().begin.line) + ": " + name;
    if (node.is_table() || node.is_array()) {
      throw UsageError("--config " + where + ": expected a number, string or boolean, got a " +
                       (node.is_table() ? "table" : "array") +
                       " (every key is a flag, at the top level)");
    }
    const std::string flag = "--" + name;
    const Flag* f = cli::find_flag(table, flag);
    if (f == nullptr || f->section == Section::command_line)
      throw UsageError("--config " + where +
                       ": unknown key (the keys are the long flags without their dashes)");
    std::string value;
    if (const auto* b = node.as_boolean()) {
      if (f->takes_value())
        throw UsageError("--config " + where + ": expected a value for " + flag +
                         ", got a boolean");
      if (!b->get()) continue;  // false: the flag is not given
    } else if (!f->takes_value()) {
      throw UsageError("--config " + where + ": " + flag + " takes no value: write true or false");
    } else if (const auto* i = node.as_integer()) {
      value = std::to_string(i->get());
    } else if (const auto* x = node.as_floating_point()) {
      value = json::dump(json::Value(x->get()));  // the shortest text that reads back the same
    } else if (const auto* s = node.as_string()) {
      value = s->get();
    } else {
      throw UsageError("--config " + where +
                       ": expected a number, string or boolean, got a date or time");
    }
    entries.push_back({.flag = flag, .value = value, .where = where});
  }
  return entries;
}

}  // namespace reprise::train_cli
