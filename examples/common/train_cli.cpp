// A trainer's session (train_cli.h): set up from the options, its steps
// (logged, evaluated, saved, traced, interrupted by a signal), its end
// (save, export, summary), and run_program around them.

#include "examples/common/train_cli.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>

#include "autograd/anomaly.h"
#include "autograd/checkpoint.h"
#include "autograd/tracer.h"
#include "base/error.h"
#include "engine/backend.h"
#include "engine/threads.h"
#include "examples/common/train_session.h"
#include "io/tokenizer.h"
#include "nn/hf.h"

namespace reprise::train_cli {

namespace {

using cli::Args, cli::UsageError;

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

}  // namespace

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
