// checkpoint_study: the scenarios of the preserve_rng_state debate, run on a
// small Llama with dropout on, in one command. For each scenario (model,
// checkpoint policy, RNG replay mode, verifier, recompute noise) it runs one
// training step from the same weights, batch and generator state as a step
// without checkpointing, and reports how far the gradients are from that
// reference, whether they are bitwise equal, the peak saved-activation
// bytes, the step time, the RNG state stashed and what the verifier saw.
// Then it trains the same small model a few hundred steps with correct and
// with fresh (wrong) recompute randomness and compares the loss curves.
//
//   checkpoint_study [--out DIR] [--quick] [--threads N]
//
// --out writes DIR/table.md, DIR/table.csv and DIR/loss_curves.csv. Every
// run checks the study's claims (recorded and stash replay bitwise equal to
// no checkpointing, fresh replay with dropout not, ...) and exits 1 when one
// fails; --quick runs the same checks on a tiny model in seconds.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/threads.h"
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

constexpr const char* kUsage = R"(usage: checkpoint_study [--out DIR] [--quick] [--threads N]

Runs the activation-checkpointing scenarios (policy x RNG replay mode x verifier
x recompute noise) on a small Llama with dropout, prints the table, trains the
model with correct and with fresh recompute randomness, and checks the claims.

  --out DIR     write DIR/table.md, DIR/table.csv and DIR/loss_curves.csv
  --quick       a tiny model and a few steps (a smoke test: seconds)
  --threads N   CPU threads (1; times are process CPU time, so more threads
                add their synchronisation to the step time)
  --help        this text
)";

struct Options {
  std::string out;
  bool quick = false;
  int threads = 1;
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

struct Scenario {
  size_t model;        // index into the models
  std::string policy;  // ActivationCheckpointing::parse form; "budget": half the reference's peak
  RngReplay rng;
  Verify verify;
  int noise_ulps;
  Expect expect;  // against the same model without checkpointing
  bool quick;     // also part of --quick
  std::string what;
};

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

int run(const Options& o) {
  threads::set_num_threads(o.threads);
  const double start = study::process_cpu_seconds();
  const Sizes sz = sizes(o.quick);
  const uint64_t seed = 1;

  std::vector<Model> models;
  nn::LlamaConfig plain = sz.dense, dropout = sz.dense;
  dropout.dropout = 0.1;
  dropout.attention_dropout = 0.1;
  models.push_back({"llama p=0", plain});
  models.push_back({"llama p=0.1", dropout});

  const RngReplay rec = RngReplay::recorded, stash = RngReplay::stash, fresh = RngReplay::fresh;
  const Verify none = Verify::none, bitwise = Verify::bitwise;
  const Expect eq = Expect::equal, ne = Expect::differs;
  const std::vector<Scenario> scenarios{
      {0, "full", fresh, none, 0, eq, true, "no dropout: preserve_rng_state=False is harmless"},
      {1, "full", fresh, none, 0, ne, true, "PyTorch preserve_rng_state=False"},
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
  };

  const auto data = std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin());
  std::printf("study    %s, step of %lld x %lld tokens, %d threads%s\n",
              sz.dense.describe().c_str(), (long long)sz.batch, (long long)sz.seq,
              threads::num_threads(), o.quick ? " (quick)" : "");
  std::fflush(stdout);

  std::vector<study::Row> rows;
  std::vector<Claim> claims;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const Model& model = models[mi];
    study::StepBench bench(model.config, *data, sz.batch, sz.seq, seed);
    const study::StepMeasurement ref =
        bench.run(nn::ActivationCheckpointing::parse("none"), 1, sz.repeats);
    rows.push_back({model.label, "none", "recorded", "none", "0", "reference: no checkpointing", 0,
                    0, true, -1, ref.peak_saved_activation, ref.seconds, 0, 0, ""});
    for (const Scenario& s : scenarios) {
      if (s.model != mi || (o.quick && !s.quick)) continue;
      nn::ActivationCheckpointing ac;
      std::string policy = s.policy;
      if (policy == "budget") {
        const int64_t kib = ref.peak_saved_activation / 2 / 1024;
        policy = "budget:" + std::to_string(kib) + "K";
      }
      ac = nn::ActivationCheckpointing::parse(policy);
      ac.options.rng = s.rng;
      ac.options.verify = s.verify;
      ac.options.recompute_noise_ulps = s.noise_ulps;
      ac.options.on_mismatch = autograd::OnMismatch::report;
      const study::StepMeasurement m = bench.run(ac, 1, sz.repeats);
      const study::GradientError e = study::compare(m, ref);
      study::Row r{model.label,
                   policy,
                   autograd::rng_replay_name(s.rng),
                   autograd::verify_name(s.verify),
                   std::to_string(s.noise_ulps),
                   s.what,
                   e.max_abs,
                   e.rel_l2,
                   e.bitwise_equal,
                   -1,
                   m.peak_saved_activation,
                   m.seconds,
                   m.stats.rng_bytes_stashed,
                   m.stats.mismatches,
                   m.mismatches.empty() ? "" : mismatch_summary(m.mismatches.front())};
      const std::string name = model.label + ", " + policy + ", " + r.rng + ", verify " +
                               r.verifier + ", noise " + r.noise;
      if (s.expect == Expect::equal) {
        claims.push_back({name + ": gradients bitwise equal to no checkpointing", e.bitwise_equal});
      } else {
        claims.push_back({name + ": gradients differ from no checkpointing", !e.bitwise_equal});
      }
      if (s.verify == Verify::bitwise) {
        claims.push_back({name + ": the verifier reports " +
                              (s.expect == Expect::equal ? "nothing" : "a mismatch"),
                          (m.stats.mismatches == 0) == (s.expect == Expect::equal)});
      }
      claims.push_back({name + (s.rng == stash ? ": RNG state stashed" : ": no RNG state stashed"),
                        (m.stats.rng_bytes_stashed > 0) == (s.rng == stash)});
      rows.push_back(std::move(r));
      std::printf(".");
      std::fflush(stdout);
    }
  }
  std::printf("\n\n%s\n", study::format_text(rows).c_str());

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
      study::train_curves(sz.curves, variants, data, sz.eval_batches);
  const size_t tail = std::min<size_t>(50, curves[0].losses.size());
  std::string curve_md =
      "| run | loss step 1 | mean loss, last " + std::to_string(tail) +
      " steps | held-out loss | vs none | CPU s |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const study::Curve& c : curves) {
    const double mean = study::tail_mean(c, tail);
    const double gap = c.val_loss - curves[0].val_loss;
    std::printf("  %-14s loss step 1 %.4f, mean of last %zu %.4f, held-out %.4f (%+.4f), %.1f s\n",
                c.variant.label.c_str(), double(c.losses.front()), tail, mean, c.val_loss, gap,
                c.seconds);
    char line[256];
    std::snprintf(line, sizeof line, "| %s | %.4f | %.4f | %.4f | %+.4f | %.1f |\n",
                  c.variant.label.c_str(), double(c.losses.front()), mean, c.val_loss, gap,
                  c.seconds);
    curve_md += line;
  }
  claims.push_back({"training: full/recorded logs the losses of no checkpointing, bit for bit",
                    curves[1].losses == curves[0].losses});
  claims.push_back({"training: full/fresh logs other losses than no checkpointing",
                    curves[2].losses != curves[0].losses});

  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    char header[512];
    std::snprintf(
        header, sizeof header,
        "Model: %s. One step of %lld x %lld tokens of the built-in corpus, seed %llu; "
        "%d threads; step ms is the process CPU time of a step (forward, loss, backward), "
        "the median of %d.\n\n",
        sz.dense.describe().c_str(), (long long)sz.batch, (long long)sz.seq,
        (unsigned long long)seed, threads::num_threads(), sz.repeats);
    char curve_header[256];
    std::snprintf(curve_header, sizeof curve_header,
                  "\nTraining, %lld AdamW steps of %lld x %lld tokens, dropout %.2g/%.2g, "
                  "same seed:\n\n",
                  (long long)sz.curves.steps, (long long)sz.curves.batch, (long long)sz.curves.seq,
                  sz.curves.model.dropout, sz.curves.model.attention_dropout);
    study::write_file(o.out + "/table.md",
                      header + study::format_markdown(rows) + curve_header + curve_md);
    study::write_file(o.out + "/table.csv", study::format_csv(rows));
    study::write_curves_csv(o.out + "/loss_curves.csv", curves);
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
