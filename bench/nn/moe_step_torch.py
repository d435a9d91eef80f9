"""Side-by-side: one training step of the MoE example's model, reprise
against Hugging Face transformers' MixtralForCausalLM on PyTorch CPU eager
(train_step_torch.py says how both sides are run, timed and measured).

Model (examples/moe_train with no flags, bench/nn/moe_step.cpp): hidden
128, 4 layers, 4 heads, 2 kv heads, 8 SwiGLU experts of 176 per layer, top-2
softmax routing with renormalised gates, no capacity limit, byte vocabulary
256, untied head, RMSNorm eps 1e-5; batch 16 x seq 128 (the example's
batch); f32; 2 threads on both sides. The loss both sides train is the
shifted cross-entropy plus 0.001 x HF's load_balancing_loss_func (Mixtral
with output_router_logits=True; reprise's causal_lm_loss). The weights
travel as a Mixtral folder (save_pretrained), which reprise loads by its
Mixtral names (block_sparse_moe.gate, experts.{e}.w1/w2/w3).

PyTorch runs sdpa attention with transformers' default experts kernel
("grouped_mm": torch's grouped matmul over the tokens sorted by expert) and
with "eager" (a Python loop over the experts that received tokens).
Checkpointing: none; full with the router's outputs force-saved (reprise's
default) and full with the router recomputed (ours), both against HF's full
checkpointing, which recomputes everything.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/nn/moe_step_torch.py --bench build/bench/bench_moe_step
"""

from transformers import MixtralConfig, MixtralForCausalLM

import train_step_torch

B, T = 16, 128
CASES = [("none", "BM_moe_step/0/", "none"), ("full (router saved)", "BM_moe_step/1/", "full"),
         ("full (router recomputed)", "BM_moe_step/2/", "full")]
VARIANTS = {experts: {"attn_implementation": "sdpa", "experts_implementation": experts}
            for experts in ("grouped_mm", "eager")}


def model():
    """The benchmark's model, freshly initialised (HF's init, seeded by the caller)."""
    config = MixtralConfig(
        vocab_size=256, hidden_size=128, intermediate_size=176, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
        rms_norm_eps=1e-5, num_local_experts=8, num_experts_per_tok=2, router_aux_loss_coef=0.001,
        output_router_logits=True, sliding_window=None, attention_dropout=0.0,
        tie_word_embeddings=False)
    return MixtralForCausalLM(config)


if __name__ == "__main__":
    train_step_torch.main(model, "MOE_STEP_MODEL", CASES, VARIANTS, B, T)
