"""Side-by-side: one Llama training step, reprise against Hugging Face
transformers' LlamaForCausalLM on PyTorch CPU (train_step_torch.py says how
both sides are run, timed and measured).

Model: hidden 256, 4 layers, 8 heads, 4 kv heads, intermediate 688, byte
vocabulary 256; batch 8 x seq 256; f32; 2 threads on both sides. PyTorch
runs HF's default attention ("sdpa": F.scaled_dot_product_attention) and,
for reference, "eager" (explicit softmax). Checkpointing: none, and full.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/nn/llama_step_torch.py --bench build/bench/bench_llama_step
"""

from transformers import LlamaConfig, LlamaForCausalLM

import train_step_torch

B, T = 8, 256
CASES = [("none", "BM_llama_step/0/", "none"), ("full", "BM_llama_step/1/", "full")]
VARIANTS = {attn: {"attn_implementation": attn} for attn in ("sdpa", "eager")}


def model():
    """The benchmark's model, freshly initialised (HF's init, seeded by the caller)."""
    config = LlamaConfig(
        vocab_size=256, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=T,
        attention_dropout=0.0, tie_word_embeddings=False)
    return LlamaForCausalLM(config)


if __name__ == "__main__":
    train_step_torch.main(model, "LLAMA_STEP_MODEL", CASES, VARIANTS, B, T)
