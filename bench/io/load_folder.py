"""Peak memory while loading a Hub folder: makes a Llama-3.2-1B-shaped
folder with random weights as transformers' save_pretrained writes it (bf16,
sharded at 1 GB, with model.safetensors.index.json; meta-device init, so
the script itself stays small), then runs bench_load_folder on it.

    .venv/bin/python bench/io/load_folder.py --bench build/release/bench/bench_load_folder [--dir D]
"""

import argparse
import json
import os
import subprocess
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

LLAMA_32_1B = dict(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
    rms_norm_eps=1e-5, tie_word_embeddings=True,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192})


def make_folder(path):
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = LlamaForCausalLM(LlamaConfig(**LLAMA_32_1B)).to(torch.bfloat16)
    model.save_pretrained(path, max_shard_size="1GB")
    del model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--dir", help="reuse or create the folder here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.dir or os.path.join(tmp, "llama-3.2-1b")
        if not os.path.exists(os.path.join(path, "model.safetensors.index.json")):
            make_folder(path)
        shards = [f for f in os.listdir(path) if f.endswith(".safetensors")]
        size = sum(os.path.getsize(os.path.join(path, f)) for f in shards)
        out = subprocess.run([args.bench, "--benchmark_format=json"], check=True,
                             capture_output=True, text=True,
                             env=dict(os.environ, LOAD_FOLDER=path)).stdout
        run = json.loads(out)["benchmarks"][0]
        print(f"folder: {len(shards)} shards, {size / 2**20:.0f} MiB of bf16 weights")
        print(f"load: {run['real_time'] / 1e3:.1f} s; peak RSS {run['rss_MiB']:.0f} MiB "
              f"(before loading {run['base_MiB']:.0f}) for {run['model_MiB']:.0f} MiB of f32 "
              f"parameters: {run['rss_over_model']:.3f}x")


if __name__ == "__main__":
    main()
