#!/usr/bin/env python3
"""The example Llama's training step driven from Python
(examples/python/train_tiny_llama.py) against the C++ binary llama_train:
same model, same flags, same losses (checked), step time compared.

    python bench/python/llama_step.py --llama-train build/release/examples/llama_train/llama_train

Two measures, each side's median over --rounds alternating rounds:
  wall  from the tokens per second a run of --steps steps logs after its
        first logged step (which holds the warm-up);
  cpu   process CPU time (all threads) per step: a run of --steps steps
        minus a run of 1 step, over steps - 1, so that start-up, data
        generation and the final evaluation cancel. On a shared machine
        it is the steadier one.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import resource
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(cmd: list[str]) -> tuple[float, float, list[str]]:
    """(wall ms per step, CPU seconds of the process, logged losses)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tokens = re.search(r"^run\s+\d+ steps of (\d+) x (\d+) tokens", out, re.M)
    per_step = int(tokens.group(1)) * int(tokens.group(2))
    logged = re.findall(r"^step\s+(\d+)/\d+ \| loss (\S+) \| lr (\S+) \| grad norm\s+(\S+) \|"
                        r"\s+(\d+) tok/s", out, re.M)
    steps = seconds = 0.0
    for (before_step, *_), (step, *_, tok_s) in zip(logged, logged[1:]):
        n = int(step) - int(before_step)
        steps += n
        seconds += n * per_step / float(tok_s)
    wall = seconds / steps * 1e3 if steps else 0.0
    return wall, cpu, [" ".join(x[1:4]) for x in logged]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-train", required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("flags", nargs="*", help="more flags for both sides, after --")
    a = p.parse_args()
    sides = {"C++ llama_train": [a.llama_train],
             "Python train_tiny_llama.py": [sys.executable,
                                            str(ROOT / "examples/python/train_tiny_llama.py")]}
    flags = ["--log-every", "10", "--eval-every", "0", *a.flags]
    wall: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    losses: dict[str, list[str]] = {}
    for r in range(a.rounds):
        for name, cmd in (sides.items() if r % 2 == 0 else reversed(sides.items())):
            ms, cpu_long, logged = run([*cmd, "--steps", str(a.steps), *flags])
            _, cpu_short, _ = run([*cmd, "--steps", "1", *flags])
            wall[name].append(ms)
            cpu[name].append((cpu_long - cpu_short) / (a.steps - 1) * 1e3)
            assert losses.setdefault(name, logged) == logged, "a side's losses changed"
    cpp, py = losses.values()
    assert cpp == py, "the two sides logged different losses"
    print(f"same losses on both sides ({len(cpp)} logged steps, last: {cpp[-1]})")
    print(f"{'side':<28} {'wall ms/step':>12} {'vs C++':>7} {'cpu ms/step':>12} {'vs C++':>7}  runs (cpu)")
    base_wall = statistics.median(wall["C++ llama_train"])
    base_cpu = statistics.median(cpu["C++ llama_train"])
    for name in sides:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:<28} {w:12.1f} {w / base_wall:7.3f} {c:12.1f} {c / base_cpu:7.3f}  "
              + " ".join(f"{x:.1f}" for x in cpu[name]))


if __name__ == "__main__":
    main()
