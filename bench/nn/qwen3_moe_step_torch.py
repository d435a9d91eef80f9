"""Side-by-side: one training step of a Qwen3-MoE-shaped model of 0.53B
parameters (bench/nn/qwen3_moe_step.cpp: Qwen3's vocabulary, hidden 1024, 8
layers of 64 experts of 128, top-8), reprise against transformers'
Qwen3MoeForCausalLM on PyTorch CPU on the same weights (train_step_torch.py
says how both sides are run, timed and measured). Batch 2 x 256, f32, 2
threads on both sides; PyTorch runs sdpa attention and transformers'
default experts kernel (grouped_mm). The loss both sides train is the
shifted cross-entropy plus 0.001 x the load-balancing loss.

Weights and AdamW state take 8.5 GB on each side, so every torch
measurement runs in a process of its own, never beside ours
(train_step_torch.compare's one_at_a_time).

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/nn/qwen3_moe_step_torch.py --bench build/release/bench/bench_qwen3_moe_step
Or write the folder only (bf16 shards, as save_pretrained writes a Hub
checkpoint), to train it with moe_train --init-from:
    .venv/bin/python bench/nn/qwen3_moe_step_torch.py --save-folder DIR
"""

import sys

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

import train_step_torch

B, T = 2, 256
CASES = [("none", "BM_qwen3_moe_step/0/", "none"),
         ("full (router saved)", "BM_qwen3_moe_step/1/", "full")]
VARIANTS = {"grouped_mm": {"attn_implementation": "sdpa", "experts_implementation": "grouped_mm"}}


def model():
    """The benchmark's model, freshly initialised (HF's init, seeded by the caller)."""
    config = Qwen3MoeConfig(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=8,
        num_attention_heads=16, num_key_value_heads=4, head_dim=64, max_position_embeddings=4096,
        rms_norm_eps=1e-6, rope_theta=1000000.0, num_experts=64, num_experts_per_tok=8,
        moe_intermediate_size=128, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        router_aux_loss_coef=0.001, output_router_logits=True, tie_word_embeddings=False,
        attention_dropout=0.0)
    return Qwen3MoeForCausalLM(config)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--save-folder":
        torch.manual_seed(0)
        model().to(torch.bfloat16).save_pretrained(sys.argv[2], max_shard_size="200MB")
    else:
        train_step_torch.main(model, "QWEN3_MOE_STEP_MODEL", CASES, VARIANTS, B, T,
                              one_at_a_time=True)
