"""Side-by-side: reprise's CPU random fills and dropout against PyTorch CPU.

N = 2^24 float32 elements (64 MiB per buffer), 2 threads on both sides
(torch.set_num_threads(2); bench_rng defaults to 2 threads of the engine's pool). PyTorch:
  copy       y.copy_(x)                       (the machine's bandwidth)
  uniform    y.uniform_()                     (what torch.rand does)
  normal     y.normal_()                      (what torch.randn does)
  bernoulli  y.bernoulli_(0.9)                (a dropout mask, p = 0.1)
  dropout    F.dropout(x, 0.1, training=True) (allocates its output; ours
                                               writes a preallocated one)
GB/s counts bytes read plus bytes written: 8 per element for copy and
dropout, 4 for the fills. The machine is shared, so the script alternates
ours and theirs for several rounds; ours is timed by running bench_rng once
per round (3 repetitions), which also reports cuRAND's host Philox generator
when built with CUDA. It prints three tables: medians of real time, the
best real time of each (the machine when nothing else ran on its cores), and
medians of process CPU time (all threads), which on a loaded machine gives
the cost per core-second: there "GB/s" means bytes per CPU-second, and ours
and torch's use 2 threads where cuRAND's host generator uses 1.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/rng/rng_torch.py --bench build-rng/bench/bench_rng
"""

import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from side_by_side import alternate, google_benchmark, time_calls  # noqa: E402

N = 1 << 24
P = 0.1

# Our benchmark name for each row, and the bytes it moves per element.
ROWS = {
    "copy": ("BM_Copy", 8),
    "uniform": ("BM_UniformFloat", 4),
    "normal": ("BM_NormalFloat", 4),
    "bernoulli": ("BM_BernoulliMask", 4),
    "dropout": ("BM_DropoutForward", 8),
}
CURAND = {
    "uniform": "BM_CuRandHostUniformFloat",
    "normal": "BM_CuRandHostNormalFloat",
    "dropout": "BM_CuRandHostDropoutForward",
}


def torch_ops():
    x = torch.ones(N)
    y = torch.empty(N)
    y.zero_()  # fault the pages in before timing
    return {
        "copy": lambda: y.copy_(x),
        "uniform": lambda: y.uniform_(),
        "normal": lambda: y.normal_(),
        "bernoulli": lambda: y.bernoulli_(1 - P),
        "dropout": lambda: F.dropout(x, P, training=True),
    }


def check_torch(ops):
    out = ops["dropout"]()
    kept = (out != 0).float().mean().item()
    assert abs(kept - (1 - P)) < 1e-3, kept
    assert abs(out.mean().item() - 1.0) < 2e-3


def time_torch(fn, iters):
    """(real seconds, process CPU seconds) of each of `iters` calls."""
    fn()  # warm up
    return [time_calls(fn, 0, warmup=False) for _ in range(iters)]


def time_ours(bench):
    """name -> (real seconds, process CPU seconds) of each repetition."""
    times = {}
    for b in google_benchmark(bench, ["--benchmark_min_time=0.3", "--benchmark_repetitions=3"]):
        times.setdefault(b["run_name"].split("/")[0], []).append((b["real_s"], b["cpu_s"]))
    return times


def report(title, ours, theirs, pick, which):
    """One table; which = 0 for real time, 1 for CPU time."""
    ours = {k: [t[which] for t in v] for k, v in ours.items()}
    theirs = {k: [t[which] for t in v] for k, v in theirs.items()}

    def gbs(seconds, bytes_per):
        return N * bytes_per / seconds / 1e9

    print(title)
    print(f"{'row':<10} {'reprise GB/s':>13} {'torch GB/s':>11} {'cuRAND GB/s':>12} "
          f"{'reprise/torch':>14} {'reprise/cuRAND':>15} {'Gfloat/s (reprise)':>19}")
    for row, (ours_name, bytes_per) in ROWS.items():
        t_ours = pick(ours[ours_name])
        t_torch = pick(theirs[row])
        cur = CURAND.get(row)
        t_cur = pick(ours[cur]) if cur in ours else None
        cur_gbs = f"{gbs(t_cur, bytes_per):12.2f}" if t_cur else f"{'-':>12}"
        cur_ratio = f"{t_cur / t_ours:15.1f}" if t_cur else f"{'-':>15}"
        print(f"{row:<10} {gbs(t_ours, bytes_per):13.2f} {gbs(t_torch, bytes_per):11.2f} {cur_gbs} "
              f"{t_torch / t_ours:14.2f} {cur_ratio} {N / t_ours / 1e9:19.3f}")
    ratio = pick(ours["BM_Copy"]) / pick(ours["BM_DropoutForward"])
    print(f"dropout forward at {ratio:.0%} of copy bandwidth (same bytes moved)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True, help="path to bench_rng")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(2)
    ops = torch_ops()
    check_torch(ops)

    runs = alternate(args.rounds, {
        "ours": lambda: time_ours(args.bench),
        "theirs": lambda: {row: time_torch(fn, args.iters) for row, fn in ops.items()},
    })
    ours, theirs = {}, {}
    for run in runs["ours"]:
        for name, times in run.items():
            ours.setdefault(name, []).extend(times)
    for run in runs["theirs"]:
        for row, times in run.items():
            theirs.setdefault(row, []).extend(times)

    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, N = {N}, "
          f"{args.rounds} rounds, load average {load} at the end")
    report("median real time", ours, theirs, statistics.median, 0)
    report("best real time", ours, theirs, min, 0)
    report("median process CPU time (per core-second)", ours, theirs, statistics.median, 1)


if __name__ == "__main__":
    main()
