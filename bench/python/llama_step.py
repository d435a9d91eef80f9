#!/usr/bin/env python3
"""The example Llama's training step driven from Python
(examples/python/train_tiny_llama.py) against the C++ binary llama_train:
same model, same flags, same losses (checked), step time compared.

    python bench/python/llama_step.py --llama-train build/release/examples/llama_train/llama_train

Each run trains --steps steps; a run's step time is its total step seconds
(the "done" line: steps only, no evaluation) over its steps. Runs alternate
between the sides, and the table gives each side's median.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(cmd: list[str]) -> tuple[float, list[str]]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    done = re.search(r"^done\s+(\d+) steps in ([\d.]+) s", out, re.M)
    losses = re.findall(r"loss (\d+\.\d+) \| lr (\S+) \| grad norm\s+(\S+)", out)
    return float(done.group(2)) / int(done.group(1)) * 1e3, [" ".join(x) for x in losses]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-train", required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("flags", nargs="*", help="more flags for both, after --")
    a = p.parse_args()
    flags = ["--steps", str(a.steps), "--eval-every", "0", *a.flags]
    sides = {"C++ llama_train": [a.llama_train, *flags],
             "Python train_tiny_llama.py": [sys.executable,
                                            str(ROOT / "examples/python/train_tiny_llama.py"),
                                            *flags]}
    times: dict[str, list[float]] = {name: [] for name in sides}
    losses: dict[str, list[str]] = {}
    for _ in range(a.rounds):
        for name, cmd in sides.items():
            ms, logged = run(cmd)
            times[name].append(ms)
            losses.setdefault(name, logged)
            assert logged == losses[name], "a side's losses changed between runs"
    cpp, py = losses.values()
    assert cpp == py, "the two sides logged different losses"
    base = statistics.median(times["C++ llama_train"])
    print(f"same losses on both sides ({len(cpp)} logged steps, last: {cpp[-1]})")
    print(f"{'side':<28} {'ms/step':>8} {'runs':>24} {'vs C++':>7}")
    for name, t in times.items():
        m = statistics.median(t)
        print(f"{name:<28} {m:8.1f} {' '.join(f'{x:.1f}' for x in t):>24} {m / base:7.3f}")


if __name__ == "__main__":
    main()
