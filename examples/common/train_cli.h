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
// Under an MPI launcher (mpirun -np N <trainer> ...) the N processes train
// one model (parallel/process_group.h): --batch is per process, rank 0
// prints the log and writes metrics, checkpoints and exports, and an error
// on any rank ends every rank.

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/json.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "nn/trainer.h"

namespace reprise::train_cli {

// A bad command line: the program exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Flag values. Each raises a UsageError naming `flag` and the value when it
// is not what is expected.
int64_t parse_int(const std::string& flag, const std::string& v);
int64_t parse_positive(const std::string& flag, const std::string& v);  // >= 1
int64_t parse_count(const std::string& flag, const std::string& v);     // >= 0
double parse_real(const std::string& flag, const std::string& v);       // finite

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
  bool expert_parallel = false;      // moe_train's --expert-parallel
  int64_t bucket_kib = 1024;         // gradient bucket size
  double comm_timeout = 300;         // seconds a rank waits for the others
  int64_t check_replicas_every = 0;  // steps; 0: never
  bool rank_stats = false;
};

// One flag: whether it takes a value, and what it does to the options.
struct Flag {
  bool takes_value;
  std::function<void(Options&, const std::string&)> apply;
};
using FlagTable = std::map<std::string, Flag>;

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
  std::string name;           // "llama_train": the usage line and messages
  std::string summary;        // the usage text's paragraph under the usage line
  std::string hf_model;       // "Llama": the Hugging Face model family, for --init-from's text
  std::string run_usage;      // usage lines of the program's own run flags
  std::string compute_usage;  // usage lines of the program's own compute flags
  nn::TrainConfig defaults;   // the config with no flags
  FlagTable flags;            // the program's own flags, beside the common ones
  // Of the program's own flags: those that set the architecture (refused
  // with --init-from, whose config.json sets it) and those that may change
  // on resume.
  std::vector<std::string> architecture_flags, compute_flags;
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
