"""Shared parts of the side-by-side scripts (bench/*/*_torch.py).

Running a Google Benchmark program once and reading its JSON, timing a
PyTorch call the way Google Benchmark times ours (a mean over a loop),
alternating the two sides over rounds (the machine is shared, so neither
side may always run first), and the process's peak resident set, measured
the same way as bench/support.h measures ours.

The scripts import it after putting bench/ on sys.path:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""

import json
import os
import subprocess
import sys
import time

# PyTorch's OpenMP threads spin while they wait (libgomp's default), and
# they go on spinning while our benchmark program runs beside them as a
# child process, taking a core from it: the Llama step measured 0.92x
# torch's time that way against 0.70x with PASSIVE (2026-12-03). libgomp
# reads the setting when torch loads it, so a script started without one
# starts again with it.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.execv(sys.executable, [sys.executable] + sys.argv)

UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def google_benchmark(bench, flags=(), env=None):
    """Runs a Google Benchmark program once with JSON output and returns its
    iteration runs (no aggregates): each the program's dict (run_name,
    counters, ...) plus real_s and cpu_s, seconds per iteration. env adds
    to the environment (REPRISE_NUM_THREADS, say)."""
    out = subprocess.run([bench, "--benchmark_format=json", *flags], check=True,
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    runs = []
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        scale = UNIT_SECONDS[b["time_unit"]]
        runs.append({**b, "real_s": b["real_time"] * scale, "cpu_s": b["cpu_time"] * scale})
    return runs


def time_calls(fn, min_seconds=0.2, min_calls=1, warmup=True):
    """(wall, process CPU) seconds per call of fn: means over one loop of at
    least min_calls calls and min_seconds of wall time, after a warm-up call.
    A mean, as Google Benchmark reports ours: a median of single calls would
    hide the preemptions that our mean includes."""
    if warmup:
        fn()
    calls, t0, c0 = 0, time.perf_counter(), time.process_time()
    while calls < min_calls or time.perf_counter() - t0 < min_seconds:
        fn()
        calls += 1
    return (time.perf_counter() - t0) / calls, (time.process_time() - c0) / calls


def alternate(rounds, sides):
    """Calls each side (name -> zero-argument callable) once per round, in
    reverse order every other round, and returns name -> list of results."""
    results = {name: [] for name in sides}
    order = list(sides)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            results[name].append(sides[name]())
    return results


def status_mib(field):
    """A field of /proc/self/status ("VmRSS", "VmHWM") in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss():
    """Resets VmHWM to the current resident set (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
