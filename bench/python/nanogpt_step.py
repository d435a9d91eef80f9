#!/usr/bin/env python3
"""One training step of examples/python/nanogpt.py (the GPT-2 written as
reprise user modules) beside the same model written in PyTorch, from the
same weights on the same batch: forward, backward, gradient clipping and
AdamW, 2 threads each side.

    PYTHONPATH=build/release/python .venv/bin/python bench/python/nanogpt_step.py

Two sizes: a small one, where a step is many small ops and per-op
dispatch dominates, and a GEMM-bound one. For each, rounds alternate which
side runs first; a round times --steps steps after one warm-up step. The
table gives the median wall time per step over the rounds, and the ratio
reprise / PyTorch (below 1: reprise is faster). The first step's losses
of both sides are printed as a check that they run the same model.
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as TF

import reprise

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))
import nanogpt  # noqa: E402

SIZES = {
    # name: (layers, heads, embd, block, batch)
    "small (dispatch-bound)": (2, 2, 64, 32, 4),
    "GEMM-bound": (4, 8, 512, 256, 8),
}


class TorchAttention(torch.nn.Module):
    def __init__(self, c: nanogpt.GPTConfig) -> None:
        super().__init__()
        self.c_attn = torch.nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = torch.nn.Linear(c.n_embd, c.n_embd)
        self.n_head, self.n_embd = c.n_head, c.n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TorchBlock(torch.nn.Module):
    def __init__(self, c: nanogpt.GPTConfig) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(c.n_embd)
        self.attn = TorchAttention(c)
        self.ln_2 = torch.nn.LayerNorm(c.n_embd)
        self.mlp = torch.nn.ModuleDict({"c_fc": torch.nn.Linear(c.n_embd, 4 * c.n_embd),
                                        "c_proj": torch.nn.Linear(4 * c.n_embd, c.n_embd)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp["c_proj"](TF.gelu(self.mlp["c_fc"](self.ln_2(x))))


class TorchGPT(torch.nn.Module):
    """nanoGPT's model in PyTorch, under nanogpt.py's parameter names."""

    def __init__(self, c: nanogpt.GPTConfig) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = torch.nn.Embedding(c.block_size, c.n_embd)
        self.h = torch.nn.ModuleList(TorchBlock(c) for _ in range(c.n_layer))
        self.ln_f = torch.nn.LayerNorm(c.n_embd)
        self.lm_head = torch.nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return TF.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def make_pair(size: tuple[int, ...]):
    layers, heads, embd, block, batch = size
    config = nanogpt.GPTConfig(block_size=block, n_layer=layers, n_head=heads, n_embd=embd)
    ours = nanogpt.GPT(config, reprise.Generator(1))
    theirs = TorchGPT(config)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(ours.state_dict()[name].tolist(),
                                                dtype=np.float32)))
    data = reprise.nn.TextDataset.builtin()
    tokens = data.sample(batch, block + 1, reprise.Generator(2)).input_ids
    return config, ours, theirs, tokens


def time_ours(model, optimizer, tokens, steps: int) -> tuple[float, float]:
    first = nanogpt.train_step(model, optimizer, tokens, grad_clip=1.0)
    start = time.perf_counter()
    for _ in range(steps):
        nanogpt.train_step(model, optimizer, tokens, grad_clip=1.0)
    return (time.perf_counter() - start) / steps, first


def time_theirs(model, optimizer, tokens, steps: int) -> tuple[float, float]:
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step() -> float:
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    first = step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps, first


def torch_optimizer(model: TorchGPT) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=1e-3, betas=(0.9, 0.95), eps=1e-8)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--size", choices=list(SIZES), action="append")
    a = p.parse_args()
    torch.set_num_threads(2)
    reprise.set_num_threads(2)
    print(f"torch {torch.__version__}, reprise {reprise.__version__} "
          f"({reprise.backend_name()}), {platform.processor() or platform.machine()}, "
          "2 threads each")
    print("| size | layers x embd, batch x block | reprise ms/step | PyTorch ms/step | ratio |")
    print("|---|---|---:|---:|---:|")
    for name in a.size or list(SIZES):
        size = SIZES[name]
        config, ours, theirs, tokens = make_pair(size)
        ours_opt = nanogpt.configure_optimizer(ours, lr=1e-3, weight_decay=0.1)
        theirs_opt = torch_optimizer(theirs)
        ttokens = torch.tensor(tokens.tolist(), dtype=torch.int64)
        mine, others = [], []
        for r in range(a.rounds):
            sides = [("ours", lambda: time_ours(ours, ours_opt, tokens, a.steps)),
                     ("theirs", lambda: time_theirs(theirs, theirs_opt, ttokens, a.steps))]
            if r % 2:
                sides.reverse()
            for side, run in sides:
                seconds, first = run()
                (mine if side == "ours" else others).append(seconds)
                if r == 0:
                    print(f"  {name}: {side} first loss {first:.6f}", file=sys.stderr)
        m, o = statistics.median(mine), statistics.median(others)
        layers, heads, embd, block, batch = size
        print(f"| {name} | {layers} x {embd}, {batch} x {block} | {m * 1e3:.2f} | "
              f"{o * 1e3:.2f} | {m / o:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
