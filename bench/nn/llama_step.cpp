// One Llama training step (forward, shifted loss, backward, AdamW update) at
// the benchmark size: hidden 256, 4 layers, 8 heads, 4 kv heads,
// intermediate 688, byte vocabulary 256, seq T = 256, batch B = 8, f32.
// bench/nn/llama_step_torch.py runs this beside Hugging Face's
// LlamaForCausalLM on PyTorch CPU and reports the ratio.
//
// Argument: the checkpoint policy (0 none, 1 full, 2 op-sac).
// Counters: loss0 (the first step's loss, which the script compares with
// PyTorch's on the same weights and batch before it trusts any timing),
// GFLOP/s (LlamaForCausalLM::training_flops_per_token), peak_MiB (MemoryStats'
// peak over a step above the parameters, optimizer state and batch that
// live throughout: gradients, activations, temporaries), saved_MiB (peak
// saved activations) and rss_MiB (the rise of the process's peak resident
// set over the timed steps, Linux).
//
// Environment: LLAMA_STEP_MODEL=<HF folder> loads those weights (the script
// passes the ones PyTorch uses); otherwise the model is initialised as HF
// does from a fixed seed.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "autograd/backward.h"
#include "engine/memory_stats.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "nn/optim.h"

namespace {

using namespace reprise;

constexpr int64_t kB = 8, kT = 256;

nn::LlamaConfig bench_config() {
  nn::LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.max_position_embeddings = kT;
  return c;
}

// The batch: bytes from a 64-bit LCG (llama_step_torch.py makes the same).
Tensor batch_ids() {
  std::vector<int64_t> v(size_t(kB * kT));
  uint64_t s = 12345;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = int64_t(s >> 56);
  }
  return Tensor::from_vector(v, {kB, kT});
}

double proc_status_mib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return -1;
}

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return bool(clear.flush());
}

void BM_llama_step(benchmark::State& state) {
  const char* policies[] = {"none", "full", "op-sac"};
  const char* policy = policies[state.range(0)];
  std::unique_ptr<nn::LlamaForCausalLM> model;
  if (const char* dir = std::getenv("LLAMA_STEP_MODEL")) {
    model = nn::load_llama(dir);
    if (model->config().hidden_size != 256 || model->config().num_hidden_layers != 4) {
      state.SkipWithError("LLAMA_STEP_MODEL is not the benchmark's config");
      return;
    }
  } else {
    rng::Generator init(20261202);
    model = std::make_unique<nn::LlamaForCausalLM>(bench_config(), init);
  }
  model->set_checkpointing(nn::ActivationCheckpointing::parse(policy));
  nn::AdamW opt(model->parameters(), {.lr = 1e-3, .weight_decay = 0.1});
  const Tensor ids = batch_ids();

  auto step = [&] {
    opt.zero_grad();
    Tensor loss = nn::LlamaForCausalLM::loss(model->forward(ids), ids);
    autograd::backward(loss);
    opt.step();
    return loss.item<float>();
  };
  // The first step's loss, before any update, for the script's check; it
  // also warms up the allocator and the thread pool.
  const float loss0 = step();
  if (!(loss0 > 4.0f && loss0 < 7.0f)) {  // about ln 256 = 5.55 at initialisation
    state.SkipWithError("implausible initial loss");
    return;
  }

  memory_stats::reset_peaks();
  const MemorySnapshot before = memory_stats::snapshot();
  const bool rss = reset_peak_rss();
  const double rss_base = proc_status_mib("VmRSS");
  for (auto _ : state) benchmark::DoNotOptimize(step());
  const MemorySnapshot after = memory_stats::snapshot();

  const double flops = model->training_flops_per_token(kT) * double(kB * kT);
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
}

BENCHMARK(BM_llama_step)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(3)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
