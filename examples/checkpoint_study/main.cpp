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
//   checkpoint_study [--out DIR] [--quick] [--threads N] [--device D]
//
// --out writes DIR/table.md, DIR/table.csv and DIR/loss_curves.csv. Every
// run checks the study's claims (recorded and stash replay bitwise equal to
// no checkpointing, fresh replay with dropout not, a saved router never
// re-routes, ...) and exits 1 when one fails; --quick runs the same checks
// on a tiny model in well under a second.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/threads.h"
#include "io/write_file.h"
#include "loss_curves.h"
#include "nn/data.h"
#include "nn/llama.h"
#include "nn/train_state.h"
#include "report.h"
#include "step_measure.h"

namespace {

using namespace reprise;
using autograd::RngReplay;
using autograd::Verify;

constexpr const char* kUsage =
    R"(usage: checkpoint_study [--out DIR] [--quick] [--threads N] [--device D] [--dtype T]

Runs the activation-checkpointing scenarios (policy x RNG replay mode x verifier
x recompute noise x router saved or recomputed) on a small Llama and a small
MoE with dropout, prints the table, trains the Llama with correct and with
fresh recompute randomness, and checks the claims.

  --out DIR     write DIR/table.md, DIR/table.csv and DIR/loss_curves.csv
  --quick       a tiny model and a few steps (a smoke test: seconds)
  --threads N   CPU threads (1; times are process CPU time, so more threads
                add their synchronisation to the step time)
  --device D    cpu, cuda or cuda:N: where the models run (cpu); on a GPU
                step times are wall time, the device waited for
  --dtype T     f32 | bf16: precision of the projections (f32); bf16 runs them
                on bf16 copies of activations and weights with f32 masters
  --help        this text
)";

struct Options {
  std::string out;
  bool quick = false;
  int threads = 1;
  Device device = Device::cpu();
  DType dtype = DType::f32;
};

// A bad command line: exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Options parse_flags(int argc, char** argv, bool& help) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + ": missing value");
      return argv[++i];
    };
    if (a == "--help") {
      help = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--threads") {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 4096)
        throw UsageError("--threads: expected an integer in [1, 4096], got '" + v + "'");
      o.threads = int(n);
    } else if (a == "--device") {
      const std::string v = value();
      try {
        o.device = parse_device(v, "--device");
      } catch (const Error& e) {
        throw UsageError(e.what());
      }
    } else if (a == "--dtype") {
      const std::string v = value();
      const std::optional<DType> dtype = nn::run_dtype_named(v);
      if (!dtype) throw UsageError("--dtype: expected f32 or bf16, got '" + v + "'");
      o.dtype = *dtype;
    } else {
      throw UsageError("unknown flag '" + a + "'");
    }
  }
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
};

enum class Expect { equal, differs };
// MoE models: whether checkpointed layers force-save the router
// (ActivationCheckpointing::save_router) and where noise is injected.
enum class Router { saved, recomputed };
enum class NoiseOn { all, router };
const std::string kRouterScopes = nn::router_scopes(nn::family_info(nn::Family::mixtral).moe_block);

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

// The model's reference step (no checkpointing), then each scenario's
// step against it: one table row and the claims it checks per scenario.
void measure_model(const Model& model, const std::vector<Scenario>& scenarios,
                   const nn::TextDataset& data, const Sizes& sz, uint64_t seed, Device device,
                   DType dtype, std::vector<study::Row>& rows, std::vector<Claim>& claims) {
  const bool moe = model.config.moe.has_value();
  study::StepBench bench(model.config, data, sz.batch, sz.seq, seed, device, dtype);
  const study::StepMeasurement ref = bench.run(nn::CheckpointConfig::parse("none"), 1, sz.repeats);
  rows.push_back({model.label, "none", "recorded", "none", "0", "reference: no checkpointing", 0, 0,
                  true, moe ? 0.0 : -1.0, moe ? 0.0 : -1.0, ref.peak_saved_activation, ref.seconds,
                  0, 0, ""});
  for (const Scenario& s : scenarios) {
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
    std::string noise = std::to_string(s.noise_ulps);
    if (moe) {
      policy += s.router == Router::saved ? ", router saved" : ", router recomputed";
      if (s.noise_ulps > 0) noise += s.noise_on == NoiseOn::all ? " (all)" : " (router)";
      if (s.noise_on == NoiseOn::router) ac.noise_scopes = kRouterScopes;
    }
    // Noise is one draw per (noise seed, node, element): average what it
    // does over several seeds. The first draw is the timed one.
    const int draws = s.noise_ulps > 0 ? sz.noise_draws : 1;
    const study::StepMeasurement m = bench.run(ac, 1, sz.repeats);
    bool equal_bits = true;
    double max_abs = 0, rel_l2 = 0, slots = 0, experts = 0, mismatches = 0;
    for (int d = 0; d < draws; ++d) {
      ac.noise_seed = autograd::CheckpointOptions{}.noise_seed + uint64_t(d);
      const study::StepMeasurement md = d == 0 ? m : bench.run(ac, 0, 1);
      const study::GradientError e = study::compare(md, ref);
      const RoutingChange routing = routing_change(md.mismatches);
      equal_bits = equal_bits && e.bitwise_equal;
      max_abs = std::max(max_abs, e.max_abs);
      rel_l2 += e.rel_l2 / draws;
      slots += double(routing.slots) / draws;
      experts += double(routing.experts) / draws;
      mismatches += double(md.stats.mismatches) / draws;
    }
    study::Row r{model.label,
                 policy,
                 autograd::rng_replay_name(s.rng),
                 autograd::verify_name(s.verify),
                 noise,
                 s.what,
                 max_abs,
                 rel_l2,
                 equal_bits,
                 moe ? slots : -1,
                 moe ? experts : -1,
                 m.peak_saved_activation,
                 m.seconds,
                 m.stats.rng_bytes_stashed,
                 mismatches,
                 m.mismatches.empty() ? "" : mismatch_summary(m.mismatches.front())};
    const std::string name =
        model.label + ", " + policy + ", " + r.rng + ", verify " + r.verifier + ", noise " + noise;
    const bool equal = s.expect == Expect::equal;
    claims.push_back({name + (equal ? ": gradients bitwise equal to no checkpointing"
                                    : ": gradients differ from no checkpointing"),
                      equal_bits == equal});
    if (s.verify == Verify::bitwise) {
      claims.push_back({name + ": the verifier reports " + (equal ? "nothing" : "a mismatch"),
                        (mismatches == 0) == equal});
    }
    if (s.verify == Verify::metadata) {
      claims.push_back({name + ": the metadata verifier reports nothing", mismatches == 0});
    }
    if (moe && (s.router == Router::saved || s.noise_ulps == 0) && s.rng != RngReplay::fresh) {
      claims.push_back({name + ": routing unchanged", slots == 0 && experts == 0});
    }
    claims.push_back(
        {name + (s.rng == RngReplay::stash ? ": RNG state stashed" : ": no RNG state stashed"),
         (m.stats.rng_bytes_stashed > 0) == (s.rng == RngReplay::stash)});
    rows.push_back(std::move(r));
    std::printf(".");
    std::fflush(stdout);
  }
}

int run(const Options& o) {
  threads::set_num_threads(o.threads);
  const double start = study::process_cpu_seconds();
  Sizes sz = sizes(o.quick);
  sz.curves.dtype = o.dtype;
  const uint64_t seed = 1;

  std::vector<Model> models;
  nn::LlamaConfig plain = sz.dense, dropout = sz.dense;
  dropout.dropout = 0.1;
  dropout.attention_dropout = 0.1;
  nn::LlamaConfig moe = dropout, moe_bf16 = dropout;
  moe.intermediate_size = moe_bf16.intermediate_size = sz.expert_ffn;
  moe.family = moe_bf16.family = nn::Family::mixtral;
  moe.moe = moe_bf16.moe = sz.moe;
  moe_bf16.moe->router_dtype = nn::RouterDType::bf16;
  models.push_back({"llama p=0", plain});
  models.push_back({"llama p=0.1", dropout});
  models.push_back({"moe p=0.1", moe});
  models.push_back({"moe p=0.1 bf16 gate", moe_bf16});

  const RngReplay rec = RngReplay::recorded, stash = RngReplay::stash, fresh = RngReplay::fresh;
  const Verify none = Verify::none, bitwise = Verify::bitwise;
  const Expect eq = Expect::equal, ne = Expect::differs;
  const Router saved = Router::saved, recomputed = Router::recomputed;
  const NoiseOn all = NoiseOn::all, router = NoiseOn::router;
  // model, policy, rng, verifier, noise ulps, expected, in --quick, what it
  // stands for; for MoE models: router saved or recomputed, noise on all
  // replayed nodes or the router's only.
  const std::vector<Scenario> scenarios{
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
      {3, "full", rec, bitwise, 0, eq, false, "exact replay", recomputed},
      {3, "full", rec, bitwise, 1, ne, false, "non-bit-exact router kernel", recomputed, router},
      {3, "full", rec, bitwise, 1, eq, false, "... with the router saved", saved, router},
      {3, "full", rec, bitwise, 1, ne, false, "non-bit-exact kernels everywhere", recomputed, all},
      {3, "full", rec, bitwise, 1, ne, false, "... with the router saved", saved, all},
  };

  const auto data = std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin());
  std::printf("study    %s, step of %lld x %lld tokens, %d threads, device %s, dtype %s%s\n",
              sz.dense.describe().c_str(), (long long)sz.batch, (long long)sz.seq,
              threads::num_threads(), to_string(o.device).c_str(), dtype_name(o.dtype),
              o.quick ? " (quick)" : "");
  // Steps on the CPU are timed in process CPU time, on a GPU in wall time.
  const std::string time_column = o.device.is_cpu() ? "step CPU ms" : "step ms";
  const std::string time_note =
      time_column + (o.device.is_cpu()
                         ? ": process CPU time"
                         : ": wall time on " + to_string(o.device) + ", the device waited for,");
  std::printf("moe      %s\n", moe.describe().c_str());
  std::fflush(stdout);

  std::vector<study::Row> rows;
  std::vector<Claim> claims;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    std::vector<Scenario> mine;
    for (const Scenario& s : scenarios) {
      if (s.model == mi && (!o.quick || s.quick)) mine.push_back(s);
    }
    if (!mine.empty())
      measure_model(models[mi], mine, *data, sz, seed, o.device, o.dtype, rows, claims);
  }
  std::printf("\n\n%s\n", study::format_text(rows, time_column).c_str());

  // Training curves: the correct run (no checkpointing), the same with full
  // checkpointing and recorded replay (must be the same bits), and with
  // fresh replay (preserve_rng_state=False).
  const std::vector<study::CurveVariant> variants{
      {"none", "none", rec}, {"full_recorded", "full", rec}, {"full_fresh", "full", fresh}};
  std::printf("training %lld steps of %lld x %lld tokens, dropout %.2g/%.2g, seed %llu\n",
              (long long)sz.curves.steps, (long long)sz.curves.batch, (long long)sz.curves.seq,
              sz.curves.model.dropout, sz.curves.model.attention_dropout,
              (unsigned long long)sz.curves.seed);
  std::fflush(stdout);
  const std::vector<study::Curve> curves =
      study::train_curves(sz.curves, variants, data, sz.eval_batches, o.device);
  const std::string curve_md = study::curves_markdown(curves);
  std::printf("%s", curve_md.c_str());
  claims.push_back({"training: full/recorded logs the losses of no checkpointing, bit for bit",
                    curves[1].losses == curves[0].losses});
  claims.push_back({"training: full/fresh logs other losses than no checkpointing",
                    curves[2].losses != curves[0].losses});

  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    char header[1024];
    std::snprintf(
        header, sizeof header,
        "Llama: %s; p=0.1 is residual and attention dropout 0.1. MoE: the same with %s, experts "
        "of ffn %lld (%lld routing slots per step: tokens x top-k x layers). One step of "
        "%lld x %lld tokens of the built-in corpus, seed %llu, against the same step without "
        "checkpointing; %d thread(s). %s of forward, loss and "
        "backward, the best of %d (the least disturbed by other work on the machine). Rows with "
        "noise: the mean over %d noise seeds (max |dgrad|: "
        "the largest).\n\n",
        sz.dense.describe().c_str(), sz.moe.describe().c_str(), (long long)sz.expert_ffn,
        (long long)(sz.batch * sz.seq * sz.moe.num_experts_per_tok * sz.dense.num_hidden_layers),
        (long long)sz.batch, (long long)sz.seq, (unsigned long long)seed, threads::num_threads(),
        time_note.c_str(), sz.repeats, sz.noise_draws);
    char curve_header[256];
    std::snprintf(curve_header, sizeof curve_header,
                  "\nTraining, %lld AdamW steps of %lld x %lld tokens, dropout %.2g/%.2g, "
                  "same seed:\n\n",
                  (long long)sz.curves.steps, (long long)sz.curves.batch, (long long)sz.curves.seq,
                  sz.curves.model.dropout, sz.curves.model.attention_dropout);
    // Each file atomically: a reader sees the previous study's or this one's.
    io::write_text_atomic(o.out + "/table.md", header + study::format_markdown(rows, time_column) +
                                                   curve_header + curve_md);
    io::write_text_atomic(o.out + "/table.csv", study::format_csv(rows));
    io::write_text_atomic(o.out + "/loss_curves.csv", study::curves_csv(curves));
    std::printf("wrote    %s/table.md, table.csv, loss_curves.csv\n", o.out.c_str());
  }

  std::printf("done     in %.0f s of CPU time\n", study::process_cpu_seconds() - start);
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

}  // namespace

int main(int argc, char** argv) {
  try {
    bool help = false;
    const Options o = parse_flags(argc, argv, help);
    if (help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return run(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "checkpoint_study: %s\n(checkpoint_study --help lists the flags)\n",
                 e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_study: error: %s\n", e.what());
    return 1;
  }
}
