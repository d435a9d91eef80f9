// checkpoint_study: the scenarios of the preserve_rng_state debate, run on a
// small Llama and a small MoE with dropout on, in one command. For each
// scenario (model, checkpoint policy, RNG replay mode, verifier, recompute
// noise, router saved or recomputed) it runs one training step from the same
// weights, batch and generator state as a step without checkpointing, and
// reports how far the gradients are from that reference, whether they are
// bitwise equal, how much routing changed on recompute, the peak
// saved-activation bytes, the step time, the RNG state stashed and what the
// verifier saw. Then it trains the small Llama a few hundred steps with
// correct and with fresh (wrong) recompute randomness and compares the loss
// curves. docs/checkpointing-study.md explains the results.
//
//   checkpoint_study [--out DIR] [--quick] [--threads N] [--device D] [--dtype T]
//                    [--model DIR [--train-steps N] [--load-balance-coeff X]]
//   mpiexec -np R checkpoint_study --fsdp [--out DIR] [--quick] [--threads N]
//
// --model runs the same scenarios on any family's model instead: the one
// DIR/config.json describes (with the folder's weights when it has them),
// and for an MoE model a sweep of router noise with the gate in f32 and
// bf16, after --train-steps of training without and (with a routing bias,
// DeepSeek-V3's) with auxiliary-loss-free balancing. Every MoE model also
// gets its routing margins per layer: the share of tokens within 1, 16 and
// 256 ulps of choosing another expert.
//
// --fsdp, under mpiexec with 2 or more processes, runs the FSDP rows
// instead (examples/checkpoint_study/fsdp.h): the Llama trained with its
// weights split over the processes under none, full and op-SAC
// checkpointing, the bytes a replay gathers again, and the peaks.
//
// --out writes DIR/table.md, DIR/table.csv and DIR/loss_curves.csv (with
// --fsdp, DIR/fsdp.md). Every
// run checks the study's claims (recorded and stash replay bitwise equal to
// no checkpointing, fresh replay with dropout not, a saved router never
// re-routes, ...) and exits 1 when one fails; --quick runs the same checks
// on a tiny model in well under a second.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/device.h"
#include "engine/threads.h"
#include "examples/common/cli.h"
#include "fsdp.h"
#include "io/write_file.h"
#include "loss_curves.h"
#include "nn/data.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "nn/moe.h"
#include "nn/trainer.h"
#include "parallel/world.h"
#include "report.h"
#include "step_measure.h"

namespace {

using namespace reprise;
using autograd::RngReplay;
using autograd::Verify;

using cli::UsageError;

struct Options {
  std::string out;
  bool quick = false;
  int threads = 1;
  Device device = Device::cpu();
  DType dtype = DType::f32;
  std::string model_dir;  // empty: the built-in models
  int64_t train_steps = 0;
  double load_balance_coeff = 1e-3;
  bool fsdp = false;
  bool help = false;
};

enum class Section { study, model, session };

using Flag = cli::Flag<Options, Section>;

int64_t parse_train_steps(const std::string& flag, const std::string& v) {
  const int64_t n = cli::parse_count(flag, v);
  if (n > 1'000'000) throw UsageError(flag + ": at most 1000000, got " + v);
  return n;
}

double parse_coeff(const std::string& flag, const std::string& v) {
  const double x = cli::parse_real(flag, v);
  if (x <= 0) throw UsageError(flag + ": expected a positive number, got '" + v + "'");
  return x;
}

std::vector<Flag> flags() {
  using S = Section;
  using cli::parsed, cli::text, cli::switch_on;
  return {
      {"--out", "DIR", S::study,
       "write DIR/table.md, DIR/table.csv and DIR/loss_curves.csv (with --fsdp, DIR/fsdp.md)",
       text(&Options::out)},
      {"--quick", "", S::study, "a tiny model and a few steps (a smoke test: seconds)",
       switch_on(&Options::quick)},
      {"--fsdp", "", S::study,
       "under mpiexec with 2 or more processes: the Llama with its weights split over them "
       "(--shard parameters) under none, full and op-SAC checkpointing: the bytes gathered, those "
       "a replay gathers again, the peaks, and the losses against replicated weights",
       switch_on(&Options::fsdp)},
      {"--model", "DIR", S::model,
       "the model of a Hugging Face folder (config.json; its weights when it has them) instead "
       "of the built-in ones; any family, with a vocabulary of at least 256 (the data is bytes)",
       text(&Options::model_dir)},
      {"--train-steps", "N", S::model, "also measure the MoE models after N steps of training",
       parsed(&Options::train_steps, parse_train_steps)},
      {"--load-balance-coeff", "X", S::model,
       "with --train-steps and a model with a routing bias (DeepSeek-V3): train once more with "
       "auxiliary-loss-free balancing at X",
       parsed(&Options::load_balance_coeff, parse_coeff)},
      {"--dtype", "D", S::model,
       "f32 | bf16: precision of the projections; bf16 runs them on bf16 copies of activations "
       "and weights with f32 masters",
       parsed(&Options::dtype, cli::parse_run_dtype, cli::show_dtype)},
      {"--threads", "N", S::session,
       "CPU threads; times are process CPU time, so more threads add their synchronisation to "
       "the step time",
       parsed(&Options::threads, cli::parse_threads)},
      {"--device", "D", S::session,
       "cpu, cuda or cuda:N: where the models run; on a GPU step times are wall time, the "
       "device waited for",
       parsed(&Options::device, cli::parse_device_flag, cli::show_device)},
      {"--help", "", S::session, "this text", {switch_on(&Options::help).set, nullptr}},
  };
}

std::string usage() {
  const std::vector<cli::SectionText<Section>> sections = {
      {Section::study, "study"}, {Section::model, "models"}, {Section::session, "session"}};
  return cli::usage(R"(usage: checkpoint_study [flags]
       mpiexec -np R checkpoint_study --fsdp [--out DIR] [--quick] [--threads N]

Runs the activation-checkpointing scenarios (policy x RNG replay mode x verifier
x recompute noise x router saved or recomputed) on a small Llama and a small
MoE with dropout, prints the table, trains the Llama with correct and with
fresh recompute randomness, and checks the claims (exit 1 when one fails).

)",
                    flags(), sections, Options{});
}

// The command line's options, checked.
Options parse_flags(int argc, char** argv) {
  const Options o = cli::parse(flags(), argc, argv);
  if (o.help) return o;
  if (o.model_dir.empty() && o.train_steps > 0) throw UsageError("--train-steps needs --model");
  if (o.fsdp && (!o.model_dir.empty() || !o.device.is_cpu() || o.dtype != DType::f32))
    throw UsageError("--fsdp runs the built-in Llama in f32 on the CPU");
  return o;
}

// The sizes of a study run.
struct Sizes {
  nn::LlamaConfig dense;  // dropout set per model below
  int64_t batch, seq;     // of the measured step
  int repeats;            // timed repeats per scenario
  nn::MoeConfig moe;      // the MoE models' layers
  int64_t expert_ffn;     // their experts' intermediate size
  int noise_draws;        // noise seeds per noisy scenario
  nn::TrainConfig curves;
  int64_t eval_batches;
};

// The study's model: hidden 64, 4 layers (quick: 32, 2), byte vocabulary.
Sizes sizes(bool quick) {
  Sizes s;
  nn::LlamaConfig& c = s.dense;
  c.vocab_size = nn::kByteVocabSize;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5;
  c.hidden_size = quick ? 32 : 64;
  c.intermediate_size = quick ? 64 : 176;
  c.num_hidden_layers = quick ? 2 : 4;
  c.num_attention_heads = quick ? 2 : 4;
  c.num_key_value_heads = quick ? 1 : 2;
  s.batch = quick ? 2 : 8;
  s.seq = quick ? 32 : 64;
  s.repeats = quick ? 1 : 5;
  s.moe.num_local_experts = quick ? 4 : 8;
  s.moe.num_experts_per_tok = 2;
  s.expert_ffn = quick ? 32 : 64;
  s.noise_draws = quick ? 1 : 8;
  s.curves.model = c;
  s.curves.model.dropout = 0.1;
  s.curves.model.attention_dropout = 0.1;
  s.curves.steps = quick ? 4 : 300;
  s.curves.batch = s.batch;
  s.curves.seq = s.seq;
  s.curves.warmup = quick ? 1 : 20;
  s.eval_batches = quick ? 1 : 8;
  return s;
}

struct Model {
  std::string label;  // "llama p=0.1"
  nn::LlamaConfig config;
  // Its weights; null: initialised from the study's seed as HF does.
  std::shared_ptr<const study::NamedTensors> weights;
};

enum class Expect { equal, differs };
// MoE models: whether checkpointed layers force-save the router
// (ActivationCheckpointing::save_router) and where noise is injected.
enum class Router { saved, recomputed };
enum class NoiseOn { all, router };

struct Scenario {
  size_t model;        // index into the models
  std::string policy;  // ActivationCheckpointing::parse form; "budget": half the reference's peak
  RngReplay rng;
  Verify verify;
  int noise_ulps;
  Expect expect;  // against the same model without checkpointing
  bool quick;     // also part of --quick
  std::string what;
  Router router = Router::saved;
  NoiseOn noise_on = NoiseOn::all;
  // DeltaNet models: whether the policy's saved recurrences keep their
  // chunk states (CheckpointConfig::save_chunk_states).
  bool chunk_states_saved = true;
};

// What a replay changed in the routing, from the verifier's reports on
// moe_route's outputs, summed over layers: `slots` counts (token, top-k
// slot) entries of the indices output (1) whose expert differs (a token
// whose two experts swap rank counts 2), `experts` the experts whose kept
// token count (the counts output, 3) differs: torchtitan's symptom.
struct RoutingChange {
  int64_t slots = 0;
  int64_t experts = 0;
};
RoutingChange routing_change(const std::vector<autograd::Mismatch>& mismatches) {
  RoutingChange c;
  for (const autograd::Mismatch& m : mismatches) {
    if (m.op != "moe_route") continue;
    if (m.output == 1) c.slots += m.differing;
    if (m.output == 3) c.experts += m.differing;
  }
  return c;
}

std::string mismatch_summary(const autograd::Mismatch& m) {
  char buf[96];
  std::snprintf(buf, sizeof buf, ": %lld elements, %.3g ulp", (long long)m.differing, m.max_ulp);
  return m.scope + " " + m.op + buf;
}

// One claim and whether it held.
struct Claim {
  std::string text;
  bool holds;
};

// A scenario's checkpointing, and the policy and noise as its table row
// names them. `ref` is the model's reference step (a budget is half its
// peak).
struct ScenarioSetup {
  nn::CheckpointConfig checkpointing;
  std::string policy, noise;
};
ScenarioSetup scenario_setup(const Scenario& s, const Model& model,
                             const study::StepMeasurement& ref) {
  std::string policy = s.policy;
  if (policy == "budget") {
    policy = "budget:" + std::to_string(ref.peak_saved_activation / 2 / 1024) + "K";
  }
  nn::CheckpointConfig ac = nn::CheckpointConfig::parse(policy);
  ac.rng_replay = s.rng;
  ac.verify = s.verify;
  ac.recompute_noise_ulps = s.noise_ulps;
  ac.on_mismatch = autograd::OnMismatch::report;
  ac.save_router = s.router == Router::saved;
  ac.save_chunk_states = s.chunk_states_saved;
  if (!s.chunk_states_saved) policy += ", chunk states recomputed";
  std::string noise = std::to_string(s.noise_ulps);
  if (model.config.moe) {
    policy += s.router == Router::saved ? ", router saved" : ", router recomputed";
    if (s.noise_ulps > 0) noise += s.noise_on == NoiseOn::all ? " (all)" : " (router)";
    if (s.noise_on == NoiseOn::router) {
      ac.noise_scopes = nn::router_scopes(nn::moe_scopes_of(model.config));
    }
  }
  return {ac, policy, noise};
}

// A scenario's steps against the reference: the timed one, and what
// `draws` noise seeds (the first is the timed step's) do on average.
struct Outcome {
  study::StepMeasurement timed;
  bool equal_bits = true;                                     // for every draw
  double max_abs = 0;                                         // the largest
  double rel_l2 = 0, slots = 0, experts = 0, mismatches = 0;  // the means
};
Outcome measure_scenario(study::StepBench& bench, nn::CheckpointConfig ac, int draws, int repeats,
                         const study::StepMeasurement& ref) {
  Outcome out{.timed = bench.run(ac, 1, repeats)};
  for (int d = 0; d < draws; ++d) {
    ac.noise_seed = autograd::CheckpointOptions{}.noise_seed + uint64_t(d);
    const study::StepMeasurement md = d == 0 ? out.timed : bench.run(ac, 0, 1);
    const study::GradientError e = study::compare(md, ref);
    const RoutingChange routing = routing_change(md.mismatches);
    out.equal_bits = out.equal_bits && e.bitwise_equal;
    out.max_abs = std::max(out.max_abs, e.max_abs);
    out.rel_l2 += e.rel_l2 / draws;
    out.slots += double(routing.slots) / draws;
    out.experts += double(routing.experts) / draws;
    out.mismatches += double(md.stats.mismatches) / draws;
  }
  return out;
}

// The claims a scenario's outcome checks; `name` names the scenario.
void add_claims(const Scenario& s, bool moe, const std::string& name, const Outcome& out,
                std::vector<Claim>& claims) {
  const bool equal = s.expect == Expect::equal;
  claims.push_back({name + (equal ? ": gradients bitwise equal to no checkpointing"
                                  : ": gradients differ from no checkpointing"),
                    out.equal_bits == equal});
  if (s.verify == Verify::bitwise) {
    claims.push_back({name + ": the verifier reports " + (equal ? "nothing" : "a mismatch"),
                      (out.mismatches == 0) == equal});
  }
  if (s.verify == Verify::metadata) {
    claims.push_back({name + ": the metadata verifier reports nothing", out.mismatches == 0});
  }
  if (moe && (s.router == Router::saved || s.noise_ulps == 0) && s.rng != RngReplay::fresh) {
    claims.push_back({name + ": routing unchanged", out.slots == 0 && out.experts == 0});
  }
  claims.push_back(
      {name + (s.rng == RngReplay::stash ? ": RNG state stashed" : ": no RNG state stashed"),
       (out.timed.stats.rng_bytes_stashed > 0) == (s.rng == RngReplay::stash)});
}

// The model's reference step (no checkpointing), then each scenario's
// step against it: one table row and the claims it checks per scenario.
// Returns the reference step's routing, per MoE layer.
std::vector<nn::MoeLayerStats> measure_model(const Model& model,
                                             const std::vector<Scenario>& scenarios,
                                             const nn::TextDataset& data, const Sizes& sz,
                                             uint64_t seed, Device device, DType dtype,
                                             std::vector<study::Row>& rows,
                                             std::vector<Claim>& claims) {
  const bool moe = model.config.moe.has_value();
  study::StepBench bench(model.config, data, sz.batch, sz.seq, seed, device, dtype,
                         model.weights.get());
  const study::StepMeasurement ref = bench.run(nn::CheckpointConfig::parse("none"), 1, sz.repeats);
  rows.push_back({model.label, "none", "recorded", "none", "0", "reference: no checkpointing", 0, 0,
                  true, moe ? 0.0 : -1.0, moe ? 0.0 : -1.0, ref.peak_saved_activation, ref.seconds,
                  0, 0, ""});
  for (const Scenario& s : scenarios) {
    const ScenarioSetup setup = scenario_setup(s, model, ref);
    // Noise is one draw per (noise seed, node, element): average what it
    // does over several seeds. The first draw is the timed one.
    const int draws = s.noise_ulps > 0 ? sz.noise_draws : 1;
    const Outcome out = measure_scenario(bench, setup.checkpointing, draws, sz.repeats, ref);
    const study::StepMeasurement& m = out.timed;
    study::Row r{model.label,
                 setup.policy,
                 autograd::rng_replay_name(s.rng),
                 autograd::verify_name(s.verify),
                 setup.noise,
                 s.what,
                 out.max_abs,
                 out.rel_l2,
                 out.equal_bits,
                 moe ? out.slots : -1,
                 moe ? out.experts : -1,
                 m.peak_saved_activation,
                 m.seconds,
                 m.stats.rng_bytes_stashed,
                 out.mismatches,
                 m.mismatches.empty() ? "" : mismatch_summary(m.mismatches.front())};
    add_claims(s, moe,
               model.label + ", " + setup.policy + ", " + r.rng + ", verify " + r.verifier +
                   ", noise " + setup.noise,
               out, claims);
    rows.push_back(std::move(r));
    std::printf(".");
    std::fflush(stdout);
  }
  return ref.moe;
}

// ---- the models ----------------------------------------------------------------

// The built-in models: the small Llama without and with dropout, and the
// same with Mixtral-style MoE layers, its gate in f32 and in bf16.
std::vector<Model> builtin_models(const Sizes& sz) {
  nn::LlamaConfig plain = sz.dense, dropout = sz.dense;
  dropout.dropout = 0.1;
  dropout.attention_dropout = 0.1;
  nn::LlamaConfig moe = dropout;
  moe.intermediate_size = sz.expert_ffn;
  moe.family = nn::Family::mixtral;
  moe.moe = sz.moe;
  nn::LlamaConfig moe_bf16 = moe;
  moe_bf16.moe->router_dtype = nn::RouterDType::bf16;
  return {{"llama p=0", plain, nullptr},
          {"llama p=0.1", dropout, nullptr},
          {"moe p=0.1", moe, nullptr},
          {"moe p=0.1 bf16 gate", moe_bf16, nullptr}};
}

bool has_weights(const std::string& dir) {
  namespace fs = std::filesystem;
  return fs::exists(fs::path(dir) / "model.safetensors") ||
         fs::exists(fs::path(dir) / "model.safetensors.index.json");
}

// The model's state, detached from it (the tensors outlive the model).
std::shared_ptr<const study::NamedTensors> state_of(const nn::Module& model) {
  auto out = std::make_shared<study::NamedTensors>();
  for (const auto& [name, value] : model.named_state()) out->emplace_back(name, value.detach());
  return out;
}

// The model of a folder, as the built-in ones: without and with dropout
// and, for an MoE model, the gate in f32 and in bf16; with train_steps the
// MoE models again after that many steps of training from the same start,
// and (for a model with a routing bias, DeepSeek-V3's) once more with
// auxiliary-loss-free balancing.
std::vector<Model> folder_models(const Options& o, const Sizes& sz,
                                 const std::shared_ptr<const nn::TextDataset>& data,
                                 uint64_t seed) {
  const std::string where = o.model_dir + "/config.json";
  const nn::ModelConfigFile file = nn::read_model_config_file(o.model_dir);
  const std::string unknown = nn::unknown_fields_warning(file, where);
  if (!unknown.empty()) std::fprintf(stderr, "warning: %s\n", unknown.c_str());
  const nn::LlamaConfig plain = file.config;
  REPRISE_CHECK(plain.vocab_size >= nn::kByteVocabSize, where, ": vocab_size is ", plain.vocab_size,
                "; the study's data is bytes, which needs at least ", nn::kByteVocabSize);
  REPRISE_CHECK(plain.max_sequence_length() >= sz.seq, where, ": the model takes sequences of ",
                plain.max_sequence_length(), " tokens at most; the study's are ", sz.seq);
  std::shared_ptr<const study::NamedTensors> weights;
  if (has_weights(o.model_dir)) weights = state_of(*nn::load_model(o.model_dir));

  const std::string family = plain.info().model_type;
  nn::LlamaConfig dropout = plain;
  dropout.dropout = 0.1;
  dropout.attention_dropout = 0.1;
  std::vector<Model> models{{family + " p=0", plain, weights},
                            {family + " p=0.1", dropout, weights}};
  if (!plain.moe) return models;
  nn::LlamaConfig bf16_gate = dropout;
  bf16_gate.moe->router_dtype = nn::RouterDType::bf16;
  auto add_moe = [&](const std::string& label,
                     const std::shared_ptr<const study::NamedTensors>& w) {
    models.push_back({family + label + " p=0.1", dropout, w});
    models.push_back({family + label + " p=0.1 bf16 gate", bf16_gate, w});
  };
  add_moe("", weights);
  auto trained = [&](double load_balance_coeff) {
    nn::TrainConfig t = sz.curves;
    t.model = plain;
    t.model.moe->load_balance_coeff = load_balance_coeff;
    t.steps = o.train_steps;
    t.warmup = std::min<int64_t>(t.warmup, std::max<int64_t>(o.train_steps / 10, 1));
    t.seed = seed;
    std::printf("training %s %lld steps%s\n", family.c_str(), (long long)o.train_steps,
                load_balance_coeff > 0 ? ", auxiliary-loss-free balancing" : "");
    std::fflush(stdout);
    nn::Trainer trainer(t, data);
    if (weights) study::copy_state(trainer.model(), *weights);
    while (!trainer.finished()) trainer.step();
    return state_of(trainer.model());
  };
  if (o.train_steps > 0) {
    add_moe(" trained", trained(0));
    if (plain.moe->score_correction_bias) add_moe(" balanced", trained(o.load_balance_coeff));
  }
  return models;
}

// What the table's header says of the models.
std::string models_note(const Options& o, const Sizes& sz, const std::vector<Model>& models) {
  char buf[1024];
  if (o.model_dir.empty()) {
    std::snprintf(
        buf, sizeof buf,
        "Llama: %s; p=0.1 is residual and attention dropout 0.1. MoE: the same with %s, "
        "experts of ffn %lld (%lld routing slots per step: tokens x top-k x layers).",
        sz.dense.describe().c_str(), sz.moe.describe().c_str(), (long long)sz.expert_ffn,
        (long long)(sz.batch * sz.seq * sz.moe.num_experts_per_tok * sz.dense.num_hidden_layers));
    return buf;
  }
  const nn::LlamaConfig& c = models.front().config;
  std::snprintf(buf, sizeof buf, "Model: %s (%s), %s; p=0.1 is residual and attention dropout 0.1.",
                o.model_dir.c_str(), c.describe().c_str(),
                models.front().weights ? "the folder's weights"
                                       : "initialised as Hugging Face does from the seed");
  std::string note = buf;
  if (c.moe && o.train_steps > 0) {
    std::snprintf(buf, sizeof buf,
                  " \"trained\": after %lld AdamW steps of %lld x %lld tokens (lr %.g) from the "
                  "same start; \"balanced\": the same with auxiliary-loss-free balancing at %.g.",
                  (long long)o.train_steps, (long long)sz.curves.batch, (long long)sz.curves.seq,
                  sz.curves.lr, o.load_balance_coeff);
    note += buf;
  }
  return note;
}

// ---- routers ------------------------------------------------------------------

// What the study saw of one MoE model's router.
struct RouterReport {
  std::string model;
  std::vector<nn::MoeLayerStats> layers;  // the reference step's routing
  int64_t slots = 0;                      // routing slots per step: tokens x k x MoE layers
  // Mean slots flipped per step with the router recomputed and noise on the
  // router's values, at nn::kMarginUlps[i] ulps; -1 where not run.
  std::array<double, nn::kMarginUlps.size()> router_noise;
  double all_noise = -1;        // 1 ulp on every replayed value, router recomputed
  double all_noise_saved = -1;  // the same, router saved
};

// The report of a model from its reference routing and its scenarios,
// whose rows start at rows[first_row].
RouterReport router_report(const Model& model, const std::vector<nn::MoeLayerStats>& routing,
                           const std::vector<Scenario>& scenarios,
                           const std::vector<study::Row>& rows, size_t first_row) {
  RouterReport r{.model = model.label, .layers = routing};
  r.router_noise.fill(-1);
  for (const nn::MoeLayerStats& l : routing) {
    r.slots += l.tokens * model.config.moe->num_experts_per_tok;
  }
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const Scenario& s = scenarios[i];
    const double flips = rows.at(first_row + i).routing_flips;
    if (s.policy != "full" || s.rng != RngReplay::recorded || s.noise_ulps == 0) continue;
    if (s.noise_on == NoiseOn::router && s.router == Router::recomputed) {
      for (size_t j = 0; j < nn::kMarginUlps.size(); ++j) {
        if (s.noise_ulps == nn::kMarginUlps[j]) r.router_noise[j] = flips;
      }
    } else if (s.noise_on == NoiseOn::all && s.noise_ulps == 1) {
      (s.router == Router::recomputed ? r.all_noise : r.all_noise_saved) = flips;
    }
  }
  return r;
}

std::string percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

std::string flips_cell(double flips) {
  if (flips < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", flips);
  return buf;
}

// Two Markdown tables: flips per step against the noise on recompute, and
// each layer's routing margins (the share of tokens within 1, 16 and 256
// ulps of another choice: where noise of that size can flip a token).
std::string routers_markdown(const std::vector<RouterReport>& routers) {
  if (routers.empty()) return "";
  std::string md =
      "| model | routing slots per step | flipped at 1 ulp on the router | 16 ulps | 256 ulps | "
      "1 ulp everywhere | 1 ulp everywhere, router saved |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const RouterReport& r : routers) {
    md += "| " + r.model + " | " + std::to_string(r.slots);
    for (const double f : r.router_noise) md += " | " + flips_cell(f);
    md += " | " + flips_cell(r.all_noise) + " | " + flips_cell(r.all_noise_saved) + " |\n";
  }
  md +=
      "\n| model | layer | tokens | margin <= 1 ulp | <= 16 ulps | <= 256 ulps |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const RouterReport& r : routers) {
    for (const nn::MoeLayerStats& l : r.layers) {
      md += "| " + r.model + " | " + l.layer + " | " + std::to_string(l.tokens);
      for (const int64_t n : l.within_ulps) md += " | " + percent(n, l.tokens);
      md += " |\n";
    }
  }
  return md;
}

// The scenarios, by index into `models` (the built-in ones' layout: the
// plain Llama, the Llama with dropout, the MoE, then any other MoE models);
// `deltanet`: the models have gated DeltaNet layers.
std::vector<Scenario> study_scenarios(size_t models, bool deltanet) {
  const RngReplay rec = RngReplay::recorded, stash = RngReplay::stash, fresh = RngReplay::fresh;
  const Verify none = Verify::none, bitwise = Verify::bitwise;
  const Expect eq = Expect::equal, ne = Expect::differs;
  const Router saved = Router::saved, recomputed = Router::recomputed;
  const NoiseOn all = NoiseOn::all, router = NoiseOn::router;
  // model, policy, rng, verifier, noise ulps, expected, in --quick, what it
  // stands for; for MoE models: router saved or recomputed, noise on all
  // replayed nodes or the router's only.
  std::vector<Scenario> scenarios{
      {0, "full", fresh, none, 0, eq, true, "no dropout: preserve_rng_state=False is harmless"},
      {1, "full", fresh, none, 0, ne, true, "PyTorch preserve_rng_state=False"},
      {1, "full", fresh, Verify::metadata, 0, ne, false,
       "... which PyTorch's determinism_check (shapes) passes"},
      {1, "full", fresh, bitwise, 0, ne, true, "... and the verifier names the first node"},
      {1, "op-sac", fresh, none, 0, ne, false, "selective AC does not avoid it"},
      {1, "full", stash, none, 0, eq, true, "PyTorch preserve_rng_state=True (default)"},
      {1, "full", stash, bitwise, 0, eq, false, "... verified"},
      {1, "full", rec, none, 0, eq, true, "reprise default: replay the recorded offsets"},
      {1, "full", rec, bitwise, 0, eq, true, "... verified"},
      {1, "every-n-layers:2", rec, none, 0, eq, false, "half the layers"},
      {1, "op-sac", rec, none, 0, eq, false, "torchtitan op-level SAC"},
      {1, "budget", rec, none, 0, eq, false, "planner at half the reference's peak"},
      {1, "full", rec, bitwise, 1, ne, false, "non-bit-exact kernels, emulated (1 ulp)"},
      {2, "full", fresh, bitwise, 0, ne, false, "preserve_rng_state=False", recomputed},
      {2, "full", stash, bitwise, 0, eq, false, "preserve_rng_state=True", recomputed},
      {2, "full", rec, bitwise, 0, eq, true, "exact replay: recomputing the router is safe",
       recomputed},
      {2, "full", rec, bitwise, 0, eq, false, "router force-saved (what frameworks do)", saved},
      {2, "full", rec, bitwise, 1, ne, false, "non-bit-exact router kernel", recomputed, router},
      {2, "full", rec, bitwise, 1, eq, true, "... with the router saved", saved, router},
      {2, "full", rec, bitwise, 1, ne, false, "non-bit-exact kernels everywhere", recomputed, all},
      {2, "full", rec, bitwise, 1, ne, false, "... with the router saved", saved, all},
      {2, "full", rec, bitwise, 16, ne, false, "a noisier router kernel", recomputed, router},
      {2, "full", rec, bitwise, 256, ne, false, "a noisier router kernel", recomputed, router},
      {2, "op-sac", rec, bitwise, 1, ne, false, "op-level SAC, noisy router", recomputed, router},
  };
  if (deltanet) {
    // The recurrence's output saved, its chunk states recomputed.
    Scenario lean{1, "op-sac", rec, none, 0, eq, false, "op-level SAC, the recurrence rerun"};
    lean.chunk_states_saved = false;
    scenarios.push_back(lean);
  }
  // Every other MoE model (the bf16 gate, the trained routers): how router
  // flips grow with the noise, and that saving the router stops them.
  for (size_t m = 3; m < models; ++m) {
    for (const Scenario& r : std::vector<Scenario>{
             {m, "full", rec, bitwise, 0, eq, true, "exact replay", recomputed},
             {m, "full", rec, bitwise, 1, ne, false, "non-bit-exact router kernel", recomputed,
              router},
             {m, "full", rec, bitwise, 16, ne, false, "a noisier router kernel", recomputed,
              router},
             {m, "full", rec, bitwise, 256, ne, false, "a noisier router kernel", recomputed,
              router},
             {m, "full", rec, bitwise, 1, eq, true, "... with the router saved", saved, router},
             {m, "full", rec, bitwise, 1, ne, false, "non-bit-exact kernels everywhere", recomputed,
              all},
             {m, "full", rec, bitwise, 1, ne, false, "... with the router saved", saved, all}}) {
      scenarios.push_back(r);
    }
  }
  return scenarios;
}

// The column, and the note under the table, of step times: process CPU
// time on the CPU, wall time on a GPU.
std::string time_column(Device device) { return device.is_cpu() ? "step CPU ms" : "step ms"; }
std::string time_note(Device device) {
  return time_column(device) +
         (device.is_cpu() ? ": process CPU time"
                          : ": wall time on " + to_string(device) + ", the device waited for,");
}

// What the scenarios measured: the table's rows, the claims they check and
// the routers' reports.
struct Measurements {
  std::vector<study::Row> rows;
  std::vector<Claim> claims;
  std::vector<RouterReport> routers;
};

// Each model's scenarios (those of --quick with it), then the tables.
Measurements measure_models(const Options& o, const Sizes& sz, const std::vector<Model>& models,
                            const std::vector<Scenario>& scenarios, const nn::TextDataset& data,
                            uint64_t seed) {
  Measurements out;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    std::vector<Scenario> mine;
    for (const Scenario& s : scenarios) {
      if (s.model == mi && (!o.quick || s.quick)) mine.push_back(s);
    }
    if (mine.empty()) continue;
    const size_t first_row = out.rows.size() + 1;  // after the reference's
    const std::vector<nn::MoeLayerStats> routing =
        measure_model(models[mi], mine, data, sz, seed, o.device, o.dtype, out.rows, out.claims);
    if (mi >= 2 && models[mi].config.moe) {
      out.routers.push_back(router_report(models[mi], routing, mine, out.rows, first_row));
    }
  }
  std::printf("\n\n%s\n", study::format_text(out.rows, time_column(o.device)).c_str());
  std::printf("%s\n", routers_markdown(out.routers).c_str());
  return out;
}

// Training curves of the dropout model: the correct run (no
// checkpointing), the same with full checkpointing and recorded replay
// (must be the same bits), and with fresh replay (preserve_rng_state=False).
std::vector<study::Curve> loss_curves(const Options& o, const nn::TrainConfig& curves_config,
                                      const Model& model,
                                      const std::shared_ptr<const nn::TextDataset>& data,
                                      const Sizes& sz, std::vector<Claim>& claims) {
  const RngReplay rec = RngReplay::recorded, fresh = RngReplay::fresh;
  const std::vector<study::CurveVariant> variants{
      {"none", "none", rec}, {"full_recorded", "full", rec}, {"full_fresh", "full", fresh}};
  std::printf("training %lld steps of %lld x %lld tokens, dropout %.2g/%.2g, seed %llu\n",
              (long long)curves_config.steps, (long long)curves_config.batch,
              (long long)curves_config.seq, curves_config.model.dropout,
              curves_config.model.attention_dropout, (unsigned long long)curves_config.seed);
  std::fflush(stdout);
  const std::vector<study::Curve> curves = study::train_curves(
      curves_config, variants, data, sz.eval_batches, o.device, model.weights.get());
  std::printf("%s", study::curves_markdown(curves).c_str());
  claims.push_back({"training: full/recorded logs the losses of no checkpointing, bit for bit",
                    curves[1].losses == curves[0].losses});
  claims.push_back({"training: full/fresh logs other losses than no checkpointing",
                    curves[2].losses != curves[0].losses});
  return curves;
}

// --out: DIR/table.md, DIR/table.csv and DIR/loss_curves.csv.
void write_tables(const Options& o, const Sizes& sz, const std::vector<Model>& models,
                  uint64_t seed, const Measurements& m, const nn::TrainConfig& curves_config,
                  const std::vector<study::Curve>& curves) {
  std::filesystem::create_directories(o.out);
  char header[1024];
  std::snprintf(header, sizeof header,
                " One step of %lld x %lld tokens of the built-in corpus, seed %llu, against the "
                "same step without checkpointing; %d thread(s). %s of forward, loss and "
                "backward, the best of %d (the least disturbed by other work on the machine). "
                "Rows with noise: the mean over %d noise seeds (max |dgrad|: the largest).\n\n",
                (long long)sz.batch, (long long)sz.seq, (unsigned long long)seed,
                threads::num_threads(), time_note(o.device).c_str(), sz.repeats, sz.noise_draws);
  char curve_header[256];
  std::snprintf(curve_header, sizeof curve_header,
                "\nTraining, %lld AdamW steps of %lld x %lld tokens, dropout %.2g/%.2g, "
                "same seed:\n\n",
                (long long)curves_config.steps, (long long)curves_config.batch,
                (long long)curves_config.seq, curves_config.model.dropout,
                curves_config.model.attention_dropout);
  const std::string routers_section =
      m.routers.empty() ? "" : "\nRouters, from the same steps:\n\n" + routers_markdown(m.routers);
  // Each file atomically: a reader sees the previous study's or this one's.
  io::write_text_atomic(o.out + "/table.md",
                        models_note(o, sz, models) + header +
                            study::format_markdown(m.rows, time_column(o.device)) +
                            routers_section + curve_header + study::curves_markdown(curves));
  io::write_text_atomic(o.out + "/table.csv", study::format_csv(m.rows));
  io::write_text_atomic(o.out + "/loss_curves.csv", study::curves_csv(curves));
  std::printf("wrote    %s/table.md, table.csv, loss_curves.csv\n", o.out.c_str());
}

// 1 when a claim failed, else 0, printing nothing (the processes other
// than the one that reports).
int report_claims_quietly(const std::vector<Claim>& claims) {
  for (const Claim& c : claims) {
    if (!c.holds) return 1;
  }
  return 0;
}

// Prints every claim and whether it held; 1 when one failed, else 0.
int report_claims(const std::vector<Claim>& claims) {
  int failed = 0;
  std::printf("\nclaims\n");
  for (const Claim& c : claims) {
    std::printf("  %s  %s\n", c.holds ? "holds" : "FAILS", c.text.c_str());
    failed += c.holds ? 0 : 1;
  }
  if (failed > 0) {
    std::printf("%d of %zu claims FAIL\n", failed, claims.size());
    return 1;
  }
  std::printf("all %zu claims hold\n", claims.size());
  return 0;
}

int run(const Options& o) {
  threads::set_num_threads(o.threads);
  const double start = study::process_cpu_seconds();
  Sizes sz = sizes(o.quick);
  sz.curves.dtype = o.dtype;
  const uint64_t seed = 1;

  const auto data = std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin());
  const std::vector<Model> models =
      o.model_dir.empty() ? builtin_models(sz) : folder_models(o, sz, data, seed);
  const std::vector<Scenario> scenarios =
      study_scenarios(models.size(), models[0].config.linear_attention.has_value());

  std::printf("study    step of %lld x %lld tokens, %d threads, device %s, dtype %s%s\n",
              (long long)sz.batch, (long long)sz.seq, threads::num_threads(),
              to_string(o.device).c_str(), dtype_name(o.dtype), o.quick ? " (quick)" : "");
  for (const Model& m : models) {
    std::printf("model    %s: %s\n", m.label.c_str(), m.config.describe().c_str());
  }
  std::fflush(stdout);

  Measurements m = measure_models(o, sz, models, scenarios, *data, seed);
  nn::TrainConfig curves_config = sz.curves;
  curves_config.model = models[1].config;
  const std::vector<study::Curve> curves =
      loss_curves(o, curves_config, models[1], data, sz, m.claims);
  if (!o.out.empty()) write_tables(o, sz, models, seed, m, curves_config, curves);
  std::printf("done     in %.0f s of CPU time\n", study::process_cpu_seconds() - start);
  return report_claims(m.claims);
}

// --fsdp: the FSDP rows on the processes mpiexec started; rank 0 prints
// and writes them. Every process checks the claims.
int run_fsdp(const Options& o) {
  threads::set_num_threads(o.threads);
  parallel::World world(120);
  if (world.size() < 2)
    throw UsageError(
        "--fsdp splits the weights over processes: run it under mpiexec -np 2 or more");
  const Sizes sz = sizes(o.quick);
  nn::TrainConfig config = sz.curves;
  config.steps = o.quick ? 2 : 3;
  const auto data = std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin());
  const bool lead = world.rank() == 0;
  if (lead) {
    std::printf(
        "fsdp     %d processes, %lld steps of %lld x %lld tokens each, dropout %.2g, "
        "%d thread(s) each; model %s\n",
        world.size(), (long long)config.steps, (long long)config.batch, (long long)config.seq,
        config.model.dropout, threads::num_threads(), config.model.describe().c_str());
    std::fflush(stdout);
  }
  const study::FsdpStudy fsdp = study::fsdp_study(config, data, world, {"none", "full", "op-sac"});
  const std::string table = study::fsdp_markdown(fsdp.rows, world.size(), fsdp.layer_bytes);
  std::vector<Claim> claims;
  const study::FsdpRow& replicated = fsdp.rows[0];
  for (size_t i = 1; i < fsdp.rows.size(); ++i) {
    const study::FsdpRow& r = fsdp.rows[i];
    claims.push_back({"fsdp " + r.policy + ": the losses of replicated weights, bit for bit",
                      r.losses == replicated.losses});
    if (i > 1) {
      claims.push_back({"fsdp " + r.policy + ": the replay gathers nothing again",
                        r.regathered == 0 && r.gathered > 0});
    }
  }
  claims.push_back({"fsdp full: fewer saved activations than none",
                    fsdp.rows[2].peak_saved < fsdp.rows[1].peak_saved});
  if (!lead) return report_claims_quietly(claims);
  std::printf("\n%s", table.c_str());
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    io::write_text_atomic(o.out + "/fsdp.md", table);
    std::printf("wrote    %s/fsdp.md\n", o.out.c_str());
  }
  return report_claims(claims);
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run_main("checkpoint_study", [&] {
    const Options o = parse_flags(argc, argv);
    if (o.help) {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    return o.fsdp ? run_fsdp(o) : run(o);
  });
}
