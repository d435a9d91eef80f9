#pragma once
// The command line of the example trainers (llama_train, moe_train) around
// nn::Trainer (nn/trainer.h): flags and their parsing, the usage text,
// progress lines, metrics JSONL, evaluation, training checkpoints (save,
// resume), Hugging Face import and export, and the gradient dump.
//
// A trainer binary is a Program: its name, the parts of its usage text that
// are its own, its default config, its own flags and what it adds to a
// logged step. run_program() does everything else, the same way for every
// trainer.
//
// Each flag is one row of a table (Flag, examples/common/cli.h): its name,
// the value it takes, its section, its help and where its value goes. The
// usage text, the config file's keys (examples/common/config_file.h), the
// resolved config and what a resume or --init-from may change all come from
// the rows. The run's settings (nn/train_settings.h) are rows there, and
// become flags here.
//
// Under an MPI launcher (mpirun -np N <trainer> ...) the N processes train
// one model (parallel/process_group.h): --batch is per process, rank 0
// prints the log and writes metrics, checkpoints and exports, and an error
// on any rank ends every rank.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "examples/common/cli.h"
#include "io/json.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "nn/trainer.h"
#include "parallel/process_group.h"

namespace reprise::train_cli {

// What a command line asks for: the run's config and this session's options.
struct Options {
  nn::TrainConfig config;
  std::string config_file;  // --config FILE.toml (examples/common/config_file.h)
  std::string data, tokenizer, metrics, save, resume, init_from, export_dir, dump_grads;
  DType export_dtype = DType::f32;                         // --export's weights
  int64_t export_shard_bytes = nn::kDefaultMaxShardBytes;  // --export's shards at most
  int64_t save_every = 0, log_every = 10, eval_every = 100, eval_batches = 4, stop_after = 0;
  std::string trace;       // --trace: a Chrome/Perfetto trace of one step
  int64_t trace_step = 0;  // of the session, from 1; 0: the second (the first warms up)
  int threads = 0;
  Device device = Device::cpu();  // where the model trains (--device)
  bool help = false;
  // A step with a non-finite loss or gradient norm, and anomaly detection.
  nn::OnNonFinite on_nonfinite = nn::OnNonFinite::stop;
  bool detect_anomaly = false;
  // Several processes.
  bool expert_parallel = false;                           // moe_train's --expert-parallel
  parallel::ShardMode shard = parallel::ShardMode::none;  // --shard
  int64_t bucket_kib = 1024;                              // gradient bucket size
  double comm_timeout = 300;                              // seconds a rank waits for the others
  int64_t check_replicas_every = 0;                       // steps; 0: never
  bool rank_stats = false;
};

// Where usage() lists a flag, and what it sets: the run's config (run,
// model and compute: TrainConfig, the resolved config's "train") or this
// session's options (the others: the resolved config's "session").
enum class Section {
  command_line,  // flags a config file cannot give: --help, --config
  data,          // what the run trains on
  run,           // what the run computes: a resumed run keeps it
  model,         // the architecture: kept on resume; --init-from's config.json sets it
  compute,       // how the run computes: may change on resume
  session,       // this session: devices, logs, files
  processes,     // several processes
};

// One flag of a trainer (examples/common/cli.h): its usage line, its
// config-file key (the name without its dashes), its entry in the resolved
// config and its parsing all come from this row.
using Setting = cli::Setting<Options>;
using Flag = cli::Flag<Options, Section>;
// A program's flags, in usage order.
using FlagTable = std::vector<Flag>;

// The part of the options that holds members of Root: the options
// themselves, the run's config, or its model's, checkpointing's or MoE
// layers' config (a UsageError for a model without MoE layers).
template <class Root, class O>
auto& root_of(O& o) {
  if constexpr (std::is_same_v<Root, Options>) {
    return o;
  } else if constexpr (std::is_same_v<Root, nn::TrainConfig>) {
    return o.config;
  } else if constexpr (std::is_same_v<Root, nn::LlamaConfig>) {
    return o.config.model;
  } else if constexpr (std::is_same_v<Root, nn::CheckpointConfig>) {
    return o.config.checkpointing;
  } else {
    static_assert(std::is_same_v<Root, nn::MoeConfig>);
    if (!o.config.model.moe)
      throw cli::UsageError("the model has no MoE layers (a dense Llama run)");
    return *o.config.model.moe;
  }
}

// A value that `parse` (parse_int, parse_real, ...) reads into `field`,
// shown by `show`; without one, as it is (a number).
template <class Root, class T>
Setting parsed(T Root::*field, T (*parse)(const std::string& flag, const std::string& value),
               std::type_identity_t<json::Value (*)(T)> show = nullptr) {
  return {[field, parse](Options& o, const std::string& flag, const std::string& value) {
            root_of<Root>(o).*field = parse(flag, value);
          },
          [field, show](const Options& o) {
            if constexpr (std::is_constructible_v<json::Value, T>) {
              if (show == nullptr) return json::Value(root_of<Root>(o).*field);
            }
            return show(root_of<Root>(o).*field);
          }};
}
// What a program adds to a logged step: `columns` are appended to the step
// line (" | aux 0.012"), `lines` are printed under it and `metrics` are
// appended to the step's JSONL object. The hook runs right after the step,
// before any evaluation, so the model's state is the training step's.
struct StepLog {
  std::string columns;
  std::vector<std::string> lines;
  json::Object metrics;
};
using LogHook = std::function<void(const nn::Trainer::StepStats& step, StepLog& log)>;

struct Program {
  std::string name;          // "llama_train": the usage line and messages
  std::string summary;       // the usage text's paragraph under the usage line
  std::string hf_model;      // "Llama": the Hugging Face model family, for --init-from's text
  nn::TrainConfig defaults;  // the config with no flags
  // The program's own flags, beside the common ones. Their sections say
  // what --resume and --init-from do with them: model flags are refused
  // with --init-from (its config.json sets the architecture), compute
  // flags may change on resume, and run flags may not.
  FlagTable flags;
  // With --init-from: copies the command line's training-only model
  // settings onto the folder's config (settings that a Hugging Face
  // config.json lacks, or carries only as reprise's own fields). The
  // residual and attention dropout rates are copied for every program.
  std::function<void(const nn::LlamaConfig& flags, nn::LlamaConfig& folder)> keep_on_init;
  LogHook on_log;  // may be empty
};

// The full usage text of `program`.
std::string usage(const Program& program);

// Parses argv, runs the training session and prints its progress; returns
// the exit status: 0, 2 for a bad command line, 1 for any other error, and
// 128 + the signal (130, 143) when SIGINT or SIGTERM stopped the run after
// a step (saved when --save is set).
int run_program(const Program& program, int argc, char** argv);

}  // namespace reprise::train_cli
