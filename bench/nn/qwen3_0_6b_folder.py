"""Writes a Qwen3-0.6B-shaped folder with random weights, as transformers'
save_pretrained writes a Hub checkpoint (bf16, sharded, with
model.safetensors.index.json): Qwen3-0.6B's config (vocabulary 151936,
hidden 1024, 28 layers of 16 heads with 8 kv heads of 128, per-head q/k
RMSNorm, ffn 3072, tied embeddings), initialised as transformers does.
bench/RESULTS.md ("Qwen3-0.6B under full checkpointing and bf16") trains it with llama_train --init-from.

    .venv/bin/python bench/nn/qwen3_0_6b_folder.py DIR
"""

import sys

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

QWEN3_0_6B = dict(
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
    rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False)

if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**QWEN3_0_6B)).to(torch.bfloat16)
    model.save_pretrained(sys.argv[1], max_shard_size="500MB")
