// One training step (forward, shifted loss plus the router's load-balancing
// loss, backward, AdamW update) of a Qwen3-MoE-shaped model of 0.53B
// parameters, 0.20B of them in a token's products (the 156M head, attention
// and 8 of 64 experts per layer): Qwen3's vocabulary (151936, untied
// head), hidden 1024, 8 layers of 16 heads with 4 kv heads of 64 and
// per-head q/k RMSNorm, each layer 64 SwiGLU experts of 128 with top-8
// softmax routing, gates renormalized, aux loss coefficient 0.001; batch
// B = 2 x T = 256 byte tokens; f32. bench/nn/qwen3_moe_step_torch.py runs
// it beside transformers' Qwen3MoeForCausalLM on PyTorch CPU on the same
// folder, one process at a time (both sides hold 8.5 GB of weights and
// AdamW state).
//
// Argument: 0 no checkpointing, 1 full checkpointing of every layer with the
// router's outputs force-saved (the default), 2 full with the router
// recomputed. Counters: bench/nn/train_step.h.
//
// Environment: QWEN3_MOE_STEP_MODEL=<HF folder> loads those weights (the
// script passes the ones PyTorch uses); otherwise the model is initialised
// as HF does from a fixed seed.
#include "bench/nn/train_step.h"

namespace {

using namespace reprise;

constexpr int64_t kB = 2, kT = 256;

nn::LlamaConfig qwen3_moe_0_5b() {
  nn::LlamaConfig c;
  c.family = nn::Family::qwen3_moe;
  c.vocab_size = 151936;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;  // unused: every layer is MoE
  c.num_hidden_layers = 8;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 64;
  c.qk_norm = nn::QkNorm::per_head;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.moe = nn::MoeConfig{.num_local_experts = 64,
                        .num_experts_per_tok = 8,
                        .router_aux_loss_coef = 0.001,
                        .norm_topk_prob = true,
                        .moe_intermediate_size = 128};
  return c;
}

void BM_qwen3_moe_step(benchmark::State& state) {
  auto model = bench::bench_model(state, "QWEN3_MOE_STEP_MODEL", qwen3_moe_0_5b());
  if (!model) return;
  nn::CheckpointConfig checkpointing =
      nn::CheckpointConfig::parse(state.range(0) == 0 ? "none" : "full");
  checkpointing.save_router = state.range(0) != 2;
  bench::train_step(state, *model, checkpointing, bench::lcg_batch(kB, kT));
}

[[maybe_unused]] const auto* registered =
    bench::register_train_step("BM_qwen3_moe_step", BM_qwen3_moe_step);

}  // namespace

BENCHMARK_MAIN();
