#include "examples/common/train_cli.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "autograd/anomaly.h"
#include "autograd/checkpoint.h"
#include "autograd/tracer.h"
#include "base/error.h"
#include "engine/backend.h"
#include "engine/cpu_capability.h"
#include "engine/memory_limit.h"
#include "engine/memory_stats.h"
#include "engine/threads.h"
#include "examples/common/config_file.h"
#include "io/tokenizer.h"
#include "nn/data.h"
#include "nn/hf.h"
#include "nn/train_state.h"
#include "parallel/process_group.h"
#include "parallel/world.h"

namespace reprise::train_cli {

int64_t parse_int(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError(flag + ": expected an integer, got '" + v + "'");
  return int64_t(n);
}

int64_t parse_positive(const std::string& flag, const std::string& v) {
  const int64_t n = parse_int(flag, v);
  if (n < 1) throw UsageError(flag + ": expected a positive integer, got '" + v + "'");
  return n;
}

int64_t parse_count(const std::string& flag, const std::string& v) {
  const int64_t n = parse_int(flag, v);
  if (n < 0) throw UsageError(flag + ": expected an integer >= 0, got '" + v + "'");
  return n;
}

double parse_real(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x))
    throw UsageError(flag + ": expected a number, got '" + v + "'");
  return x;
}

const Flag* find_flag(const FlagTable& table, std::string_view name) {
  for (const Flag& f : table) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Setting text(std::string Options::*field) {
  return {[field](Options& o, const std::string&, const std::string& value) { o.*field = value; },
          [field](const Options& o) { return json::Value(o.*field); }};
}

Setting switch_on(bool Options::*field) {
  return {[field](Options& o, const std::string&, const std::string&) { o.*field = true; },
          [field](const Options& o) { return json::Value(o.*field); }};
}

namespace {

// --trace-step's step (`given`), counted from 1: by default the second,
// since the first warms up.
int64_t trace_step(int64_t given) { return given > 0 ? given : 2; }

// ---- flag values ---------------------------------------------------------------

// An Error that `parse` raises, as a UsageError.
template <class F>
auto usage_checked(F parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// The parsers of the flags whose values are not plain numbers or text,
// and how the resolved config shows them. Each raises a UsageError naming
// `flag` and the value when it is not what is expected.
// A run setting's value (nn/train_settings.h), by its type.
template <class T>
T parse_setting(const std::string& flag, const std::string& v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return parse_int(flag, v);
  } else if constexpr (std::is_same_v<T, double>) {
    return parse_real(flag, v);
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return uint64_t(parse_count(flag, v));
  } else {
    static_assert(std::is_same_v<T, DType>);
    const std::optional<DType> dtype = nn::run_dtype_named(v);
    if (!dtype) throw UsageError(flag + ": expected f32 or bf16, got '" + v + "'");
    return *dtype;
  }
}
DType parse_export_dtype(const std::string& flag, const std::string& v) {
  const std::optional<DType> dtype = v == "f16" ? DType::f16 : nn::run_dtype_named(v);
  if (!dtype) throw UsageError(flag + ": expected f32, bf16 or f16, got " + v);
  return *dtype;
}
json::Value show_dtype(DType dtype) { return dtype_name(dtype); }

int parse_noise_ulps(const std::string& flag, const std::string& v) {
  const int64_t k = parse_count(flag, v);
  if (k > std::numeric_limits<int>::max()) throw UsageError(flag + ": too large: " + v);
  return int(k);
}

Device parse_device_flag(const std::string& flag, const std::string& v) {
  return usage_checked([&] { return parse_device(v, flag); });
}
json::Value show_device(Device device) { return to_string(device); }

int parse_threads(const std::string& flag, const std::string& v) {
  const int64_t n = parse_positive(flag, v);
  if (n > 4096) throw UsageError(flag + ": at most 4096, got " + v);
  return int(n);
}
// The threads the session runs: --threads', else REPRISE_NUM_THREADS or
// all cores.
json::Value show_threads(int) { return threads::num_threads(); }

json::Value show_trace_step(int64_t given) { return trace_step(given); }

int64_t parse_shard_size(const std::string& flag, const std::string& v) {
  const int64_t bytes = usage_checked([&] { return memory_limit::parse_bytes(v, flag); });
  if (bytes <= 0) throw UsageError(flag + ": expected a positive size, got " + v);
  return bytes;
}

double parse_timeout(const std::string& flag, const std::string& v) {
  const double seconds = parse_real(flag, v);
  if (seconds <= 0) throw UsageError(flag + ": expected seconds > 0, got " + v);
  return seconds;
}

// One of a set of names, which `parse` reads into `field` and `name` shows.
template <class Root, class T>
Setting named(T Root::*field, T (*parse)(const std::string& value), const char* (*name)(T)) {
  return {[field, parse](Options& o, const std::string&, const std::string& value) {
            root_of<Root>(o).*field = parse(value);
          },
          [field, name](const Options& o) { return json::Value(name(root_of<Root>(o).*field)); }};
}

// --checkpoint-policy: CheckpointConfig::set_policy's forms.
Setting checkpoint_policy() {
  return {[](Options& o, const std::string&, const std::string& value) {
            o.config.checkpointing.set_policy(value);
          },
          [](const Options& o) { return json::Value(o.config.checkpointing.policy_string()); }};
}

// ---- the flags -----------------------------------------------------------------

// The flags of every trainer, in usage order; usage() adds each default. A
// row is {name, value, section, help, setting, default note} (train_cli.h).
// The command line itself.
FlagTable command_line_flags() {
  using S = Section;
  return {
      {"--help", "", S::command_line, "this text", {switch_on(&Options::help).set, nullptr}},
      {"--config", "FILE.toml", S::command_line,
       "settings from a TOML file: keys are the long flags without their dashes (steps = 250, "
       "checkpoint-policy = \"full\", rank-stats = true); the command line's flags override it",
       text(&Options::config_file)},
  };
}

// What the run trains on.
FlagTable data_flags() {
  using S = Section;
  return {
      {"--data", "FILE", S::data, "train on FILE (default: the built-in corpus)",
       text(&Options::data)},
      {"--tokenizer", "PATH", S::data,
       "a tokenizer.json, tokenizer.model or a folder with one: train on its ids, each document "
       "(the file, or a line of the built-in corpus) ending in EOS (default: a resumed run's, "
       "else the --init-from folder's when it has one, else bytes)",
       text(&Options::tokenizer)},
  };
}

// A row of nn/train_settings.h as a flag: --grad-clip sets grad_clip. A
// setting kept on resume is a run flag, one that may change a compute flag.
template <class T>
Flag setting_flag(std::string name, T nn::TrainConfig::*field, nn::OnResume on_resume,
                  const char* value, const char* help) {
  std::replace(name.begin(), name.end(), '_', '-');
  return {"--" + name,
          value,
          on_resume == nn::OnResume::kept ? Section::run : Section::compute,
          help,
          {[field](Options& o, const std::string& flag, const std::string& v) {
             o.config.*field = parse_setting<T>(flag, v);
           },
           [field](const Options& o) { return nn::setting_json(o.config.*field); }}};
}

// The run: its settings (TrainConfig's rows) and dropout.
FlagTable run_flags() {
  FlagTable table;
#define REPRISE_SETTING_FLAG(type, name, default_value, check, on_resume, if_absent, value, help) \
  table.push_back(                                                                                \
      setting_flag(#name, &nn::TrainConfig::name, nn::OnResume::on_resume, value, help));
  REPRISE_TRAIN_SETTINGS(REPRISE_SETTING_FLAG)
#undef REPRISE_SETTING_FLAG
  using nn::LlamaConfig;
  table.push_back({"--dropout", "P", Section::run, "residual dropout",
                   parsed(&LlamaConfig::dropout, parse_real)});
  table.push_back({"--attn-dropout", "P", Section::run, "attention-weight dropout",
                   parsed(&LlamaConfig::attention_dropout, parse_real)});
  return table;
}

// The model's sizes (LlamaConfig), which --init-from takes from its folder.
FlagTable model_flags() {
  using S = Section;
  using nn::LlamaConfig;
  return {
      {"--hidden", "N", S::model, "hidden size", parsed(&LlamaConfig::hidden_size, parse_positive)},
      {"--layers", "N", S::model, "decoder layers",
       parsed(&LlamaConfig::num_hidden_layers, parse_positive)},
      {"--heads", "N", S::model, "attention heads",
       parsed(&LlamaConfig::num_attention_heads, parse_positive)},
      {"--kv-heads", "N", S::model, "key and value heads",
       parsed(&LlamaConfig::num_key_value_heads, parse_positive)},
      {"--intermediate", "N", S::model, "intermediate size of the MLP, or of each expert in an MoE",
       parsed(&LlamaConfig::intermediate_size, parse_positive)},
  };
}

// How the step computes: checkpointing and replay (CheckpointConfig).
FlagTable compute_flags() {
  using S = Section;
  using nn::CheckpointConfig;
  return {
      {"--checkpoint-policy", "P", S::compute,
       "none | full | every-n-layers:N | op-sac | budget:BYTES", checkpoint_policy()},
      {"--rng-replay", "M", S::compute, "recorded | stash | fresh",
       named(&CheckpointConfig::rng_replay, nn::parse_rng_replay, autograd::rng_replay_name)},
      {"--verify", "M", S::compute, "none | metadata | bitwise recompute verifier",
       named(&CheckpointConfig::verify, nn::parse_verify, autograd::verify_name)},
      {"--recompute-noise-ulps", "K", S::compute, "perturb recomputed values by up to K ulps",
       parsed(&CheckpointConfig::recompute_noise_ulps, parse_noise_ulps)},
  };
}

// This session: device, threads, logs, checkpoints, imports and exports.
FlagTable session_flags(const Program& program) {
  using S = Section;
  return {
      {"--device", "D", S::session,
       "where the model, its gradients and the optimizer state live (their checkpoints are the "
       "same files on every device): cpu, cuda or cuda:N",
       parsed(&Options::device, parse_device_flag, show_device)},
      {"--threads", "N", S::session, "CPU threads",
       parsed(&Options::threads, parse_threads, show_threads), "REPRISE_NUM_THREADS or all cores"},
      {"--log-every", "N", S::session, "progress line every N steps",
       parsed(&Options::log_every, parse_positive)},
      {"--eval-every", "N", S::session, "held-out loss every N steps; 0: only at the end",
       parsed(&Options::eval_every, parse_count)},
      {"--eval-batches", "N", S::session, "held-out batches per evaluation",
       parsed(&Options::eval_batches, parse_positive)},
      {"--metrics", "FILE.jsonl", S::session, "append one JSON object per logged step",
       text(&Options::metrics)},
      {"--trace", "FILE.json", S::session,
       "write a Chrome/Perfetto trace of one step (rank 0's): forward, backward and replay "
       "spans per op with scopes, memory by kind",
       text(&Options::trace)},
      {"--trace-step", "N", S::session, "the session's step to trace; the first warms up",
       parsed(&Options::trace_step, parse_positive, show_trace_step)},
      {"--save", "DIR", S::session, "write a training checkpoint to DIR at the end",
       text(&Options::save)},
      {"--save-every", "N", S::session, "... and every N steps",
       parsed(&Options::save_every, parse_positive), "only at the end"},
      {"--resume", "DIR", S::session, "continue the run saved in DIR, bit for bit",
       text(&Options::resume)},
      {"--stop-after", "N", S::session, "stop after N steps of this session, as if interrupted",
       parsed(&Options::stop_after, parse_positive), "at the run's end"},
      {"--init-from", "HF_DIR", S::session,
       "start from a Hugging Face " + program.hf_model + " folder's weights and config",
       text(&Options::init_from)},
      {"--export", "HF_DIR", S::session, "write the trained model as a Hugging Face folder",
       text(&Options::export_dir)},
      {"--export-dtype", "D", S::session, "f32 | bf16 | f16: the exported weights' dtype",
       parsed(&Options::export_dtype, parse_export_dtype, show_dtype)},
      {"--export-shard-size", "N", S::session,
       "shard the exported weights at N bytes (K/M/G suffix), with "
       "model.safetensors.index.json, as save_pretrained does",
       parsed(&Options::export_shard_bytes, parse_shard_size)},
      {"--dump-grads", "FILE", S::session,
       "write the first batch's input_ids, labels, loss, logits and every parameter gradient "
       "(HF names), before the update",
       text(&Options::dump_grads)},
      {"--on-nonfinite", "M", S::session,
       "a step whose loss or gradient norm is NaN or infinite: stop (an error naming the step, "
       "exit 1) | skip (no update; the run goes on, and logs and counts it)",
       named(&Options::on_nonfinite, nn::parse_on_nonfinite, nn::on_nonfinite_name)},
      {"--detect-anomaly", "", S::session,
       "check every op's outputs and gradients: the first NaN or infinity is an error naming "
       "the op, its scope and shapes (slow)",
       switch_on(&Options::detect_anomaly)},
  };
}

// Several processes.
FlagTable processes_flags() {
  using S = Section;
  return {
      {"--shard", "M", S::processes,
       "what the processes split: none | optimizer (each keeps and updates 1/R of the AdamW "
       "state, then all-gathers what it updated; ZeRO-1) | gradients (also 1/R of the summed "
       "gradients: a reduce-scatter in place of the all-reduce; ZeRO-2) | parameters (also 1/R "
       "of the parameters at rest, each decoder layer gathered for its forward and again for "
       "its backward; ZeRO-3, FSDP-style)",
       named(&Options::shard, parallel::parse_shard_mode, parallel::shard_mode_name)},
      {"--bucket-kib", "N", S::processes, "gradient all-reduce bucket size",
       parsed(&Options::bucket_kib, parse_positive)},
      {"--comm-timeout", "S", S::processes,
       "a rank waiting longer than S seconds for another fails",
       parsed(&Options::comm_timeout, parse_timeout)},
      {"--check-replicas", "N", S::processes,
       "every N steps, check that every process holds the same weights",
       parsed(&Options::check_replicas_every, parse_positive), "never"},
      {"--rank-stats", "", S::processes, "log each process's throughput and all-reduce time",
       switch_on(&Options::rank_stats)},
  };
}

// The flags every trainer takes, section by section.
FlagTable common_flags(const Program& program) {
  FlagTable table;
  for (const FlagTable& part : {command_line_flags(), data_flags(), run_flags(), model_flags(),
                                compute_flags(), session_flags(program), processes_flags()})
    table.insert(table.end(), part.begin(), part.end());
  return table;
}

// Every flag of `program`: the common ones and its own.
FlagTable all_flags(const Program& program) {
  FlagTable table = common_flags(program);
  for (const Flag& flag : program.flags) {
    REPRISE_CHECK(find_flag(table, flag.name) == nullptr, program.name, ": flag ", flag.name,
                  " is already a common flag");
    table.push_back(flag);
  }
  return table;
}

// The names of the flags of `section`, in table order.
std::vector<std::string> names_in(const FlagTable& table, Section section) {
  std::vector<std::string> out;
  for (const Flag& f : table) {
    if (f.section == section) out.push_back(f.name);
  }
  return out;
}

using Args = std::vector<std::pair<std::string, std::string>>;

// The command line as (flag, value) pairs, in order; "--flag=value" and
// "--flag value" both work.
Args split_args(const FlagTable& table, int argc, char** argv) {
  Args out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool inline_value = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    const Flag* flag = find_flag(table, arg);
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

// Applies the flags to `o`, prefixing each error with its flag.
void apply_flags(const FlagTable& table, const Args& args, Options& o) {
  for (const auto& [flag, value] : args) {
    try {
      find_flag(table, flag)->setting.set(o, flag, value);
    } catch (const UsageError& e) {
      const std::string what = e.what();
      throw UsageError(what.rfind("--", 0) == 0 ? what : flag + ": " + what);
    } catch (const Error& e) {
      throw UsageError(flag + ": " + e.what());
    }
  }
}

// --config FILE: the file's settings, each checked by its flag's parser
// (an error names the file, line and key), then the command line's flags,
// which therefore override them.
Args with_config_file(const Program& program, const FlagTable& table, const Args& args) {
  std::string path;
  for (const auto& [flag, value] : args) {
    if (flag != "--config") continue;
    if (!path.empty()) throw UsageError("--config: given twice");
    path = value;
  }
  if (path.empty()) return args;
  Args out;
  for (const ConfigEntry& e : read_config_file(path, table)) {
    Options check;
    check.config = program.defaults;
    try {
      apply_flags(table, {{e.flag, e.value}}, check);
    } catch (const UsageError& error) {
      throw UsageError("--config " + e.where + ": " + error.what());
    }
    out.emplace_back(e.flag, e.value);
  }
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

// Whether a flag of `section` sets the run's config (TrainConfig).
bool sets_run_config(Section section) {
  return section == Section::run || section == Section::model || section == Section::compute;
}

// The session's resolved settings, for the metrics file's first line and
// the training checkpoint: the flags the config file and the command line
// gave (the last value of each; true for a flag without a value), the
// run's TrainConfig with every run, model and compute setting, defaults
// included, and the value of every other flag, under its name with
// underscores for dashes ("trace_step").
json::Value resolved_config(const FlagTable& table, const Options& o, const Args& args) {
  json::Value flags = json::Object{};
  for (const auto& [flag, value] : args) {
    if (value.empty()) {
      flags.set(flag.substr(2), true);
    } else {
      flags.set(flag.substr(2), value);
    }
  }
  json::Value session = json::Object{};
  for (const Flag& f : table) {
    if (sets_run_config(f.section) || !f.setting.get) continue;
    std::string key = f.name.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    session.set(std::move(key), f.setting.get(o));
  }
  return json::Object{
      {"flags", std::move(flags)}, {"train", o.config.to_json()}, {"session", std::move(session)}};
}

// "ETA 1h02m", "ETA 3m05s", "ETA 12s": the time `steps` more steps take at
// `seconds_per_step`.
std::string eta(int64_t steps, double seconds_per_step) {
  const int64_t s = int64_t(std::llround(double(steps) * seconds_per_step));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "ETA %lldh%02lldm", (long long)(s / 3600),
                  (long long)(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "ETA %lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "ETA %llds", (long long)s);
  }
  return buf;
}

// "a", "a and b", "a, b and c"
std::string spoken_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// ---- the machine's peak ------------------------------------------------------

struct Peak {
  double flops = 0;  // FLOP/s of the projections' dtype; 0 when unknown
  std::string how;
};

// cores x 2 FMA pipes x f32 lanes x 2 flops per FMA x clock, twice that for
// bf16 products on vdpbf16ps (two multiply-adds per lane). The clock is
// /proc/cpuinfo's "cpu MHz" of the first CPU; the lanes are 16 with
// AVX-512, 8 with AVX2. (Zen 4 issues 512-bit FMAs as two 256-bit halves, so
// there the true peak is half of this for AVX-512 code; the figure is the
// conventional one.)
Peak machine_peak(int cores, DType dtype) {
  std::ifstream in("/proc/cpuinfo");
  double mhz = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu MHz", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) mhz = std::atof(line.c_str() + colon + 1);
      break;
    }
  }
  // The lanes of the capability the kernels run at (a forced lower one
  // lowers the peak too).
  const CpuCapability capability = cpu_capability();
  const bool avx512 =
      capability == CpuCapability::avx512 || capability == CpuCapability::avx512_bf16;
  const int lanes = avx512 ? 16 : capability == CpuCapability::avx2 ? 8 : 4;
  Peak p;
  if (mhz <= 0) {
    p.how = "unknown (no clock in /proc/cpuinfo): MFU not shown";
    return p;
  }
  const bool dot = dtype == DType::bf16 && capability == CpuCapability::avx512_bf16;
  p.flops = double(cores) * 2 * lanes * 2 * mhz * 1e6 * (dot ? 2 : 1);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%.0f GFLOP/s %s = %d cores x 2 FMA x %d lanes (%s) x 2%s x %.2f GHz",
                p.flops / 1e9, dot ? "bf16" : "f32", cores, lanes,
                avx512                              ? "AVX-512"
                : capability == CpuCapability::avx2 ? "AVX2"
                                                    : "SSE",
                dot ? " x 2 (vdpbf16ps)" : "", mhz / 1e3);
  p.how = buf;
  return p;
}

// A GPU's peak in the projections' dtype as its backend knows it
// (Backend::peak_flops).
Peak device_peak(Device device, DType dtype) {
  Peak p;
  p.flops = backend(device).peak_flops(dtype);
  char buf[120];
  if (p.flops > 0) {
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s %s (%s)", p.flops / 1e12, dtype_name(dtype),
                  to_string(device).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "unknown for %s: MFU not shown", to_string(device).c_str());
  }
  p.how = buf;
  return p;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return buf;
}

// ---- interruption ------------------------------------------------------------

// The signal (SIGINT or SIGTERM) that asked the run to stop; 0: none. The
// handler only stores it; the training loop reads it between steps.
volatile std::sig_atomic_t stop_signal = 0;

// The first signal asks the loop to stop after the current step; a second
// ends the process at once, with the status a shell gives a process that
// the signal killed (128 + its number). Only async-signal-safe calls here.
void on_stop_signal(int signal) {
  if (stop_signal != 0) {
    static const char message[] = "second signal: exiting at once, without saving\n";
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(128 + signal);
  }
  stop_signal = signal;
}

// Routes SIGINT and SIGTERM to on_stop_signal while alive, then restores
// the previous handlers.
class StopOnSignals {
 public:
  StopOnSignals() {
    stop_signal = 0;
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // reads, writes and waits go on; the loop looks between steps
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~StopOnSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  static constexpr std::array<int, 2> kSignals = {SIGINT, SIGTERM};
  std::array<struct sigaction, 2> previous_ = {};
};

// The stop signal of any process (the largest number; 0: none), so that
// every process stops after the same step. Collective.
int stop_signal_of_any_rank(parallel::ProcessGroup& group) {
  const std::vector<double> all = group.all_gather({double(stop_signal)});
  return int(*std::max_element(all.begin(), all.end()));
}

const char* signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

// ---- the metrics file --------------------------------------------------------

// Cuts a resumed run's --metrics file after the last line of a step <=
// `step`, the checkpoint's: a session killed after logging a step and
// before saving it left lines (the last maybe cut short) of steps that the
// resumed run takes again. Returns the number of lines dropped.
int64_t truncate_metrics_after(const std::string& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;  // no file yet
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // Bytes to keep: whole lines up to the last step <= `step`. A session's
  // {"config": ...} line stays when a step it logged stays.
  size_t keep = 0;
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    int64_t line_step = 0;
    try {
      const json::Value line = json::parse(text.substr(start, end - start));
      const json::Value* v = line.is_object() ? line.find("step") : nullptr;
      if (v == nullptr && line.is_object() && line.find("config")) continue;
      if (v == nullptr || !v->is_int()) break;
      line_step = v->as_int();
    } catch (const Error&) {
      break;
    }
    if (line_step > step) break;
    keep = end + 1;
  }
  if (keep == text.size()) return 0;
  const int64_t dropped = std::count(text.begin() + std::ptrdiff_t(keep), text.end(), '\n') +
                          (text.back() == '\n' ? 0 : 1);
  std::filesystem::resize_file(path, keep);
  return dropped;
}

// What to try after running out of memory: a smaller batch, or
// checkpointed activations. Under REPRISE_MAX_MEMORY, the budget for the
// budget planner's policy (budget:BYTES) is measured, under the same cap:
// two steps of the session's config over the built-in corpus at budget 0,
// the planner's recording step (every region recomputes everything) and
// its plan of the least memory (each region holds its inputs, `least`
// bytes in all). A plan for budget B holds at most B - least bytes more,
// so B = cap - peak + least fits.
std::string out_of_memory_hint(const OutOfMemoryError& e, const nn::TrainConfig& session) {
  const std::string hint = "hint: lower --batch (" + std::to_string(session.batch) + " now)";
  const std::string checkpoint = ", or checkpoint activations (--checkpoint-policy full)";
  if (e.limit == 0) return hint + checkpoint;
  nn::TrainConfig c = session;
  c.checkpointing.set_policy("budget:0");
  c.steps = std::max<int64_t>(c.steps, 2);
  int64_t peak = 0, least = 0;
  try {
    nn::Trainer trainer(c, std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin()),
                        nullptr, e.device);
    for (int step = 0; step < 2; ++step) peak = std::max(peak, trainer.step().peak_total);
    least = trainer.checkpointing().planner()->summary().planned_bytes;
  } catch (const OutOfMemoryError&) {
    return hint + "; even with every layer recomputed (--checkpoint-policy full) a step " +
           "needs more than REPRISE_MAX_MEMORY's " + mib(e.limit);
  } catch (const Error&) {
    return hint + checkpoint;  // the measurement did not run (a vocabulary under 256 bytes)
  }
  const int64_t budget = e.limit - peak + least;
  const std::string bytes = budget >= (int64_t(16) << 20) ? std::to_string(budget >> 20) + "M"
                                                          : std::to_string(budget >> 10) + "K";
  return hint + ", or --checkpoint-policy budget:" + bytes + " would fit under the cap (" +
         "measured: a step with every layer recomputed peaks at " + mib(peak) + " of " +
         mib(e.limit) + ")";
}

// ---- the run -----------------------------------------------------------------

// The options of a session, checked and completed: a resumed run's config
// with the command line's compute flags on top, or an HF folder's
// architecture.
Options session_options(const Program& program, const FlagTable& table, const Options& flags_only,
                        const Args& args, std::optional<nn::TrainStateInfo>& resumed) {
  Options o = flags_only;
  if (!o.resume.empty() && !o.init_from.empty())
    throw UsageError("--resume and --init-from exclude each other");
  if (o.save_every > 0 && o.save.empty()) throw UsageError("--save-every needs --save DIR");
  if (o.trace_step > 0 && o.trace.empty()) throw UsageError("--trace-step needs --trace FILE");

  if (!o.resume.empty()) {
    // The saved run's config, with this command line's flags on top: run
    // flags must not change it; compute flags may.
    resumed = nn::read_train_state_info(o.resume);
    Options merged;
    merged.config = resumed->config;
    apply_flags(table, args, merged);
    const std::vector<std::string> diffs = resumed->config.run_differences(merged.config);
    if (!diffs.empty()) {
      throw UsageError("--resume " + o.resume + ": a resumed run keeps the saved run's " +
                       "settings, but the flags change " + diffs.front() +
                       " (saved vs flags); only " + spoken_list(names_in(table, Section::compute)) +
                       " may change");
    }
    o.config = merged.config;
    if (o.data.empty()) o.data = resumed->data_path;
  }
  if (!o.init_from.empty()) {
    for (const auto& [flag, value] : args) {
      if (find_flag(table, flag)->section == Section::model)
        throw UsageError(flag + ": with --init-from the architecture comes from its config.json");
    }
    // The folder's architecture, with this run's training-only settings.
    const nn::LlamaConfig given = o.config.model;
    nn::ModelConfigFile folder;
    try {
      folder = nn::read_model_config_file(o.init_from);
    } catch (const Error& e) {
      throw UsageError(std::string("--init-from: ") + e.what());
    }
    const std::string unknown = nn::unknown_fields_warning(folder, o.init_from + "/config.json");
    if (!unknown.empty()) std::fprintf(stderr, "warning: %s\n", unknown.c_str());
    o.config.model = folder.config;
    o.config.model.dropout = given.dropout;
    o.config.model.attention_dropout = given.attention_dropout;
    if (program.keep_on_init) program.keep_on_init(given, o.config.model);
  }
  try {
    o.config.validate();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return o;
}

// Per process, over the steps since the last log line: its time, and what
// its gradient buckets' reductions took (GradientBuckets::Timing), and its
// parameter all-gathers.
struct RankWindow {
  double seconds = 0, comm = 0, comm_in_backward = 0, wait_after_backward = 0, gather = 0;
  int64_t steps = 0, gathered_bytes = 0;
  void add(const nn::Trainer::StepStats& s, const parallel::GradientBuckets::Timing& t) {
    seconds += s.seconds;
    gather += s.gather_seconds;
    gathered_bytes += s.gathered_bytes;
    comm += t.busy();
    comm_in_backward += t.busy_during_backward();
    wait_after_backward += t.wait_after_backward();
    ++steps;
  }
};

// One line per rank: its throughput, how much of its step went to the
// gradient reduction (`reduction` names it) and how much of that ran during
// backward, and with the optimizer split the all-gathers of parameters (and
// with the parameters split, the MiB they brought). The
// metrics get the same figures per rank, and rank 0's buckets of the last
// step (their sizes and times), the input of bench/parallel's projection.
void log_ranks(nn::TrainGroup& group, const RankWindow& w, int64_t tokens_per_rank,
               const char* reduction, const parallel::GradientBuckets::Timing& last, StepLog& log) {
  const double steps = double(w.steps);
  const std::vector<double> all = group.all_gather(
      {double(tokens_per_rank) / w.seconds, 1e3 * w.seconds / steps, 1e3 * w.comm / steps,
       1e3 * w.comm_in_backward / steps, 1e3 * w.wait_after_backward / steps,
       1e3 * w.gather / steps, double(w.gathered_bytes) / steps / double(1 << 20)});
  const bool split = group.shard_layout() != nullptr;
  json::Array ranks;
  for (size_t r = 0; r < all.size() / 7; ++r) {
    const double* v = &all[7 * r];
    char buf[300];
    const int n = std::snprintf(
        buf, sizeof buf,
        "         rank %zu: %7.0f tok/s | step %.1f ms | %s %.1f ms (%.0f%% of the step, %.0f%% of "
        "it during backward) | wait after backward %.1f ms",
        r, v[0], v[1], reduction, v[2], v[1] > 0 ? 100 * v[2] / v[1] : 0.0,
        v[2] > 0 ? 100 * v[3] / v[2] : 0.0, v[4]);
    if (split && n > 0 && size_t(n) < sizeof buf) {
      if (v[6] > 0) {
        std::snprintf(buf + n, sizeof buf - size_t(n), " | gathers %.1f MiB in %.1f ms", v[6],
                      v[5]);
      } else {
        std::snprintf(buf + n, sizeof buf - size_t(n), " | all-gather %.1f ms", v[5]);
      }
    }
    log.lines.push_back(buf);
    json::Value m = json::Object{};
    m.set("tokens_per_s", v[0]);
    m.set("step_ms", v[1]);
    m.set("all_reduce_ms", v[2]);
    m.set("all_reduce_during_backward_ms", v[3]);
    m.set("wait_after_backward_ms", v[4]);
    if (split) m.set("all_gather_ms", v[5]);
    if (v[6] > 0) m.set("gathered_mib", v[6]);
    ranks.push_back(std::move(m));
  }
  log.metrics.emplace_back("ranks", std::move(ranks));
  json::Array buckets;
  for (const parallel::GradientBuckets::BucketTiming& b : last.buckets) {
    json::Value m = json::Object{};
    m.set("bytes", b.bytes);
    m.set("ready_ms", 1e3 * b.ready);
    m.set("start_ms", 1e3 * b.start);
    m.set("end_ms", 1e3 * b.end);
    buckets.push_back(std::move(m));
  }
  json::Value step = json::Object{};
  step.set("backward_end_ms", 1e3 * last.backward_end);
  step.set("done_ms", 1e3 * last.done);
  step.set("buckets", std::move(buckets));
  log.metrics.emplace_back("last_step_buckets", std::move(step));
}

// The tokenizer of a session: --tokenizer; else a resumed run's; else the
// one in the --init-from folder, when it has one; else bytes.
nn::DataTokenizer session_tokenizer(const Options& o,
                                    const std::optional<nn::TrainStateInfo>& resumed) {
  if (!o.tokenizer.empty()) return nn::DataTokenizer::load(o.tokenizer);
  if (resumed) {
    if (resumed->tokenizer_path.empty()) return {};
    return nn::DataTokenizer::load(resumed->tokenizer_path);
  }
  if (!o.init_from.empty() && io::has_tokenizer(o.init_from))
    return nn::DataTokenizer::load(o.init_from);
  return {};
}

// Copies the tokenizer's files into the Hugging Face folder `dir`, each
// through a temporary file and a rename.
void export_tokenizer(const nn::DataTokenizer& tok, const std::string& dir) {
  namespace fs = std::filesystem;
  for (const io::TokenizerFile& f : io::tokenizer_files(tok.path)) {
    const fs::path dst = fs::path(dir) / f.name, tmp = fs::path(dir) / (f.name + ".tmp");
    if (fs::exists(dst) && fs::equivalent(f.path, dst)) continue;
    fs::copy_file(f.path, tmp, fs::copy_options::overwrite_existing);
    fs::rename(tmp, dst);
  }
}

// ---- the session ---------------------------------------------------------------

// A training session, set up by open_session: its checked options, data,
// processes and trainer, and the figures its log lines share.
struct Session {
  const Program* program = nullptr;
  const FlagTable* table = nullptr;  // the program's flags
  Options o;
  Args args;  // the config file's and the command line's flags (resolved_config)
  std::optional<nn::TrainStateInfo> resumed;
  parallel::World* world = nullptr;
  bool lead = false;  // rank 0: logs and writes files
  nn::DataTokenizer tok;
  std::shared_ptr<const nn::TextDataset> data;
  std::shared_ptr<parallel::ProcessGroup> group;
  std::unique_ptr<nn::Trainer> trainer;
  Peak peak;
  double flops_per_token = 0;
  nn::CorpusEntropy entropy;
  // With a tokenizer, the built-in corpus's entropy rate per token: its
  // lines' entropy over the tokens they became (EOS and BOS add none).
  double entropy_rate = 0, grammar_only_rate = 0;
  std::ofstream metrics;  // --metrics, on the lead process

  const nn::TrainConfig& config() const { return trainer->config(); }
};

// The options that depend on the number of processes: what needs one
// process or one micro-batch, and a checkpoint's ranks.
void check_processes(const Options& o, const std::optional<nn::TrainStateInfo>& resumed,
                     int ranks) {
  if (!o.dump_grads.empty() && ranks * o.config.grad_accum > 1)
    throw UsageError(
        "--dump-grads writes one micro-batch's gradients: it needs one process and "
        "--grad-accum 1");
  if (!o.device.is_cpu() && ranks > 1)
    throw UsageError("--device " + to_string(o.device) +
                     ": training on several processes runs on the CPU (MPI); one process "
                     "trains on a GPU");
  if (o.expert_parallel && !o.config.model.moe)
    throw UsageError("--expert-parallel: the model has no MoE layers");
  if (o.expert_parallel && (!o.init_from.empty() || !o.export_dir.empty()))
    throw UsageError(
        "--init-from and --export read and write every expert in one process; they "
        "do not go with --expert-parallel");
  if (resumed) {
    try {
      nn::check_resume_ranks("--resume " + o.resume, resumed->ranks, ranks);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
}

// Checks the options and builds the session: its data, process group and
// trainer, restored from --resume's checkpoint or --init-from's weights.
// `config` gets the run's config once the Trainer is built.
Session open_session(const Program& program, const FlagTable& table, const Options& flags_only,
                     const Args& args, parallel::World& world, nn::TrainConfig& config) {
  Session s;
  s.program = &program;
  s.table = &table;
  s.o = session_options(program, table, flags_only, args, s.resumed);
  s.args = args;
  s.world = &world;
  s.lead = world.rank() == 0;
  Options& o = s.o;
  if (o.threads > 0) threads::set_num_threads(o.threads);
  check_processes(o, s.resumed, world.size());

  s.tok = session_tokenizer(o, s.resumed);
  // A new model's embedding has a row per id of its tokenizer.
  if (!s.tok.is_bytes() && !s.resumed && o.init_from.empty())
    o.config.model.vocab_size = s.tok.vocab_size();
  s.data = std::make_shared<const nn::TextDataset>(
      o.data.empty() ? nn::TextDataset::builtin(nn::kCorpusSeed, nn::kCorpusBytes, 0.1, s.tok)
                     : nn::TextDataset::from_file(o.data, 0.1, s.tok));
  s.group = std::make_shared<parallel::ProcessGroup>(
      world.communicator(), parallel::ProcessGroupOptions{.expert_parallel = o.expert_parallel,
                                                          .shard = o.shard,
                                                          .bucket_bytes = o.bucket_kib * 1024});
  s.trainer = std::make_unique<nn::Trainer>(o.config, s.data, s.group, o.device);
  config = s.trainer->config();
  if (s.resumed) nn::load_train_state(*s.trainer, o.resume);
  if (!o.init_from.empty()) {
    const nn::ParameterShards::Whole whole(s.trainer->parameter_shards());
    nn::load_weights(s.trainer->model(), o.init_from);
  }

  const nn::TrainConfig& c = s.config();
  s.entropy = nn::corpus_entropy();
  s.peak = o.device.is_cpu() ? machine_peak(threads::num_threads() * world.size(), c.dtype)
                             : device_peak(o.device, c.dtype);
  s.flops_per_token = s.trainer->model().training_flops_per_token(c.seq);
  const double lines = double(std::count(s.data->text().begin(), s.data->text().end(), '\n'));
  const double tokens = double(s.data->num_tokens());
  s.entropy_rate = lines * s.entropy.line_nats / tokens;
  s.grammar_only_rate = lines * s.entropy.grammar_only_nats * s.entropy.mean_line_bytes / tokens;
  return s;
}

// The head of the log: the model, the data and, for the built-in corpus,
// its entropy rate.
void print_model_and_data(const Session& s) {
  const nn::TrainConfig& c = s.config();
  const nn::TextDataset& data = *s.data;
  std::printf("model    %s: %.2fM parameters%s, %.1f MFLOP per token per step\n",
              c.model.describe().c_str(), double(s.trainer->model().num_parameters()) / 1e6,
              s.o.expert_parallel ? " in each process" : "", s.flops_per_token / 1e6);
  if (s.tok.is_bytes()) {
    std::printf("data     %s: %zu bytes, %lld for training, %lld held out\n", data.name().c_str(),
                data.text().size(), (long long)data.train_size(), (long long)data.val_size());
  } else {
    std::printf("data     %s: %zu bytes -> %lld tokens (%s), %lld for training, %lld held out\n",
                data.name().c_str(), data.text().size(), (long long)data.num_tokens(),
                s.tok.describe().c_str(), (long long)data.train_size(), (long long)data.val_size());
  }
  if (s.o.data.empty() && s.tok.is_bytes()) {
    std::printf(
        "         entropy rate %.3f nats/byte (a model that cannot copy or add: %.3f); "
        "uniform %.3f\n",
        s.entropy.nats_per_byte, s.entropy.grammar_only_nats, s.entropy.uniform_nats);
  } else if (s.o.data.empty()) {
    std::printf(
        "         entropy rate %.3f nats/token, %.2f bytes per token (a model that cannot copy "
        "or "
        "add: %.3f); uniform %.3f\n",
        s.entropy_rate, double(data.text().size()) / double(data.num_tokens()), s.grammar_only_rate,
        std::log(double(s.tok.vocab_size())));
  }
}

// The rest of the head: the run, its processes, how it computes, the
// machine's peak and where a resumed run starts.
void print_run_and_compute(const Session& s) {
  const nn::TrainConfig& c = s.config();
  const nn::Trainer& trainer = *s.trainer;
  const int ranks = s.world->size();
  std::printf(
      "run      %lld steps of %lld x %lld tokens, AdamW lr %.3g -> %.3g (cosine, warmup %lld), "
      "wd %.3g, clip %.3g, dropout %.3g/%.3g, seed %llu\n",
      (long long)c.steps, (long long)trainer.global_batch(), (long long)c.seq, c.lr, c.min_lr,
      (long long)c.warmup, c.weight_decay, c.grad_clip, c.model.dropout, c.model.attention_dropout,
      (unsigned long long)c.seed);
  if (ranks * c.grad_accum > 1) {
    std::printf("parallel %d process(es) (%s) x %lld micro-batch(es) of %lld sequences", ranks,
                s.world->communicator()->kind().c_str(), (long long)c.grad_accum,
                (long long)c.batch);
    if (s.o.expert_parallel) {
      const int64_t held =
          s.group->expert_dispatch()->local_experts(c.model.moe->num_local_experts).count;
      std::printf(", %lld experts per process", (long long)held);
    }
    std::printf(", %zu gradient bucket(s) of up to %lld KiB", s.group->buckets().num_buckets(),
                (long long)s.o.bucket_kib);
    static constexpr const char* kSplit[] = {
        "", ", optimizer state split over the processes",
        ", gradients and optimizer state split over the processes",
        ", parameters, gradients and optimizer state split over the processes"};
    std::printf("%s", kSplit[size_t(s.group->shard_mode())]);
    std::printf("\n");
  }
  const nn::CheckpointConfig& ck = c.checkpointing;
  std::printf("compute  checkpoint %s, ", ck.policy_string().c_str());
  if (c.model.moe) std::printf("router %s, ", ck.save_router ? "saved" : "recomputed");
  std::printf("rng replay %s, verify %s, noise %d ulps, %d threads, cpu %s, device %s, dtype %s\n",
              autograd::rng_replay_name(ck.rng_replay), autograd::verify_name(ck.verify),
              ck.recompute_noise_ulps, threads::num_threads(), to_string(cpu_capability()),
              to_string(s.o.device).c_str(), dtype_name(c.dtype));
  if (c.attention_dtype != DType::f32)
    std::printf("         attention in %s\n", dtype_name(c.attention_dtype));
  if (c.dtype == DType::bf16 && s.o.device.is_cpu()) {
    if (cpu_capability() == CpuCapability::avx512_bf16) {
      std::printf("         bf16 products on the dot-product instruction (vdpbf16ps)\n");
    } else {
      std::printf(
          "         bf16 products emulated at %s (no AVX512-BF16 in use): the same bits at the "
          "f32 product's speed, half the dot-product instruction's\n",
          to_string(cpu_capability()));
    }
  }
  std::printf("peak     %s\n", s.peak.how.c_str());
  if (s.resumed) {
    std::printf("resumed  from %s at step %lld\n", s.o.resume.c_str(),
                (long long)trainer.steps_done());
  }
  std::fflush(stdout);
}

// Opens --metrics (the lead process's), cut after a resumed run's
// checkpoint, and writes the session's settings as its first line; makes
// the folders of every file the session writes.
void open_metrics(Session& s) {
  const Options& o = s.o;
  for (const std::string& file : {o.metrics, o.dump_grads, o.trace}) {
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    if (!file.empty() && !parent.empty()) std::filesystem::create_directories(parent);
  }
  if (o.metrics.empty()) return;
  const int64_t step = s.trainer->steps_done();
  if (s.resumed) {
    if (const int64_t dropped = truncate_metrics_after(o.metrics, step)) {
      std::printf("metrics  dropped %lld line(s) of %s past the checkpoint's step %lld\n",
                  (long long)dropped, o.metrics.c_str(), (long long)step);
    }
  }
  s.metrics.open(o.metrics, s.resumed ? std::ios::app : std::ios::trunc);
  REPRISE_CHECK(s.metrics.good(), "cannot open --metrics file '", o.metrics, "'");
  // The session's settings head its lines (a resumed session's follow
  // the saved run's steps); readers of steps skip lines without "step".
  s.metrics << json::dump(json::Object{{"config", resolved_config(*s.table, o, s.args)}}) << "\n";
}

// ---- the steps -----------------------------------------------------------------

// The steps since the last log line, which the line reports.
struct Window {
  int64_t tokens = 0, peak_saved = 0, peak_total = 0;
  double seconds = 0;
  RankWindow ranks;

  void add(const nn::Trainer::StepStats& s, const parallel::GradientBuckets::Timing& t) {
    tokens += s.tokens;
    seconds += s.seconds;
    peak_saved = std::max(peak_saved, s.peak_saved_activation);
    peak_total = std::max(peak_total, s.peak_total);
    ranks.add(s, t);
  }
};

// What the session's steps have done so far.
struct Progress {
  int64_t first_step = 0;  // the session's first, counted from the run's start
  int64_t steps = 0, skipped = 0;
  double seconds = 0;
  float last_loss = 0;
  std::optional<double> last_val;
  int stop_signal = 0;  // of any process, after the last step
  Window window;
};

// One step under a Tracer (autograd/tracer.h), whose trace goes to
// --trace's file.
nn::Trainer::StepStats traced_step(const Session& s, const nn::Trainer::AfterBackward& dump) {
  autograd::Tracer tracer(s.o.device);
  nn::Trainer::StepStats step;
  {
    autograd::TraceGuard on(tracer);
    step = s.trainer->step(dump);
  }
  tracer.write(s.o.trace, s.program->name + " step " + std::to_string(step.step));
  std::printf("trace    step %lld: %zu spans and %zu memory samples to %s\n", (long long)step.step,
              tracer.spans().size(), tracer.memory().size(), s.o.trace.c_str());
  return step;
}

// The session's next step: its first writes --dump-grads, and
// --trace-step's is traced.
nn::Trainer::StepStats next_step(const Session& s, int64_t session_steps) {
  nn::Trainer::AfterBackward dump;
  if (session_steps == 0 && !s.o.dump_grads.empty()) {
    dump = [&](const nn::Batch& b, const nn::CausalLMOutput& out, const Tensor& loss) {
      nn::write_gradient_dump(s.o.dump_grads, s.trainer->model(), b, out.logits, loss);
    };
  }
  const bool trace =
      s.lead && !s.o.trace.empty() && session_steps + 1 == trace_step(s.o.trace_step);
  return trace ? traced_step(s, dump) : s.trainer->step(dump);
}

// What the log line of a step reports.
struct StepReport {
  const nn::Trainer::StepStats& step;
  double tokens_per_s = 0;
  double mfu = 0;                       // when the peak is known
  std::optional<double> val;            // the held-out loss, when evaluated
  std::optional<DeviceMemoryInfo> gpu;  // on a GPU
  StepLog extra;                        // the program's and --rank-stats'
};

// The step's --metrics object.
json::Value step_metrics(const Session& s, const Window& w, const StepReport& r) {
  json::Value m = json::Object{};
  m.set("step", r.step.step);
  // JSON has no NaN nor infinity: a skipped step's are null.
  auto number = [](double x) { return std::isfinite(x) ? json::Value(x) : json::Value(); };
  m.set("loss", number(r.step.loss));
  m.set("lr", r.step.lr);
  m.set("grad_norm", number(r.step.grad_norm));
  m.set("tokens_per_s", r.tokens_per_s);
  if (s.peak.flops > 0) m.set("mfu", r.mfu);
  m.set("peak_saved_activation_bytes", w.peak_saved);
  m.set("peak_total_bytes", w.peak_total);
  if (r.val) m.set("val_loss", number(*r.val));
  const autograd::RecomputeStats& rs = autograd::recompute_stats();
  m.set("recompute_replays", rs.replays);
  m.set("recompute_seconds", rs.replay_seconds);
  m.set("recompute_mismatches", rs.mismatches);
  if (r.step.skipped) m.set("skipped", true);
  for (const auto& [key, value] : r.extra.metrics) m.set(key, value);
  if (r.gpu) m.set("device_peak_reserved_bytes", r.gpu->peak_reserved);
  return m;
}

// The step's progress line, and the lines the program adds under it.
void print_step(const Session& s, const Progress& p, const StepReport& r) {
  const nn::Trainer::StepStats& st = r.step;
  const nn::TrainConfig& c = s.config();
  std::printf("step %5lld/%lld | loss %.4f | lr %.2e | grad norm %6.3f | %7.0f tok/s",
              (long long)st.step, (long long)c.steps, st.loss, st.lr, st.grad_norm, r.tokens_per_s);
  if (s.peak.flops > 0) std::printf(" | MFU %4.1f%%", 100 * r.mfu);
  const int64_t session_end =
      s.o.stop_after > 0 ? std::min(c.steps, p.first_step - 1 + s.o.stop_after) : c.steps;
  if (session_end > st.step) {
    std::printf(" | %s", eta(session_end - st.step, p.seconds / double(p.steps)).c_str());
  }
  std::printf(" | saved act %s | mem %s", mib(p.window.peak_saved).c_str(),
              mib(p.window.peak_total).c_str());
  if (r.gpu) {
    std::printf(" | %s reserved %s", to_string(s.o.device).c_str(),
                mib(r.gpu->peak_reserved).c_str());
  }
  if (r.val) std::printf(" | val loss %.4f", *r.val);
  if (st.skipped) std::printf(" | skipped: not finite, no update");
  std::printf("%s\n", r.extra.columns.c_str());
  for (const std::string& line : r.extra.lines) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Logs a step: the program's and --rank-stats' additions, the held-out
// loss when `eval`, then (on the lead process) the progress line and the
// metrics line. Collective: every process evaluates and gathers.
void log_step(Session& s, const nn::Trainer::StepStats& step, bool eval, Progress& p) {
  StepReport r{.step = step};
  if (s.program->on_log) s.program->on_log(step, r.extra);
  if (s.o.rank_stats) {
    const parallel::GradientBuckets& buckets = s.group->buckets();
    log_ranks(*s.group, p.window.ranks, p.window.tokens / s.world->size(),
              parallel::reduction_name(buckets.reduction()), buckets.last_timing(), r.extra);
  }
  if (eval && s.data->num_val_windows(s.config().seq) > 0)
    r.val = p.last_val = s.trainer->evaluate(s.o.eval_batches);
  r.tokens_per_s = double(p.window.tokens) / p.window.seconds;
  r.mfu = s.peak.flops > 0 ? s.flops_per_token * r.tokens_per_s / s.peak.flops : 0;
  if (!s.lead) return;
  if (!s.o.device.is_cpu()) r.gpu = backend(s.o.device).memory_info();
  const json::Value m = step_metrics(s, p.window, r);
  print_step(s, p, r);
  if (s.metrics.is_open()) {
    s.metrics << json::dump(m) << "\n";
    s.metrics.flush();
  }
}

// Runs the session's steps until the run ends, --stop-after's count or a
// stop signal, logging, evaluating and saving (--save-every) on the way.
Progress run_steps(Session& s) {
  nn::Trainer& trainer = *s.trainer;
  const Options& o = s.o;
  trainer.set_on_nonfinite(o.on_nonfinite);
  autograd::set_detect_anomaly(o.detect_anomaly);
  Progress p;
  p.first_step = trainer.steps_done() + 1;
  while (!trainer.finished() && (o.stop_after == 0 || p.steps < o.stop_after) &&
         p.stop_signal == 0) {
    const nn::Trainer::StepStats step = next_step(s, p.steps);
    ++p.steps;
    p.last_loss = step.loss;
    p.seconds += step.seconds;
    p.skipped += step.skipped ? 1 : 0;
    p.window.add(step, s.group->buckets().last_timing());
    if (o.check_replicas_every > 0 && step.step % o.check_replicas_every == 0) {
      const nn::ParameterShards::Whole whole(s.trainer->parameter_shards());
      s.group->check_replicas();
    }

    p.stop_signal = stop_signal_of_any_rank(*s.group);
    const bool last =
        trainer.finished() || (o.stop_after > 0 && p.steps == o.stop_after) || p.stop_signal != 0;
    // An interrupted run leaves without evaluating.
    const bool eval =
        (o.eval_every > 0 && step.step % o.eval_every == 0) || (last && p.stop_signal == 0);
    if (!(eval || last || step.skipped || step.step == p.first_step ||
          step.step % o.log_every == 0))
      continue;
    log_step(s, step, eval, p);
    p.window = Window{};
    if (!o.save.empty() && o.save_every > 0 && step.step % o.save_every == 0 && !last) {
      nn::save_train_state(trainer, o.save, resolved_config(*s.table, o, s.args));
    }
  }
  return p;
}

// ---- the end -------------------------------------------------------------------

// The last lines: the session's steps, losses, replays and skipped steps,
// and each memory kind's peak over the last step.
void print_summary(const Session& s, const Progress& p) {
  const Options& o = s.o;
  if (!o.trace.empty() && p.steps < trace_step(o.trace_step)) {
    std::printf("trace    none written: the session ran %lld steps, --trace-step is %lld\n",
                (long long)p.steps, (long long)trace_step(o.trace_step));
  }
  const autograd::RecomputeStats& r = autograd::recompute_stats();
  std::printf("done     %lld steps in %.1f s, last loss %.4f", (long long)p.steps, p.seconds,
              p.last_loss);
  if (p.last_val) std::printf(", val loss %.4f", *p.last_val);
  if (o.data.empty() && s.tok.is_bytes()) {
    std::printf(" (entropy rate %.3f)", s.entropy.nats_per_byte);
  } else if (o.data.empty()) {
    std::printf(" (entropy rate %.3f nats/token)", s.entropy_rate);
  }
  if (s.config().checkpointing.kind != nn::CheckpointConfig::Kind::none) {
    std::printf("; %lld region replays (%.1f s), %lld verifier mismatches", (long long)r.replays,
                r.replay_seconds, (long long)r.mismatches);
  }
  if (p.skipped > 0) {
    std::printf("; %lld step(s) skipped for a non-finite loss or gradient norm",
                (long long)p.skipped);
  }
  std::printf("\n");
  // Each kind's own peak over the last step (they need not coincide), and
  // that of everything together.
  const MemorySnapshot memory = memory_stats::snapshot(o.device);
  std::printf("memory   peaks of the last step:");
  for (size_t k = 0; k < kMemoryKindCount; ++k) {
    std::printf(" %s %s,", memory_kind_name(MemoryKind(k)), mib(memory.by_kind[k].peak).c_str());
  }
  std::printf(" all together %s\n", mib(memory.total.peak).c_str());
}

// After the last step: saves (--save), says why the session stopped,
// exports (--export) and prints the summary. Returns the exit status.
int finish(Session& s, const Progress& p) {
  const Options& o = s.o;
  const nn::Trainer& trainer = *s.trainer;
  if (!o.save.empty()) {
    nn::save_train_state(trainer, o.save, resolved_config(*s.table, o, s.args));
    if (s.lead) {
      std::printf("saved    step %lld to %s", (long long)trainer.steps_done(),
                  nn::train_state_path(o.save).c_str());
      if (trainer.optimizer().shard()) {
        std::printf(", the optimizer moments to a file per process beside it");
      }
      std::printf("\n");
    }
  }
  if (p.stop_signal != 0 && s.lead) {
    std::printf("stopped  by %s after step %lld of %lld; %s\n", signal_name(p.stop_signal),
                (long long)trainer.steps_done(), (long long)s.config().steps,
                o.save.empty() ? "not saved (no --save)"
                               : ("--resume " + o.save + " continues it").c_str());
  }
  if (!o.export_dir.empty()) {
    // Split parameters are gathered by every process; the lead writes.
    const nn::ParameterShards::Whole whole(trainer.parameter_shards());
    if (s.lead) {
      nn::save_model(trainer.model(), o.export_dir, o.export_dtype, uint64_t(o.export_shard_bytes));
      if (!s.tok.is_bytes()) export_tokenizer(s.tok, o.export_dir);
      std::printf("exported Hugging Face folder %s%s\n", o.export_dir.c_str(),
                  s.tok.is_bytes() ? "" : " with its tokenizer");
    }
  }
  // mpiexec ends every process once one exits with a non-zero status: none
  // leaves before rank 0 has written its files.
  if (p.stop_signal != 0 && s.world->size() > 1) s.world->communicator()->barrier();
  if (s.lead) print_summary(s, p);
  return p.stop_signal != 0 ? 128 + p.stop_signal : 0;
}

// A training session: set up, run and report. `config` gets the run's
// config once its Trainer is built.
int train(const Program& program, const FlagTable& table, const Options& flags_only,
          const Args& args, parallel::World& world, nn::TrainConfig& config) {
  Session s = open_session(program, table, flags_only, args, world, config);
  if (s.lead) {
    print_model_and_data(s);
    print_run_and_compute(s);
    open_metrics(s);
  }
  // Through the final save: a signal then only asks again for what is
  // already under way.
  const StopOnSignals stop_on_signals;
  const Progress p = run_steps(s);
  return finish(s, p);
}

// Each section's heading in the usage text, and a note under its flags.
struct SectionText {
  Section section;
  const char* heading;
  const char* note;
};
constexpr SectionText kSections[] = {
    {Section::command_line, "command line", ""},
    {Section::data, "data", ""},
    {Section::run, "run (a resumed run must keep these)", ""},
    {Section::model, "model (a resumed run must keep these; --init-from takes its folder's)", ""},
    {Section::compute, "compute (may change on resume)", ""},
    {Section::session, "session",
     "SIGINT or SIGTERM finishes the current step, saves it (with --save), and exits with\n"
     "status 130 (SIGINT) or 143 (SIGTERM); a second signal exits at once, without saving.\n"},
    {Section::processes, "several processes (mpirun -np N; see the README)", ""},
};

// `text` wrapped to lines of at most `width` columns, each after `indent`
// spaces but the first (which follows what is already on its line).
std::string wrapped(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line + "\n";
}

// What usage() shows as a flag's default: its note, else its value in
// `defaults` (nothing for empty text or a switch).
std::string shown_default(const Flag& f, const Options& defaults) {
  if (!f.default_note.empty() || !f.setting.get) return f.default_note;
  const json::Value v = f.setting.get(defaults);
  if (v.is_string()) return v.as_string();
  if (v.is_int()) return std::to_string(v.as_int());
  if (!v.is_number()) return "";
  char buf[400];  // fixed notation, with the fewest digits that read back as the value
  return {buf, std::to_chars(buf, buf + sizeof buf, v.as_double(), std::chars_format::fixed).ptr};
}

// A flag's usage line(s): "  --lr X   peak learning rate (0.003)".
std::string usage_line(const Flag& f, const Options& defaults) {
  constexpr size_t kIndent = 28, kWidth = 100;
  std::string head = "  " + f.name + (f.takes_value() ? " " + f.value : "");
  head += head.size() + 2 <= kIndent ? std::string(kIndent - head.size(), ' ')
                                     : "\n" + std::string(kIndent, ' ');
  const std::string shown = shown_default(f, defaults);
  return head + wrapped(f.help + (shown.empty() ? "" : " (" + shown + ")"), kIndent, kWidth);
}

}  // namespace

std::string usage(const Program& p) {
  const FlagTable table = all_flags(p);
  Options defaults;
  defaults.config = p.defaults;
  std::string out = "usage: " + p.name + " [flags]\n\n" + p.summary;
  for (const SectionText& section : kSections) {
    out += std::string(section.heading) + "\n";
    for (const Flag& f : table) {
      if (f.section == section.section) out += usage_line(f, defaults);
    }
    out += section.note;
  }
  return out;
}

int run_program(const Program& program, int argc, char** argv) {
  const char* name = program.name.c_str();
  // The flags first: the World needs --comm-timeout, and only rank 0 prints
  // a usage error (every rank has the same command line).
  Options o;
  Args args;
  std::optional<UsageError> bad;
  FlagTable table;
  try {
    table = all_flags(program);
    args = with_config_file(program, table, split_args(table, argc, argv));
    o.config = program.defaults;
    apply_flags(table, args, o);
  } catch (const UsageError& e) {
    bad = e;
  }
  std::unique_ptr<parallel::World> world;
  nn::TrainConfig session = o.config;
  try {
    world = std::make_unique<parallel::World>(o.comm_timeout);
    if (bad) throw *bad;
    if (o.help) {
      if (world->rank() == 0) std::fputs(usage(program).c_str(), stdout);
      return 0;
    }
    return train(program, table, o, args, *world, session);
  } catch (const UsageError& e) {
    if (!world || world->rank() == 0)
      std::fprintf(stderr, "%s: %s\n(%s --help lists the flags)\n", name, e.what(), name);
    return 2;
  } catch (const std::exception& e) {
    if (world && world->size() > 1) {
      // The others would wait for this rank until their timeout: end them.
      std::fprintf(stderr, "%s (rank %d of %d): error: %s\n", name, world->rank(), world->size(),
                   e.what());
      std::fflush(stderr);
      world->abort(1);
    }
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    if (const auto* oom = dynamic_cast<const OutOfMemoryError*>(&e))
      std::fprintf(stderr, "%s\n", out_of_memory_hint(*oom, session).c_str());
    return 1;
  }
}

}  // namespace reprise::train_cli
