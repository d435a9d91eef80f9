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

Times are process CPU times, the best of --rounds rounds (each a mean over
a loop), rounds alternating between the sides; the C++ side is Google
Benchmark's CPU time, the best of as many repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import time
import timeit

import reprise
from reprise import nn, policies

ROOT = pathlib.Path(__file__).resolve().parents[2]


def best_ns(stmt, number: int, rounds: int) -> float:
    # Process CPU time: the machine is shared, and time spent descheduled
    # would drown differences of a few percent (reprise runs on one thread
    # here, so CPU time is the work done).
    return min(timeit.repeat(stmt, number=number, repeat=rounds, timer=time.process_time)) \
        / number * 1e9


def op_calls(rounds: int, bench: str | None) -> list[tuple[str, float]]:
    rows = []
    a, b = reprise.full(16, 1.5), reprise.full(16, 2.0)
    ag = reprise.full(16, 1.5, requires_grad=True)
    cases = [("reprise a + b, no grad", lambda: a + b),
             ("reprise a + b, recorded", lambda: ag + b),
             ("reprise is_grad_enabled() (a call, no op)", reprise.is_grad_enabled),
             ("reprise a.detach() (a new tensor, no kernel)", lambda: a.detach()),
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
        out = subprocess.run([bench, "--benchmark_format=json", f"--benchmark_repetitions={rounds}"],
                             check=True, capture_output=True, text=True,
                             env={**os.environ, "REPRISE_NUM_THREADS": "1"}).stdout
        cpp: dict[str, float] = {}
        for run in json.loads(out)["benchmarks"]:
            if run.get("run_type") == "iteration":
                label = "C++ ops::add, " + run["label"]
                cpp[label] = min(cpp.get(label, float("inf")), run["cpu_time"])
        rows += sorted(cpp.items())
    return rows


def policy_overhead(rounds: int) -> list[tuple[str, float]]:
    """What a Python policy adds per region of the tiny Llama's decoder
    layer, and per value in a region of 200 cheap ops, over the built-in
    policy that decides the same."""
    model = nn.load_model(str(ROOT / "tests" / "fixtures" / "llama_tiny"))
    ids = reprise.arange(16).reshape(1, 16)
    values: list[str] = []

    def layers(policy) -> nn.LayerCheckpointing:
        config = nn.CheckpointConfig(kind=nn.CheckpointKind.policy, policy=policy)
        return nn.LayerCheckpointing(config, reprise.default_generator())

    model(ids, layers(lambda v: values.append(v.op)))  # counts the values of a forward
    regions = model.config.num_hidden_layers
    python_none = lambda v: None  # noqa: E731  (abstain: recompute, as full() does)
    builtin_layers, python_layers = layers(policies.full()), layers(python_none)

    x = reprise.full(1, 1.0, requires_grad=True)

    def chain():
        h = x
        for _ in range(200):
            h = h * 1.0001
        return h

    pairs = {"llama": (lambda: model(ids, builtin_layers), lambda: model(ids, python_layers)),
             "chain": (lambda: reprise.checkpoint("chain", policies.full(), chain),
                       lambda: reprise.checkpoint("chain", python_none, chain))}
    # The difference is a few percent of a forward: each round times both
    # sides back to back, and the median of the rounds' differences is
    # what the load of a shared machine disturbs least.
    times = {name: ([], []) for name in pairs}
    for r in range(rounds):
        for name, (builtin, python) in pairs.items():
            if r % 2:  # neither side always runs first
                times[name][1].append(best_ns(python, 10, 1) / 1e3)
                times[name][0].append(best_ns(builtin, 10, 1) / 1e3)
            else:
                times[name][0].append(best_ns(builtin, 10, 1) / 1e3)
                times[name][1].append(best_ns(python, 10, 1) / 1e3)

    def median_difference(name: str) -> float:
        b, p = times[name]
        return statistics.median(y - x for x, y in zip(b, p))

    med = {name: (statistics.median(b), statistics.median(p)) for name, (b, p) in times.items()}
    return [("tiny Llama forward, built-in full() policy", med["llama"][0]),
            ("tiny Llama forward, Python policy (lambda v: None)", med["llama"][1]),
            (f"  Python policy per decoder-layer region ({len(values) // regions} values)",
             median_difference("llama") / regions),
            ("region of 200 x*c ops (1 element), built-in full()", med["chain"][0]),
            ("region of 200 x*c ops (1 element), Python policy", med["chain"][1]),
            ("  Python policy per value", median_difference("chain") / 200)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", help="bench_op_call, for the C++ side of the op")
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    reprise.set_num_threads(1)
    print(f"{'small op call':<48} {'ns':>8}")
    for name, ns in op_calls(a.rounds, a.bench):
        print(f"{name:<48} {ns:8.0f}")
    print(f"\n{'checkpoint policy (tiny Llama: B=1, T=16)':<60} {'us':>8}")
    for name, us in policy_overhead(a.rounds):
        print(f"{name:<60} {us:8.2f}")


if __name__ == "__main__":
    main()
