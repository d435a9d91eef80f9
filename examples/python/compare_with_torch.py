#!/usr/bin/env python3
"""Loads one Hugging Face Llama folder into reprise and into transformers,
runs one batch through both, and compares the loss and every parameter's
gradient. Inputs go to reprise without a copy (DLPack) and gradients come
back the same way.

    python examples/python/compare_with_torch.py                     # tests/fixtures/llama_tiny
    python examples/python/compare_with_torch.py --model DIR --batch 2 --seq 64

Exits with status 1 when a difference exceeds the tolerance of reprise's
golden tests (tests/nn/llama_golden_test.cpp).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import torch
import transformers

import reprise
from reprise import nn

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(ROOT / "tests" / "fixtures" / "llama_tiny"))
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    ours = nn.load_model(a.model)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        a.model, attn_implementation="eager", dtype=torch.float32)
    vocab = ours.config.vocab_size
    ids = torch.from_numpy(np.random.default_rng(a.seed).integers(0, vocab, (a.batch, a.seq)))
    labels = ids.clone()
    labels[0, :3] = -100  # an ignored prompt, as HF's -100

    loss = nn.LlamaForCausalLM.loss(ours(reprise.from_dlpack(ids)).logits,
                                    reprise.from_dlpack(labels))
    loss.backward()
    ref = theirs(input_ids=ids, labels=labels).loss
    ref.backward()

    ok = abs(loss.item() - ref.item()) <= 2e-5 + 1e-3 * abs(ref.item())
    print(f"loss  reprise {loss.item():.7f}  transformers {ref.item():.7f}  "
          f"{'ok' if ok else 'DIFFERS'}")
    print(f"{'gradient':<48} {'max |diff|':>11} {'max |grad|':>11}")
    for name, param in theirs.named_parameters():
        grad = ours.parameter(name).grad.torch()  # shares reprise's memory
        diff = (grad - param.grad).abs()
        scale = param.grad.abs().max().item()
        close = bool((diff <= 1e-4 * scale + 1e-3 * param.grad.abs()).all())
        ok = ok and close
        print(f"{name:<48} {diff.max().item():11.3e} {scale:11.3e}"
              f"{'' if close else '  DIFFERS'}")
    print("all within tolerance" if ok else "some values differ beyond tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
