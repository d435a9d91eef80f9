// The trainers' flags (train_cli.h's rows), the options they give, and
// the usage text.

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>

#include "base/error.h"
#include "engine/memory_limit.h"
#include "engine/threads.h"
#include "examples/common/config_file.h"
#include "examples/common/train_session.h"
#include "io/tokenizer.h"
#include "nn/hf.h"

namespace reprise::train_cli {

namespace {

using cli::Args, cli::UsageError, cli::parse_int, cli::parse_positive, cli::parse_count,
    cli::parse_real, cli::text, cli::switch_on;

// ---- flag values ---------------------------------------------------------------

// A run setting's value (nn/train_settings.h), by its type.
template <class T>
T parse_setting(const std::string& flag, const std::string& v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return parse_int(flag, v);
  } else if constexpr (std::is_same_v<T, double>) {
    return parse_real(flag, v);
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return cli::parse_seed(flag, v);
  } else {
    static_assert(std::is_same_v<T, DType>);
    return cli::parse_run_dtype(flag, v);
  }
}

DType parse_export_dtype(const std::string& flag, const std::string& v) {
  const std::optional<DType> dtype = v == "f16" ? DType::f16 : nn::run_dtype_named(v);
  if (!dtype) throw UsageError(flag + ": expected f32, bf16 or f16, got " + v);
  return *dtype;
}

// The parsers of the trainers' other flags whose values are not plain
// numbers or text. Each raises a UsageError naming `flag` and the value
// when it is not what is expected.
int parse_noise_ulps(const std::string& flag, const std::string& v) {
  const int64_t k = parse_count(flag, v);
  if (k > std::numeric_limits<int>::max()) throw UsageError(flag + ": too large: " + v);
  return int(k);
}

// The threads the session runs: --threads', else REPRISE_NUM_THREADS or
// all cores.
json::Value show_threads(int) { return threads::num_threads(); }

json::Value show_trace_step(int64_t given) { return trace_step(given); }

int64_t parse_shard_size(const std::string& flag, const std::string& v) {
  const int64_t bytes = cli::usage_checked([&] { return memory_limit::parse_bytes(v, flag); });
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
      {"--chunk-states", "M", S::compute,
       "save | recompute: where the policy saves a DeltaNet layer's recurrence (op-sac), its "
       "chunk states too, or recompute them in backward",
       parsed(&CheckpointConfig::save_chunk_states, cli::parse_save_or_recompute,
              cli::show_save_or_recompute)},
  };
}

// This session: device, threads, logs, checkpoints, imports and exports.
FlagTable session_flags(const Program& program) {
  using S = Section;
  return {
      {"--device", "D", S::session,
       "where the model, its gradients and the optimizer state live (their checkpoints are the "
       "same files on every device): cpu, cuda or cuda:N",
       parsed(&Options::device, cli::parse_device_flag, cli::show_device)},
      {"--threads", "N", S::session, "CPU threads",
       parsed(&Options::threads, cli::parse_threads, show_threads),
       "REPRISE_NUM_THREADS or all cores"},
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
       parsed(&Options::export_dtype, parse_export_dtype, cli::show_dtype)},
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

// The names of the flags of `section`, in table order.
std::vector<std::string> names_in(const FlagTable& table, Section section) {
  std::vector<std::string> out;
  for (const Flag& f : table) {
    if (f.section == section) out.push_back(f.name);
  }
  return out;
}

// Whether a flag of `section` sets the run's config (TrainConfig).
bool sets_run_config(Section section) {
  return section == Section::run || section == Section::model || section == Section::compute;
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

// Each section's heading in the usage text, and a note under its flags.
const std::vector<cli::SectionText<Section>> kSections = {
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

}  // namespace

int64_t trace_step(int64_t given) { return given > 0 ? given : 2; }

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

std::string usage(const Program& p) {
  const FlagTable table = all_flags(p);
  Options defaults;
  defaults.config = p.defaults;
  return cli::usage("usage: " + p.name + " [flags]\n\n" + p.summary, table, kSections, defaults);
}

}  // namespace reprise::train_cli
