#!/usr/bin/env python3
"""What calling reprise from Python costs.

1. One small op, `a + b` on 16 f32 elements, from Python: reprise against
   PyTorch (both without grad, and with the op recorded for autograd), and
   the same op called from C++ (bench_op_call, when --bench names it), so
   that the binding's own share is the difference.
2. A Python checkpoint policy against the built-in one that decides the
   same (recompute everything): the tiny Hugging Face Llama's forward with
   each decoder layer a region, per region and per value asked about.

    cmake --build build/release --target bench_op_call
    python bench/python/overhead.py --bench build/release/bench/bench_op_call

Times are the best of --rounds rounds (each a mean over a loop), rounds
alternating between the sides.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import timeit

import reprise
from reprise import nn, policies

ROOT = pathlib.Path(__file__).resolve().parents[2]


def best_ns(stmt, number: int, rounds: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=rounds)) / number * 1e9


def op_calls(rounds: int, bench: str | None) -> list[tuple[str, float]]:
    rows = []
    a, b = reprise.full(16, 1.5), reprise.full(16, 2.0)
    ag = reprise.full(16, 1.5, requires_grad=True)
    cases = [("reprise a + b, no grad", lambda: a + b),
             ("reprise a + b, recorded", lambda: ag + b),
             ("reprise is_grad_enabled() (a call, no op)", reprise.is_grad_enabled),
             ("reprise a.ndim (a property)", lambda: a.ndim)]
    try:
        import torch

        torch.set_num_threads(1)
        ta, tb = torch.full((16,), 1.5), torch.full((16,), 2.0)
        tag = torch.full((16,), 1.5, requires_grad=True)
        cases += [("torch a + b, no grad", lambda: ta + tb),
                  ("torch a + b, recorded", lambda: tag + tb)]
    except ImportError:
        pass
    times = {name: [] for name, _ in cases}
    for _ in range(rounds):  # alternate the sides within each round
        for name, f in cases:
            times[name].append(best_ns(f, 20000, 1))
    rows += [(name, min(t)) for name, t in times.items()]
    if bench:
        out = subprocess.run([bench, "--benchmark_format=json", "--benchmark_repetitions=%d" % rounds],
                             check=True, capture_output=True, text=True).stdout
        cpp: dict[str, float] = {}
        for run in json.loads(out)["benchmarks"]:
            if run.get("run_type") == "iteration":
                label = "C++ ops::add, " + run["label"]
                cpp[label] = min(cpp.get(label, float("inf")), run["real_time"])
        rows += sorted(cpp.items())
    return rows


def policy_overhead(rounds: int) -> list[tuple[str, float]]:
    model = nn.load_llama(str(ROOT / "tests" / "fixtures" / "llama_tiny"))
    ids = reprise.arange(16).reshape(1, 16)
    values = []

    def counting(v):
        values.append(v.op)

    def forward(policy) -> None:
        config = nn.CheckpointConfig(kind=nn.CheckpointKind.policy, policy=policy)
        layers = nn.LayerCheckpointing(config, reprise.default_generator())
        model(ids, layers)

    forward(counting)
    regions = model.config.num_hidden_layers
    per_region = len(values) // regions
    python_none = lambda v: None  # noqa: E731  (abstain: recompute, as full())
    builtin, python = [], []
    for _ in range(rounds):
        builtin.append(best_ns(lambda: forward(policies.full()), 200, 1))
        python.append(best_ns(lambda: forward(python_none), 200, 1))
    extra = (min(python) - min(builtin)) / regions
    return [("forward, built-in full() policy", min(builtin) / 1e3),
            ("forward, Python policy (lambda v: None)", min(python) / 1e3),
            (f"Python policy per region ({per_region} values)", extra / 1e3),
            ("Python policy per value", extra / per_region / 1e3)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", help="bench_op_call, for the C++ side of the op")
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    reprise.set_num_threads(1)
    print(f"{'small op call':<48} {'ns':>8}")
    for name, ns in op_calls(a.rounds, a.bench):
        print(f"{name:<48} {ns:8.0f}")
    print(f"\n{'checkpoint policy (tiny Llama, B=1, T=16)':<48} {'us':>8}")
    for name, us in policy_overhead(a.rounds):
        print(f"{name:<48} {us:8.2f}")


if __name__ == "__main__":
    main()
