// One training step (forward, shifted loss, backward, AdamW update) of a
// SmolLM2-135M-shaped Llama: hidden 576, 30 layers, 9 heads with 3 kv heads
// of 64, intermediate 1536, vocabulary 49152, tied embeddings; batch B = 4
// of T = 256 byte tokens; f32. bench/nn/smollm_step_torch.py runs it beside
// transformers' LlamaForCausalLM on PyTorch CPU on the same folder.
//
// Argument: the checkpoint policy (0 none, 1 full, 2 op-sac). Counters:
// bench/nn/train_step.h.
//
// Environment: SMOLLM_STEP_MODEL=<HF folder> loads those weights (the script
// passes the ones PyTorch uses); otherwise the model is initialised as HF
// does from a fixed seed.
#include "bench/nn/train_step.h"

namespace {

using namespace reprise;

constexpr int64_t kB = 4, kT = 256;

nn::LlamaConfig smollm2_135m() {
  nn::LlamaConfig c;
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_hidden_layers = 30;
  c.num_attention_heads = 9;
  c.num_key_value_heads = 3;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 100000.0;
  c.tie_word_embeddings = true;
  return c;
}

void BM_smollm_step(benchmark::State& state) {
  const char* policies[] = {"none", "full", "op-sac"};
  auto model = bench::bench_model(state, "SMOLLM_STEP_MODEL", smollm2_135m());
  if (!model) return;
  bench::train_step(state, *model, nn::CheckpointConfig::parse(policies[state.range(0)]),
                    bench::lcg_batch(kB, kT));
}

[[maybe_unused]] const auto* registered =
    bench::register_train_step("BM_smollm_step", BM_smollm_step);

}  // namespace

BENCHMARK_MAIN();
