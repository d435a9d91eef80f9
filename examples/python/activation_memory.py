#!/usr/bin/env python3
"""Activation bytes per transformer layer, measured on nanogpt.py's Block
(a GPT layer written as user modules), beside Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", arXiv
2205.05198), Table 2, term by term:

    no recompute         sbh (34 + 5 a s / h)      16-bit activations
    selective recompute  34 sbh                    (the attention core recomputed)
    full recompute       2 sbh                     (the layer's input alone)

s: sequence, b: batch, h: hidden size, a: heads; 1-byte dropout masks.

    python examples/python/activation_memory.py                # f32 and bf16 tables
    python examples/python/activation_memory.py --seq 256 --batch 2 --hidden 256 --heads 8

A layer's bytes are what the engine counts as saved_activation once its
forward returns (reprise.memory_stats()), with dropout on. reprise's
dropout draws from counter-based streams, so backward regenerates every
mask instead of saving it; the fused attention (sdpa) saves no s x s
matrix, only its output and one log-sum-exp per row.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import reprise

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nanogpt  # noqa: E402


@dataclass(frozen=True)
class Shape:
    s: int
    b: int
    h: int
    a: int


def measure(shape: Shape, policy: str, attention: str, dtype: str) -> int:
    """saved_activation bytes one Block's forward leaves for backward."""
    config = nanogpt.GPTConfig(block_size=shape.s, n_layer=1, n_head=shape.a, n_embd=shape.h,
                               dropout=0.1, attention=attention)
    block = nanogpt.Block(config, reprise.Generator(1))
    x = reprise.randn(shape.b, shape.s, shape.h, generator=reprise.Generator(2))
    before = reprise.memory_stats()[reprise.MemoryKind.saved_activation].live
    with reprise.nn.autocast(dtype):
        if policy == "none":
            y = block(x)
        else:
            y = reprise.nn.checkpoint(block, x, policy=nanogpt.parse_policy(policy))
    after = reprise.memory_stats()[reprise.MemoryKind.saved_activation].live
    del y
    return after - before


@dataclass(frozen=True)
class Term:
    what: str
    paper: tuple[float, float]  # (sbh, as^2 b) coefficients in the paper, 16-bit bytes
    bytes: int                  # reprise's measured term, in bytes


def expected_terms(sh: Shape, policy: str, attention: str, dtype: str) -> list[Term]:
    """reprise's bytes per saved tensor of the Block, by what each op keeps
    for backward; the paper's coefficient for the same tensor beside it.
    f32: 4 bytes per element. bf16 (reprise.nn.autocast): only the
    projections' inputs are bf16 copies (2 bytes); their outputs are
    widened back to f32, so everything else stays 4 bytes."""
    sbh, asb, ass_b, sb = sh.s * sh.b * sh.h, sh.a * sh.s * sh.b, sh.a * sh.s * sh.s * sh.b, \
        sh.s * sh.b
    proj_in = 2 if dtype == "bf16" else 4  # bytes per element of a projection's saved input
    # The causal mask (bool, s x s) is data the layer makes, not a value
    # derived from its input: masked_fill saves it, and a region that
    # recomputes masked_fill keeps it with the fill value (a 0-d f32), as it
    # keeps any constant made inside it. The paper's fused kernel makes it
    # on the fly.
    mask = [Term("causal mask, bool", (0, 0), sh.s * sh.s)] if attention == "math" else []
    fill = [Term("masked_fill's value, kept to replay it", (0, 0), 4)] if (
        attention == "math" and policy != "none") else []
    if policy == "full":
        return [Term("layer input", (2, 0), 4 * sbh)] + mask + fill
    terms = [
        Term("LayerNorm 1 input", (2, 0), 4 * sbh),
        Term("LayerNorm 1 mean and 1/std", (0, 0), 2 * 4 * sb),
        Term("QKV projection input", (2, 0), proj_in * sbh),
        Term("Q, K (one buffer with V)", (4, 0), 4 * 2 * sbh),
        Term("V", (2, 0), 4 * sbh),
    ] + mask + fill
    if attention == "math" and policy == "none":
        terms += [
            Term("softmax output", (0, 2), 4 * ass_b),
            Term("attention dropout mask", (0, 1), 0),
            Term("attention dropout output", (0, 2), 4 * ass_b),
        ]
    elif attention == "math":  # selective: the core is recomputed from Q, K, V
        terms += [Term("softmax output, dropout mask and output (recomputed)", (0, 0), 0)]
    elif policy == "none":
        terms += [Term("attention output and row log-sum-exp (fused kernel)", (0, 0),
                       4 * sbh + 4 * asb)]
    else:
        terms += [Term("attention output and row log-sum-exp (recomputed)", (0, 0), 0)]
    terms += [
        Term("output projection input", (2, 0), proj_in * sbh),
        Term("attention residual dropout mask", (1, 0), 0),
        Term("LayerNorm 2 input", (2, 0), 4 * sbh),
        Term("LayerNorm 2 mean and 1/std", (0, 0), 2 * 4 * sb),
        Term("MLP first projection input", (2, 0), proj_in * sbh),
        Term("GELU input", (8, 0), 4 * 4 * sbh),
        Term("MLP second projection input", (8, 0), proj_in * 4 * sbh),
        Term("MLP dropout mask", (1, 0), 0),
    ]
    return terms


def paper_bytes(sh: Shape, policy: str) -> float:
    sbh = sh.s * sh.b * sh.h
    if policy == "none":
        return sbh * (34 + 5 * sh.a * sh.s / sh.h)
    return 34 * sbh if policy == "selective" else 2 * sbh


POLICIES = {"none": "no recompute", "selective": "selective recompute",
            "full": "full recompute"}


def table(sh: Shape, dtype: str) -> str:
    sbh = sh.s * sh.b * sh.h
    lines = [f"{dtype}, s={sh.s} b={sh.b} h={sh.h} a={sh.a} (sbh = {sbh} elements)", "",
             "| policy | attention | paper, 16-bit (bytes) | reprise expected | reprise measured "
             "| measured / sbh |",
             "|---|---|---:|---:|---:|---:|"]
    for policy, name in POLICIES.items():
        for attention in ("math", "sdpa"):
            want = sum(t.bytes for t in expected_terms(sh, policy, attention, dtype))
            got = measure(sh, policy, attention, dtype)
            lines.append(f"| {name} | {attention} | {paper_bytes(sh, policy):,.0f} | {want:,} "
                         f"| {got:,} | {got / sbh:.2f} |")
    return "\n".join(lines)


def terms_table(sh: Shape, dtype: str) -> str:
    sbh, ass_b = sh.s * sh.b * sh.h, sh.a * sh.s * sh.s * sh.b
    lines = [f"no recompute, math attention, {dtype}: each saved tensor", "",
             "| tensor | paper (16-bit) | reprise bytes | reprise / sbh |", "|---|---|---:|---:|"]
    for t in expected_terms(sh, "none", "math", dtype):
        paper = " + ".join(p for p in (f"{t.paper[0]:g} sbh" if t.paper[0] else "",
                                       f"{t.paper[1]:g} as²b" if t.paper[1] else "") if p) or "-"
        lines.append(f"| {t.what} | {paper} | {t.bytes:,} | {t.bytes / sbh:.3f} |")
    del ass_b
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    a = p.parse_args(argv)
    sh = Shape(s=a.seq, b=a.batch, h=a.hidden, a=a.heads)
    for dtype in ("f32", "bf16"):
        print(table(sh, dtype), end="\n\n")
    print(terms_table(sh, "f32"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
