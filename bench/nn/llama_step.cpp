// One Llama training step (forward, shifted loss, backward, AdamW update) at
// the benchmark size: hidden 256, 4 layers, 8 heads, 4 kv heads,
// intermediate 688, byte vocabulary 256, seq T = 256, batch B = 8, f32.
// bench/nn/llama_step_torch.py runs this beside Hugging Face's
// LlamaForCausalLM on PyTorch CPU and reports the ratio.
//
// Argument: the checkpoint policy (0 none, 1 full, 2 op-sac). Counters:
// bench/nn/train_step.h.
//
// Environment: LLAMA_STEP_MODEL=<HF folder> loads those weights (the script
// passes the ones PyTorch uses); otherwise the model is initialised as HF
// does from a fixed seed.
#include "bench/nn/train_step.h"

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

void BM_llama_step(benchmark::State& state) {
  const char* policies[] = {"none", "full", "op-sac"};
  auto model = bench::bench_model(state, "LLAMA_STEP_MODEL", bench_config());
  if (!model) return;
  bench::train_step(state, *model, nn::CheckpointConfig::parse(policies[state.range(0)]),
                    bench::lcg_batch(kB, kT));
}

[[maybe_unused]] const auto* registered =
    bench::register_train_step("BM_llama_step", BM_llama_step);

}  // namespace

BENCHMARK_MAIN();
