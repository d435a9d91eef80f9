"""The Python examples, in short runs: train_tiny_llama.py prints the
losses of the C++ trainer digit for digit, grpo.py trains with no
sampler/trainer mismatch, and compare_with_torch.py agrees with
transformers."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES, FIXTURES, llama_train_binary, needs_transformers
from reprise import nn

# A small run that still exercises dropout, checkpointing and evaluation.
FLAGS = ["--steps", "6", "--batch", "2", "--seq", "32", "--hidden", "32", "--layers", "2",
         "--heads", "2", "--kv-heads", "1", "--intermediate", "64", "--dropout", "0.1",
         "--attn-dropout", "0.1", "--checkpoint-policy", "full", "--log-every", "1",
         "--eval-every", "3", "--eval-batches", "1", "--threads", "1"]


def run(cmd: list[str]) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def values(output: str, memory: bool = True) -> list[str]:
    """Each step line's step, loss, lr, grad norm, memory (unless not
    `memory`) and held-out loss, and the header lines that do not depend on
    the machine's speed."""
    out = []
    for line in output.splitlines():
        if line.startswith(("model ", "data ", "run ", "compute ")) or line.startswith("    "):
            out.append(line)
        elif line.startswith("step "):
            fields = [f.strip() for f in line.split("|")]
            out.append(" | ".join(f for f in fields if not f.endswith("tok/s")
                                  and not f.startswith(("MFU", "ETA"))
                                  and (memory or not f.startswith("mem "))))
    return out


def test_train_tiny_llama_prints_the_cpp_trainers_losses():
    printed = values(run([sys.executable, str(EXAMPLES / "train_tiny_llama.py"), *FLAGS]))
    config = nn.TrainConfig(steps=6, batch=2, seq=32)
    m = config.model
    m.hidden_size, m.num_hidden_layers, m.num_attention_heads = 32, 2, 2
    m.num_key_value_heads, m.intermediate_size = 1, 64
    m.dropout = m.attention_dropout = 0.1
    config.model = m
    config.checkpointing = nn.CheckpointConfig.parse("full")
    trainer = nn.Trainer(config, nn.TextDataset.builtin())
    steps = [line for line in printed if line.startswith("step")]
    assert len(steps) == 6
    for line in steps:
        s = trainer.step()
        expected = "step %5d/%d | loss %.4f | lr %.2e | grad norm %6.3f" % (
            s.step, 6, s.loss, s.lr, s.grad_norm)
        assert line.startswith(expected), (line, expected)
        if s.step % 3 == 0:
            assert line.endswith("val loss %.4f" % trainer.evaluate(1))


@pytest.mark.skipif(llama_train_binary() is None, reason="no llama_train binary built")
@pytest.mark.parametrize("precision", [[], ["--dtype", "bf16", "--attention-dtype", "bf16"]],
                         ids=["f32", "bf16"])
def test_train_tiny_llama_matches_the_llama_train_binary(precision):
    """Everything but the peak memory: the binary's process group (one
    process here) copies each bucket of gradients into a flat buffer, which
    at this size holds every gradient twice for a moment (80 KB, which the
    rounding to 0.1 MiB may or may not show); the example has no group."""
    flags = [*FLAGS, *precision]
    ours = run([sys.executable, str(EXAMPLES / "train_tiny_llama.py"), *flags])
    theirs = run([str(llama_train_binary()), *flags])
    assert values(ours, memory=False) == values(theirs, memory=False)
    peak = lambda out: [float(f.split()[1]) for line in out.splitlines()
                        if line.startswith("step ") for f in line.split(" | ")
                        if f.startswith("mem ")]
    assert all(a <= b for a, b in zip(peak(ours), peak(theirs), strict=True))


@pytest.mark.parametrize("flags", [[], ["--moe", "--replay", "--checkpoint-policy", "full"],
                                   ["--moe", "--kl", "0.05", "--updates", "2"]],
                         ids=["dense", "moe_replay_full", "moe_kl"])
def test_grpo_runs_with_no_mismatch_and_no_flips(flags):
    """A few steps from a briefly pretrained model: every step prints the
    sampler/trainer log-prob mismatch and the router flips, both 0."""
    out = run([sys.executable, str(EXAMPLES / "grpo.py"), "--steps", "2", "--pretrain-steps", "5",
               "--prompts", "4", "--group", "4", "--threads", "1", *flags])
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(steps) == 2
    for line in steps:
        assert re.search(r"reward [0-9.]+ \| logprob_mismatch 0 \| router_flips 0 \|", line), line


def test_bad_flags_exit_2():
    done = subprocess.run([sys.executable, str(EXAMPLES / "train_tiny_llama.py"), "--heads", "3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "heads" in done.stderr


@needs_transformers
def test_compare_with_torch_agrees():
    out = run([sys.executable, str(EXAMPLES / "compare_with_torch.py"),
               "--model", str(FIXTURES / "llama_tiny")])
    assert "all within tolerance" in out
    assert re.search(r"model\.layers\.1\.mlp\.down_proj\.weight", out)
