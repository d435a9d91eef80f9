// Training-step time and peak saved-activation bytes of a transformer stack
// under each checkpoint policy, and the per-region cost of the RNG replay
// modes. bench/autograd/compare_checkpoint.py runs this beside the same
// model under torch.utils.checkpoint (bench/autograd/checkpoint_torch.py)
// and reports ratios.
//
// Times: the Time column is wall time; the CPU column is the CPU time of the
// whole process (every thread), which is what compare_checkpoint.py
// reports when the shared machine is loaded. replay_ms is the wall time a
// step spends replaying regions. Rates (tokens_per_s,
// GFLOP_per_s) are per second of that CPU time, so per core. BM_Paired_*
// alternate a step under the policy with a no-checkpoint step in one process
// and report ratio_vs_none, the ratio of their CPU times: what the targets
// are stated in, measured so that both halves see the same machine load.
//
// B = batch, T = sequence, C = channels, H = query heads, G = kv heads,
// D = head dim, F = MLP width: the Llama example's shapes.
#include "autograd/checkpoint.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "autograd/backward.h"
#include "autograd/planner.h"
#include "engine/memory_stats.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/swiglu.h"
#include "ops/views.h"
#include "rng/generator.h"

namespace {

using namespace reprise;
using namespace reprise::autograd;

constexpr int64_t B = 8, T = 256, C = 256, H = 8, G = 4, D = C / H, F = 688;
constexpr int kBlocks = 4;
constexpr double kDropout = 0.1;
// Model flops of one step without recompute: every linear 6 N W (forward
// 2 N W, backward 4 N W; N = B T tokens, W = weights per block) and causal
// attention 3 x 2 B H T^2 D (forward: half of 4 B H T^2 D; backward twice that).
constexpr double kModelFlops =
    kBlocks * (6.0 * B * T * (2 * C * C + 2 * G * D * C + 3 * F * C) + 3.0 * 2 * B * H * T * T * D);

Tensor weight(Shape shape, rng::Generator& gen) {
  Tensor w = Tensor::empty(shape);
  ops::normal_(w, 0.0, 0.02, gen);
  w.requires_grad(true);
  w.storage()->set_kind(MemoryKind::parameter);
  return w;
}

struct Block {
  Tensor norm1, wq, wk, wv, wo, norm2, wg, wu, wd;
  explicit Block(rng::Generator& gen)
      : norm1(Tensor::ones({C}).requires_grad(true)),
        wq(weight({C, C}, gen)),
        wk(weight({G * D, C}, gen)),
        wv(weight({G * D, C}, gen)),
        wo(weight({C, C}, gen)),
        norm2(Tensor::ones({C}).requires_grad(true)),
        wg(weight({F, C}, gen)),
        wu(weight({F, C}, gen)),
        wd(weight({C, F}, gen)) {}

  std::vector<Tensor*> params() { return {&norm1, &wq, &wk, &wv, &wo, &norm2, &wg, &wu, &wd}; }

  // x: (B, T, C) -> (B, T, C), with residual dropout after attention and MLP.
  // The seven linears run in a fixed order (q, k, v, o, gate, up, down) so
  // that op-level SAC saves the same ones as torch's mm counter does.
  Tensor forward(const Tensor& x, rng::Generator& gen) const {
    Tensor h = ops::rmsnorm(x, norm1);
    auto heads = [&](const Tensor& w, int64_t n) {  // (B, T, n D) -> (B, n, T, D)
      return ops::transpose(ops::reshape(ops::linear(h, w), {B, T, n, D}), 1, 2);
    };
    Tensor q = heads(wq, H), k = heads(wk, G), v = heads(wv, G);
    Tensor a = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
    a = ops::reshape(ops::transpose(a, 1, 2), {B, T, C});
    Tensor r = ops::add(x, ops::dropout(ops::linear(a, wo), kDropout, gen));
    Tensor h2 = ops::rmsnorm(r, norm2);
    Tensor gate = ops::linear(h2, wg);
    Tensor up = ops::linear(h2, wu);
    Tensor m = ops::linear(ops::swiglu(gate, up), wd);
    return ops::add(r, ops::dropout(m, kDropout, gen));
  }
};

struct Memory {
  int64_t peak_saved = 0;  // peak of saved-activation bytes during the forward
  int64_t held = 0;        // bytes alive at the end of the forward, output excluded
};

struct Stack {
  std::shared_ptr<rng::Generator> gen = std::make_shared<rng::Generator>(42);
  std::vector<Block> blocks;
  Tensor x;
  Stack() {
    for (int i = 0; i < kBlocks; ++i) blocks.emplace_back(*gen);
    x = Tensor::empty({B, T, C});
    ops::normal_(x, 0.0, 1.0, *gen);
  }

  // One forward + backward of mean(h * h); leaves the gradients on the
  // parameters.
  Memory step(const Policy* policy, const CheckpointOptions& options) {
    for (auto& b : blocks) {
      for (Tensor* p : b.params()) p->set_grad(Tensor());
    }
    memory_stats::reset_peaks();
    MemorySnapshot before = memory_stats::snapshot();
    Tensor h = x;
    for (int i = 0; i < kBlocks; ++i) {
      auto f = [&, i, in = h] { return blocks[size_t(i)].forward(in, *gen); };
      h = policy ? checkpoint("layers." + std::to_string(i), *policy, f, options) : f();
    }
    MemorySnapshot after = memory_stats::snapshot();
    Memory m{after[MemoryKind::saved_activation].peak - before[MemoryKind::saved_activation].live,
             after.total.live - before.total.live - int64_t(h.nbytes())};
    backward(ops::mean(ops::mul(h, h)));
    return m;
  }

  std::vector<std::vector<float>> grads() {
    std::vector<std::vector<float>> out;
    for (auto& b : blocks) {
      for (Tensor* p : b.params()) out.push_back(p->grad().to_vector<float>());
    }
    return out;
  }

  // Gradients of one step from a fixed generator state (so the dropout masks
  // are the same whatever ran before).
  std::vector<std::vector<float>> grads_from(const rng::GeneratorState& state, const Policy* policy,
                                             const CheckpointOptions& options) {
    gen->set_state(state);
    step(policy, options);
    return grads();
  }
};

Stack& stack() {
  static Stack s;
  return s;
}

// The gradients every policy must reproduce bit for bit: no checkpointing,
// from the generator state at first use.
const std::vector<std::vector<float>>& reference_grads(rng::GeneratorState& state) {
  static rng::GeneratorState s0 = stack().gen->state();
  static std::vector<std::vector<float>> ref = stack().grads_from(s0, nullptr, {});
  state = s0;
  return ref;
}

// Checked before timing: this is also the warm-up (and, for the budget
// planner, a step that already applies the plan).
bool gradients_match(benchmark::State& state, const Policy* policy,
                     const CheckpointOptions& options) {
  rng::GeneratorState s0;
  const auto& ref = reference_grads(s0);
  if (stack().grads_from(s0, policy, options) == ref) return true;
  state.SkipWithError("gradients differ from the no-checkpoint step");
  return false;
}

void run_step(benchmark::State& state, const Policy* policy, const CheckpointOptions& options) {
  if (!gradients_match(state, policy, options)) return;
  Stack& s = stack();
  Memory m;
  const RecomputeStats before = recompute_stats();
  for (auto _ : state) m = s.step(policy, options);
  const RecomputeStats ran = recompute_stats() - before;
  const double steps = double(state.iterations());
  state.counters["peak_saved_MiB"] = double(m.peak_saved) / (1 << 20);
  state.counters["held_MiB"] = double(m.held) / (1 << 20);
  state.counters["replayed_nodes"] = double(ran.nodes_replayed) / steps;
  state.counters["replay_ms"] = 1e3 * ran.replay_seconds / steps;
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(B * T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP_per_s"] =
      benchmark::Counter(kModelFlops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The cost relative to no checkpointing, paired: every iteration runs steps
// without checkpointing and steps under `policy`, in alternating order, and
// adds up the process CPU time and the wall time of each, so that on a
// shared machine both see the same load. Each side's timed step follows an
// untimed one of its own: the first step after a switch inherits the other
// side's heap (a step that follows a smaller-footprint one page-faults its
// memory in afresh) and would measure the switch, not the mode. The case's
// own time is that of all four steps.
//
// replay_vs_none is the wall time the policy's steps spent replaying over
// the wall time of the no-checkpoint steps: the part of the ratio that the
// recomputed ops make up (ratio = 1 + replay_vs_none + whatever else the
// two kinds of step differ in, machine noise included).
void run_paired(benchmark::State& state, const Policy& policy, const CheckpointOptions& options) {
  if (!gradients_match(state, &policy, options)) return;
  double cpu[2] = {0, 0}, wall[2] = {0, 0};  // none, policy
  double replay = 0;
  int64_t first = 0;
  for (auto _ : state) {
    for (int64_t k = 0; k < 2; ++k) {
      const Policy* p = (first + k) % 2 ? &policy : nullptr;
      stack().step(p, options);
      const double cpu0 = process_cpu_seconds(), replay0 = recompute_stats().replay_seconds;
      const auto wall0 = std::chrono::steady_clock::now();
      stack().step(p, options);
      wall[p ? 1 : 0] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      cpu[p ? 1 : 0] += process_cpu_seconds() - cpu0;
      replay += recompute_stats().replay_seconds - replay0;
    }
    first ^= 1;
  }
  state.counters["ratio_vs_none"] = cpu[1] / cpu[0];
  state.counters["wall_ratio_vs_none"] = wall[1] / wall[0];
  state.counters["replay_vs_none"] = replay / wall[0];
}

enum class Mode { none, full, full_stash, op_sac, budget30 };

// BM_Step_<mode>: a step under the mode. BM_Paired_<mode>: its cost relative
// to no checkpointing, by run_paired.
void step_case(benchmark::State& state, Mode mode, bool paired) {
  Stack& s = stack();
  std::optional<Policy> policy;
  CheckpointOptions options;
  std::optional<BudgetPlanner> planner;
  switch (mode) {
    case Mode::none:
      break;
    case Mode::full:
      policy = policies::full();
      break;
    case Mode::full_stash:
      policy = policies::full();
      options = {.rng = RngReplay::stash, .generator = s.gen};
      break;
    case Mode::op_sac:
      policy = policies::op_sac({"linear", "sdpa"});
      break;
    case Mode::budget30:
      // 30% of the no-checkpoint peak; one step records, then plan.
      planner.emplace(int64_t(0.3 * double(s.step(nullptr, {}).peak_saved)));
      policy = planner->policy();
      s.step(&*policy, options);
      planner->plan();
      break;
  }
  if (paired) {
    run_paired(state, *policy, options);
  } else {
    run_step(state, policy ? &*policy : nullptr, options);
  }
  if (planner) {
    BudgetPlanner::Summary plan = planner->summary();
    state.counters["budget_MiB"] = double(plan.budget) / (1 << 20);
    // The planner's cost model: flops its plan replays, as a share of full
    // recompute's.
    state.counters["planned_replay_share"] = plan.replay_flops / plan.full_replay_flops;
  }
}

[[maybe_unused]] const bool step_cases_registered = [] {
  const std::pair<const char*, Mode> modes[] = {{"none", Mode::none},
                                                {"full", Mode::full},
                                                {"full_stash", Mode::full_stash},
                                                {"op_sac", Mode::op_sac},
                                                {"budget30", Mode::budget30}};
  for (bool paired : {false, true}) {
    for (const auto& [name, mode] : modes) {
      if (paired && mode == Mode::none) continue;
      std::string id = std::string(paired ? "BM_Paired_" : "BM_Step_") + name;
      benchmark::RegisterBenchmark(id.c_str(), step_case, mode, paired)
          ->Unit(benchmark::kMillisecond)
          ->MeasureProcessCPUTime();
    }
  }
  return true;
}();

// Per-region overhead of the RNG replay modes: a region around one small
// dropout (forward only), minus the same op outside any region.
void region_overhead(benchmark::State& state, const CheckpointOptions* options) {
  rng::Generator gen(7);
  Tensor x = Tensor::ones({64}).requires_grad(true);
  Policy p = policies::full();
  const RecomputeStats before = recompute_stats();
  for (auto _ : state) {
    Tensor y = options ? checkpoint(
                             "r", p, [&] { return ops::dropout(x, 0.5, gen); }, *options)
                       : ops::dropout(x, 0.5, gen);
    benchmark::DoNotOptimize(y);
  }
  const RecomputeStats ran = recompute_stats() - before;
  if (ran.regions > 0) {
    state.counters["stashed_bytes_per_region"] =
        double(ran.rng_bytes_stashed) / double(ran.regions);
  }
}
void BM_Region_op_only(benchmark::State& state) { region_overhead(state, nullptr); }
void BM_Region_recorded(benchmark::State& state) {
  CheckpointOptions o;
  region_overhead(state, &o);
}
void BM_Region_stash(benchmark::State& state) {
  CheckpointOptions o{.rng = RngReplay::stash, .generator = std::make_shared<rng::Generator>(7)};
  region_overhead(state, &o);
}
BENCHMARK(BM_Region_op_only)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_Region_recorded)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_Region_stash)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
