#pragma once
// The trainers' --config FILE.toml: a TOML file whose top-level keys are
// the long flags without their dashes, each with the value the flag would
// take:
//
//   steps = 250
//   lr = 3e-3
//   hidden = 128
//   checkpoint-policy = "op-sac"
//   rank-stats = true          # a flag without a value: true sets it
//
// Tables and arrays are not used. The command line's flags override the
// file's.

#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/train_cli.h"

namespace reprise::train_cli {

// One setting of a config file: the flag it sets, its value as the command
// line would spell it, and where the file says it.
struct ConfigEntry {
  std::string flag;   // "--lr"
  std::string value;  // "0.003"; "" for a flag without a value
  std::string where;  // "run.toml:3: lr"
};

// The settings of the TOML file at `path`, in the file's order. Raises a
// UsageError naming the file, line and key for TOML that does not parse,
// a key that is not one of `table`'s flags (or is a flag of the command
// line alone, Section::command_line: --config, --help), and a value of the
// wrong kind (a table, an array, a date, or a boolean for a flag that
// takes a value). The values themselves are checked by the flags' own
// parsers.
std::vector<ConfigEntry> read_config_file(const std::string& path, const FlagTable& table);

}  // namespace reprise::train_cli
