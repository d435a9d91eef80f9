#pragma once
// The command line of every example program (llama_train, moe_train,
// llama_generate, checkpoint_study). A program declares each flag once, as
// a row of a table (Flag): its name, the value it takes, the usage section
// it is listed in, its help and where its value goes. From the rows come
// the parsing ("--flag value" or "--flag=value", in order, the last one
// winning), the usage text with each default, and the errors: a bad
// command line is a UsageError, which main() reports as
//
//   <program>: <what is wrong, naming the flag>
//   (<program> --help lists the flags)
//
// with exit status 2; any other error is "<program>: error: ..." and 1
// (run_main).

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "io/json.h"

namespace reprise::cli {

// A bad command line: the program exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Flag values. Each raises a UsageError naming `flag` and the value when it
// is not what is expected.
int64_t parse_int(const std::string& flag, const std::string& v);
int64_t parse_positive(const std::string& flag, const std::string& v);    // >= 1
int64_t parse_count(const std::string& flag, const std::string& v);       // >= 0
double parse_real(const std::string& flag, const std::string& v);         // finite
int parse_threads(const std::string& flag, const std::string& v);         // in [1, 4096]
uint64_t parse_seed(const std::string& flag, const std::string& v);       // >= 0
Device parse_device_flag(const std::string& flag, const std::string& v);  // cpu, cuda, cuda:N
// f32 or bf16 (nn::run_dtype_named): the precision of a run's projections.
DType parse_run_dtype(const std::string& flag, const std::string& v);
// A choice between two words: true for `first`, false for `second`.
bool parse_choice(const std::string& flag, const std::string& v, const char* first,
                  const char* second);
// save | recompute (--router, --chunk-states): true for save.
bool parse_save_or_recompute(const std::string& flag, const std::string& v);

// How usage and a resolved config show such values: the seed as a decimal
// string (JSON integers stop at int64), a device and a dtype by name.
json::Value show_seed(uint64_t seed);
json::Value show_device(Device device);
json::Value show_dtype(DType dtype);
json::Value show_save_or_recompute(bool save);

// What `parse` returns; an Error it raises becomes a UsageError.
template <class F>
auto usage_checked(F parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// How a flag reads its value into a program's Options, and shows it.
template <class Options>
struct Setting {
  // Parses `value`, given to `flag` ("" for a switch), into `o`; raises a
  // UsageError (or an Error) for a bad value.
  std::function<void(Options& o, const std::string& flag, const std::string& value)> set;
  // The value `o` holds, as usage() shows its default (and a trainer's
  // resolved config its value); null for a flag that holds none (--help).
  std::function<json::Value(const Options& o)> get;
};

// One flag: the one place it is declared. Section is the program's enum of
// usage sections.
template <class Options, class Section>
struct Flag {
  std::string name;   // "--lr"
  std::string value;  // what usage() shows it takes ("X", "FILE"); empty: a switch, without one
  Section section;
  std::string help;  // its usage text; usage() adds the default
  Setting<Options> setting;
  // The default as usage() words it, where the default options' value
  // does not say it ("REPRISE_NUM_THREADS or all cores").
  std::string default_note = {};

  bool takes_value() const { return !value.empty(); }
};

// A usage section: its heading and a paragraph under its flags.
template <class Section>
struct SectionText {
  Section section;
  const char* heading;
  const char* note = "";
};

// A value that `parse` (parse_int, parse_real, ...) reads into `field`,
// shown by `show`; without one, as it is (a number).
template <class Options, class T>
Setting<Options> parsed(T Options::*field,
                        T (*parse)(const std::string& flag, const std::string& value),
                        std::type_identity_t<json::Value (*)(T)> show = nullptr) {
  return {[field, parse](Options& o, const std::string& flag, const std::string& value) {
            o.*field = parse(flag, value);
          },
          [field, show](const Options& o) {
            if constexpr (std::is_constructible_v<json::Value, T>) {
              if (show == nullptr) return json::Value(o.*field);
            }
            return show(o.*field);
          }};
}

// Text (a path), kept as given.
template <class Options>
Setting<Options> text(std::string Options::*field) {
  return {[field](Options& o, const std::string&, const std::string& value) { o.*field = value; },
          [field](const Options& o) { return json::Value(o.*field); }};
}

// A switch: given, it sets `field`.
template <class Options>
Setting<Options> switch_on(bool Options::*field) {
  return {[field](Options& o, const std::string&, const std::string&) { o.*field = true; },
          [field](const Options& o) { return json::Value(o.*field); }};
}

// The flag named `name` ("--lr") in `table`, or nullptr.
template <class Options, class Section>
const Flag<Options, Section>* find_flag(const std::vector<Flag<Options, Section>>& table,
                                        std::string_view name) {
  for (const auto& f : table) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// A command line as (flag, value) pairs, in order.
using Args = std::vector<std::pair<std::string, std::string>>;

// Splits argv into flags of `table`; "--flag=value" and "--flag value" both
// work. A name `table` lacks, a missing value or a value given to a switch
// is a UsageError.
template <class Options, class Section>
Args split_args(const std::vector<Flag<Options, Section>>& table, int argc, char** argv) {
  Args out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool inline_value = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    const Flag<Options, Section>* flag = find_flag(table, arg);
    if (flag == nullptr) throw UsageError("unknown flag '" + arg + "'");
    if (flag->takes_value() && !inline_value) {
      if (i + 1 >= argc) throw UsageError(arg + ": missing value");
      value = argv[++i];
    } else if (!flag->takes_value() && inline_value) {
      throw UsageError(arg + " takes no value");
    }
    out.emplace_back(arg, value);
  }
  return out;
}

// A UsageError that names `flag`, from what setting it raised.
UsageError flag_error(const std::string& flag, const std::string& what);

// Applies `args` to `o`, in order; each error becomes a UsageError naming
// its flag.
template <class Options, class Section>
void apply_flags(const std::vector<Flag<Options, Section>>& table, const Args& args, Options& o) {
  for (const auto& [flag, value] : args) {
    try {
      find_flag(table, flag)->setting.set(o, flag, value);
    } catch (const UsageError& e) {
      throw flag_error(flag, e.what());
    } catch (const Error& e) {
      throw flag_error(flag, e.what());
    }
  }
}

// Options with `argv`'s flags applied to `defaults`.
template <class Options, class Section>
Options parse(const std::vector<Flag<Options, Section>>& table, int argc, char** argv,
              Options defaults = {}) {
  apply_flags(table, split_args(table, argc, argv), defaults);
  return defaults;
}

// A flag's usage line(s): "  --lr X   peak learning rate (0.003)", the
// help wrapped to the width, the default shown from `shown` (a note, or
// the value the default options hold; nothing for "", false or null).
std::string usage_line(const std::string& name, const std::string& value, const std::string& help,
                       const std::string& note, const json::Value& shown);

// The usage text: `head` (the usage line and a paragraph), then each
// section's heading, its flags in table order, and its note.
template <class Options, class Section>
std::string usage(const std::string& head, const std::vector<Flag<Options, Section>>& table,
                  const std::vector<SectionText<Section>>& sections, const Options& defaults) {
  std::string out = head;
  for (const SectionText<Section>& s : sections) {
    out += std::string(s.heading) + "\n";
    for (const auto& f : table) {
      if (f.section != s.section) continue;
      const json::Value shown = f.setting.get ? f.setting.get(defaults) : json::Value();
      out += usage_line(f.name, f.value, f.help, f.default_note, shown);
    }
    out += s.note;
  }
  return out;
}

// Prints a usage error as every program does and returns its status, 2.
int usage_failure(const std::string& program, const UsageError& e);

// main()'s body for `program`: runs `body`, returning its status, 2 after a
// UsageError and 1 after any other error, each printed.
int run_main(const std::string& program, const std::function<int()>& body);

}  // namespace reprise::cli
