#pragma once
// The parts of a trainer's session (examples/common/train_cli.h) that its
// files share: the flags and the options they give (train_flags.cpp), the
// log lines and metrics (train_log.cpp), and the session and its steps
// (train_cli.cpp).

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory_limit.h"
#include "engine/memory_stats.h"
#include "examples/common/cli.h"
#include "examples/common/train_cli.h"
#include "io/json.h"
#include "nn/data.h"
#include "nn/train_state.h"
#include "parallel/process_group.h"
#include "parallel/world.h"

namespace reprise::train_cli {

// The machine's peak rate, for MFU: its figure and how it was found.
struct Peak {
  double flops = 0;  // FLOP/s of the projections' dtype; 0 when unknown
  std::string how;
};

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

// A training session, set up by open_session: its checked options, data,
// processes and trainer, and the figures its log lines share.
struct Session {
  const Program* program = nullptr;
  const FlagTable* table = nullptr;  // the program's flags
  Options o;
  cli::Args args;  // the config file's and the command line's flags (resolved_config)
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

// What the log line of a step reports.
struct StepReport {
  const nn::Trainer::StepStats& step;
  double tokens_per_s = 0;
  double mfu = 0;                       // when the peak is known
  std::optional<double> val;            // the held-out loss, when evaluated
  std::optional<DeviceMemoryInfo> gpu;  // on a GPU
  StepLog extra;                        // the program's and --rank-stats'
};

// ---- the flags and options (train_flags.cpp) -----------------------------------

// Every flag of `program`: the common ones and its own.
FlagTable all_flags(const Program& program);

// --trace-step's step (`given`), counted from 1: by default the second,
// since the first warms up.
int64_t trace_step(int64_t given);

// --config FILE: the file's settings, each checked by its flag's parser
// (an error names the file, line and key), then `args`, which therefore
// override them.
cli::Args with_config_file(const Program& program, const FlagTable& table, const cli::Args& args);

// The session's resolved settings, for the metrics file's first line and
// the training checkpoint.
json::Value resolved_config(const FlagTable& table, const Options& o, const cli::Args& args);

// The options of a session, checked and completed: a resumed run's config
// with the command line's compute flags on top, or an HF folder's
// architecture.
Options session_options(const Program& program, const FlagTable& table, const Options& flags_only,
                        const cli::Args& args, std::optional<nn::TrainStateInfo>& resumed);

// The options that depend on the number of processes.
void check_processes(const Options& o, const std::optional<nn::TrainStateInfo>& resumed, int ranks);

// ---- the log (train_log.cpp) ---------------------------------------------------

Peak machine_peak(int cores, DType dtype);
Peak device_peak(Device device, DType dtype);
std::string mib(int64_t bytes);  // "12.3 MiB"

// What to try after running out of memory.
std::string out_of_memory_hint(const OutOfMemoryError& e, const nn::TrainConfig& session);

// --rank-stats: one line and metrics per process.
void log_ranks(nn::TrainGroup& group, const RankWindow& w, int64_t tokens_per_rank,
               const char* reduction, const parallel::GradientBuckets::Timing& last, StepLog& log);

// The head of the log.
void print_model_and_data(const Session& s);
void print_run_and_compute(const Session& s);

// A logged step: its --metrics object and its progress line.
json::Value step_metrics(const Session& s, const Window& w, const StepReport& r);
void print_step(const Session& s, const Progress& p, const StepReport& r);

// The last lines.
void print_summary(const Session& s, const Progress& p);

}  // namespace reprise::train_cli
