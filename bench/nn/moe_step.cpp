// One training step (forward, shifted loss plus the router's load-balancing
// loss, backward, AdamW update) of the MoE example's model
// (examples/moe_train with no flags): nn::default_train_model()'s attention
// (hidden 128, 4 layers, 4 heads, 2 kv heads, byte vocabulary 256) with 8
// SwiGLU experts of 176 per layer, top-2 softmax routing, no capacity limit,
// aux loss coefficient 0.001, on the example's batch: B = 16 x T = 128, f32.
// bench/nn/moe_step_torch.py runs this beside Hugging Face's
// MixtralForCausalLM on PyTorch CPU and reports the ratio.
//
// Argument: 0 no checkpointing, 1 full checkpointing of every layer with the
// router's outputs force-saved (the default), 2 full with the router
// recomputed. Counters: bench/nn/train_step.h.
//
// Environment: MOE_STEP_MODEL=<HF folder> loads those weights (the script
// passes the ones PyTorch uses); otherwise the model is initialised as HF
// does from a fixed seed.
#include "bench/nn/train_step.h"
#include "nn/train_config.h"

namespace {

using namespace reprise;

constexpr int64_t kB = 16, kT = 128;

nn::LlamaConfig bench_config() {
  nn::LlamaConfig c = nn::default_train_model();
  c.intermediate_size = 176;
  c.family = nn::Family::mixtral;
  c.moe = nn::MoeConfig{.num_local_experts = 8, .num_experts_per_tok = 2};
  return c;
}

void BM_moe_step(benchmark::State& state) {
  auto model = bench::bench_model(state, "MOE_STEP_MODEL", bench_config());
  if (!model) return;
  nn::CheckpointConfig checkpointing =
      nn::CheckpointConfig::parse(state.range(0) == 0 ? "none" : "full");
  checkpointing.save_router = state.range(0) != 2;
  bench::train_step(state, *model, checkpointing, bench::lcg_batch(kB, kT));
}

[[maybe_unused]] const auto* registered = bench::register_train_step("BM_moe_step", BM_moe_step);

}  // namespace

BENCHMARK_MAIN();
