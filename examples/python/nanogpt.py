#!/usr/bin/env python3
"""A GPT-2 written as user modules, the way research code writes one in
PyTorch (nanoGPT's model: LayerNorm, learned positions, biased
projections, exact GELU, dropout, an output head tied to the token
embedding), trained on the built-in corpus, with any block checkpointed
under a recompute policy.

    python examples/python/nanogpt.py                          # 200 steps, no recompute
    python examples/python/nanogpt.py --checkpoint-policy full --dropout 0.1
    python examples/python/nanogpt.py --checkpoint-policy selective --attention math

--checkpoint-policy: none | full (each block keeps its input only) |
selective (each block recomputes its attention core: Korthikanti et al.
2022's selective recomputation) | save:OP,OP (saves those ops' outputs).
Recomputed blocks give the same losses, bit for bit, with dropout on.

--attention: sdpa (the fused kernel, which saves no T x T matrix) or math
(q k^T, mask, softmax, dropout and the product with v as separate ops, as
the paper's layer has them).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import reprise
import reprise.nn.functional as F
from reprise import nn


@dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = reprise.nn.BYTE_VOCAB_SIZE
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    attention: str = "sdpa"  # or "math"


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, generator: reprise.Generator | None) -> None:
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise reprise.Error(f"nanogpt: n_embd {config.n_embd} is not a multiple of n_head "
                                f"{config.n_head}")
        if config.attention not in ("sdpa", "math"):
            raise reprise.Error(f"nanogpt: attention {config.attention!r}: expected sdpa or math")
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout, generator=generator)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
        self.attention, self.generator = config.attention, generator

    def forward(self, x: reprise.Tensor) -> reprise.Tensor:
        B, T, C = x.shape  # (B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        with reprise.scope("core"):
            if self.attention == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True,
                                                   generator=self.generator)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))  # (B, nh, T, T)
                future = reprise.ones(T, T).triu(1).bool()
                att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
                att = F.dropout(att, p, self.training, generator=self.generator)
                y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig, generator: reprise.Generator | None) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout, generator=generator)

    def forward(self, x: reprise.Tensor) -> reprise.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, generator: reprise.Generator | None) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config, generator)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config, generator)

    def forward(self, x: reprise.Tensor) -> reprise.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT: weights drawn as it draws them (N(0, 0.02), the
    residual projections scaled by 1/sqrt(2 n_layer), biases 0) from the
    stream 'init' of generator."""

    def __init__(self, config: GPTConfig, generator: reprise.Generator | None = None) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout, generator=generator)
        self.h = nn.ModuleList(Block(config, generator) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # tied: one parameter, two uses
        self.checkpoint_policy: reprise.Policy | None = None
        with reprise.no_grad():
            for name, m in self.named_modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    std = 0.02 / math.sqrt(2 * config.n_layer) if name.endswith("c_proj") else 0.02
                    reprise.normal_(m.weight, 0.0, std, generator=generator)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    m.bias.zero_()

    def forward(self, idx: reprise.Tensor,
                targets: reprise.Tensor | None = None) -> tuple[reprise.Tensor, reprise.Tensor | None]:
        B, T = idx.shape  # idx (B, T) i64
        if T > self.config.block_size:
            raise reprise.Error(f"nanogpt: sequence of {T} tokens, block_size is "
                                f"{self.config.block_size}")
        x = self.drop(self.wte(idx) + self.wpe(reprise.arange(T)))  # (B, T, C)
        for block in self.h:
            if self.checkpoint_policy is None or not self.training:
                x = block(x)
            else:
                x = nn.checkpoint(block, x, policy=self.checkpoint_policy)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def parse_policy(text: str) -> reprise.Policy | None:
    if text == "none":
        return None
    if text == "full":
        return reprise.policies.full()
    if text == "selective":
        return reprise.policies.combine([reprise.policies.recompute_scopes("*attn.core"),
                                         reprise.policies.save_all()])
    if text.startswith("save:"):
        return reprise.policies.save_ops(text[len("save:"):].split(","))
    raise reprise.Error(f"nanogpt: --checkpoint-policy {text!r}: expected none, full, "
                        "selective or save:OP,OP")


def configure_optimizer(model: GPT, lr: float, weight_decay: float) -> reprise.optim.AdamW:
    """nanoGPT's groups: matrices decay, biases and norm weights do not."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return reprise.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                {"params": no_decay, "weight_decay": 0.0}],
                               lr=lr, betas=(0.9, 0.95), eps=1e-8)


def split(batch: reprise.Tensor) -> tuple[reprise.Tensor, reprise.Tensor]:
    """(B, T + 1) tokens -> inputs (B, T) and next-token targets (B, T)."""
    return batch[:, :-1].contiguous(), batch[:, 1:].contiguous()


def train_step(model: GPT, optimizer: reprise.optim.AdamW, batch: reprise.Tensor,
               grad_clip: float) -> float:
    x, y = split(batch)
    _, loss = model(x, y)
    reprise.backward(loss)
    if grad_clip > 0:
        reprise.nn.clip_grad_norm(
            [reprise.nn.NamedParameter(n, p) for n, p in model.named_parameters()], grad_clip)
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def parse_args(argv: list[str]) -> argparse.Namespace:
    d = GPTConfig()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--block-size", type=int, default=d.block_size)
    p.add_argument("--layers", type=int, default=d.n_layer)
    p.add_argument("--heads", type=int, default=d.n_head)
    p.add_argument("--embd", type=int, default=d.n_embd)
    p.add_argument("--dropout", type=float, default=d.dropout)
    p.add_argument("--attention", default=d.attention, choices=["sdpa", "math"])
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--checkpoint-policy", default="none",
                   help="none | full | selective | save:OP,OP")
    p.add_argument("--log-every", type=int, default=10)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    config = GPTConfig(block_size=a.block_size, n_layer=a.layers, n_head=a.heads,
                       n_embd=a.embd, dropout=a.dropout, attention=a.attention)
    generator = reprise.Generator(a.seed)
    model = GPT(config, generator)
    model.checkpoint_policy = parse_policy(a.checkpoint_policy)
    optimizer = configure_optimizer(model, a.lr, a.weight_decay)
    data = reprise.nn.TextDataset.builtin()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"nanogpt: {n_params / 1e6:.2f}M parameters, {config}, "
          f"checkpoint policy {a.checkpoint_policy}")
    start = time.perf_counter()
    for step in range(a.steps):
        batch = data.sample(a.batch, a.block_size + 1, generator).input_ids
        loss = train_step(model, optimizer, batch, a.grad_clip)
        if step % a.log_every == 0 or step == a.steps - 1:
            elapsed = time.perf_counter() - start
            print(f"step {step:5d}  loss {loss:.4f}  {elapsed / (step + 1) * 1e3:.0f} ms/step",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
