#pragma once
// What bench_llama_step and bench_moe_step share: one training step of a
// LlamaForCausalLM, dense or MoE (zero_grad, forward, causal_lm_loss,
// backward, AdamW update), timed by Google Benchmark, with its counters:
//   loss0      the first step's loss, which the PyTorch side-by-sides compare
//              with PyTorch's on the same weights and batch before they
//              trust any timing
//   GFLOP/s    LlamaForCausalLM::training_flops_per_token
//   peak_MiB   MemoryStats' peak over a step above the parameters,
//              optimizer state and batch that live throughout: gradients,
//              activations, temporaries
//   saved_MiB  peak saved activations
//   rss_MiB    the rise of the process's peak resident set over the timed
//              steps (Linux)
//   rss_peak_MiB the process's peak resident set after them: the model,
//              its optimizer state and the steps
// B = batch, T = sequence. With TRAIN_STEP_DTYPE=bf16 in the environment
// the forward runs under torch.autocast's bf16 policy with bf16 attention
// (nn::Autocast(bf16, bf16), what `--dtype bf16 --attention-dtype bf16`
// trains with); train_step_torch.py --dtype bf16 sets it on both sides.

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/backward.h"
#include "bench/support.h"
#include "engine/memory_stats.h"
#include "nn/autocast.h"
#include "nn/checkpointing.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "nn/optim.h"

namespace reprise::bench {

// (B, T) i64: bytes from a 64-bit LCG (train_step_torch.py makes the same).
inline Tensor lcg_batch(int64_t B, int64_t T) {
  std::vector<int64_t> v(size_t(B * T));
  uint64_t s = 12345;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = int64_t(s >> 56);
  }
  return Tensor::from_vector(v, {B, T});
}

// The model of the HF folder named by the environment variable `env` (the
// side-by-side scripts pass the weights PyTorch uses), which must have
// `config`'s architecture; without it, `config` initialised as HF does from
// a fixed seed. nullptr (and the benchmark skipped) on a mismatch.
inline std::unique_ptr<nn::LlamaForCausalLM> bench_model(benchmark::State& state, const char* env,
                                                         const nn::LlamaConfig& config) {
  if (const char* dir = std::getenv(env)) {
    auto model = nn::load_model(dir);
    if (model->config().describe() != config.describe()) {
      const std::string what =
          std::string(env) + " is not the benchmark's config: " + model->config().describe();
      state.SkipWithError(what.c_str());
      return nullptr;
    }
    return model;
  }
  rng::Generator init(20261202);
  return std::make_unique<nn::LlamaForCausalLM>(config, init);
}

// Times training steps of `model` on `ids` (B, T) under `checkpointing`.
inline void train_step(benchmark::State& state, nn::LlamaForCausalLM& model,
                       const nn::CheckpointConfig& checkpointing, const Tensor& ids) {
  nn::LayerCheckpointing layers(checkpointing, model.dropout_generator(),
                                nn::moe_scopes_of(model.config()));
  nn::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.1});
  const char* dtype = std::getenv("TRAIN_STEP_DTYPE");
  const bool bf16 = dtype != nullptr && std::string_view(dtype) == "bf16";
  auto step = [&] {
    opt.zero_grad();
    nn::CausalLMOutput out;
    {
      std::optional<nn::Autocast> precision;
      if (bf16) precision.emplace(DType::bf16, DType::bf16);
      out = model.forward(ids, layers.runner());
    }
    Tensor loss = model.causal_lm_loss(out, ids);
    autograd::backward(loss);
    opt.step();
    return loss.item<float>();
  };
  // The first step's loss, before any update, for the script's check; it
  // also warms up the allocator and the thread pool.
  const float loss0 = step();
  // About ln V at initialisation (ln 256 = 5.55 for bytes).
  if (!(std::abs(loss0 - std::log(double(model.config().vocab_size))) < 1.5)) {
    state.SkipWithError("implausible initial loss");
    return;
  }

  memory_stats::reset_peaks();
  const MemorySnapshot before = memory_stats::snapshot();
  const bool rss = reset_peak_rss();
  const double rss_base = proc_status_mib("VmRSS");
  for (auto _ : state) benchmark::DoNotOptimize(step());
  const MemorySnapshot after = memory_stats::snapshot();

  const int64_t B = ids.size(0), T = ids.size(1);
  const double flops = model.training_flops_per_token(T) * double(B * T);
  state.counters["loss0"] = loss0;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  // Each step starts with zero_grad, which frees the previous gradients: the
  // floor under a step is what lives without them.
  const int64_t floor = before.total.live - before[MemoryKind::gradient].live;
  state.counters["peak_MiB"] = double(after.total.peak - floor) / (1024.0 * 1024.0);
  state.counters["saved_MiB"] =
      double(after[MemoryKind::saved_activation].peak - before[MemoryKind::saved_activation].live) /
      (1024.0 * 1024.0);
  if (rss) state.counters["rss_MiB"] = proc_status_mib("VmHWM") - rss_base;
  state.counters["rss_peak_MiB"] = proc_status_mib("VmHWM");
}

// Registers `fn` under `name` for arguments 0, 1 and 2 (the checkpointing
// cases), 3 timed steps each after the warm-up step, wall and process CPU
// time in ms. Call it from a namespace-scope initialiser, as BENCHMARK does.
inline benchmark::internal::Benchmark* register_train_step(const char* name,
                                                           void (*fn)(benchmark::State&)) {
  return benchmark::RegisterBenchmark(name, fn)
      ->Arg(0)
      ->Arg(1)
      ->Arg(2)
      ->Iterations(3)
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace reprise::bench
