"""Side-by-side: one training step of a SmolLM2-135M-shaped Llama (hidden
576, 30 layers, 9 heads with 3 kv heads, intermediate 1536, vocabulary
49152, tied embeddings), reprise against transformers' LlamaForCausalLM on
PyTorch CPU on the same weights (train_step_torch.py says how both sides are
run, timed and measured). Batch 4 x 256, f32, 2 threads on both sides;
PyTorch runs HF's default attention ("sdpa"). Checkpointing: none, and full.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/nn/smollm_step_torch.py --bench build/release/bench/bench_smollm_step
"""

from transformers import LlamaConfig, LlamaForCausalLM

import train_step_torch

B, T = 4, 256
CASES = [("none", "BM_smollm_step/0/", "none"), ("full", "BM_smollm_step/1/", "full")]
VARIANTS = {"sdpa": {"attn_implementation": "sdpa"}}


def model():
    """SmolLM2-135M's config (HuggingFaceTB/SmolLM2-135M), freshly initialised."""
    config = LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
        rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
        attention_dropout=0.0)
    return LlamaForCausalLM(config)


if __name__ == "__main__":
    train_step_torch.main(model, "SMOLLM_STEP_MODEL", CASES, VARIANTS, B, T)
