"""Side-by-side: reprise's rmsnorm, silu and add against PyTorch CPU, f32.

Shapes: rmsnorm on (N, C) = (2048, 256), the Llama example's tokens x hidden,
and (8192, 2048), 64 MiB, out of cache; silu, add and a plain copy on the
same element counts. 2 threads on both sides (--threads). PyTorch runs
  rmsnorm:  F.rms_norm, and the HF LlamaRMSNorm formula
            w * (x * rsqrt(mean(x^2, -1) + eps)), both with autograd for
            forward + backward (grads of x and w);
  silu:     F.silu (forward, and forward + backward with autograd);
  add:      a + b;  copy: dst.copy_(src), the bandwidth reference;
  strided:  a * b with b a column (N, 1) broadcast along 256, and
            F.silu(x.t()) of a transposed view, at the small size.
Bytes per call are counted the same way on both sides (see the headers of
bench/ops/norm.cpp and bench/ops/elementwise.cpp), so GB/s are comparable.

The machine is shared, so the script alternates ours and theirs for several
rounds (each round runs both Google Benchmark programs once and every torch
case, the two sides in turn first) and reports the median of each and ratio = torch time / our time
(> 1: ours is faster). --clock cpu (with --threads 1) times CPU time instead
of wall time on both sides, which holds up when the machine is oversubscribed
and wall times of multithreaded runs mostly measure the scheduler.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/ops/nn_ops_torch.py --build build [--threads 1 --clock cpu]
"""

import argparse
import os
import statistics
import sys
from functools import partial

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from side_by_side import alternate, google_benchmark, time_calls  # noqa: E402

EPS = 1e-6
NORM_SHAPES = ((2048, 256), (8192, 2048))
SIZES = tuple(n * c for n, c in NORM_SHAPES)


def hf_rmsnorm(x, w):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + EPS))


def torch_cases():
    """name -> (setup() returning a zero-argument call, bytes per call)."""
    cases = {}
    for n in SIZES:
        def copy_setup(n=n):
            src, dst = torch.randn(n), torch.empty(n)
            return lambda: dst.copy_(src)

        def silu_setup(n=n):
            x = torch.randn(n) * 4
            return lambda: F.silu(x)

        def silu_bwd_setup(n=n):
            x, g = (torch.randn(n) * 4).requires_grad_(True), torch.randn(n)

            def run():
                x.grad = None
                F.silu(x).backward(g)
            return run

        def add_setup(n=n):
            a, b = torch.randn(n), torch.randn(n)
            return lambda: a + b

        cases[f"copy/{n}"] = ({"torch": copy_setup}, 2 * n * 4)
        cases[f"silu_fwd/{n}"] = ({"torch": silu_setup}, 2 * n * 4)
        cases[f"silu_fwd_bwd/{n}"] = ({"torch": silu_bwd_setup}, 5 * n * 4)
        cases[f"add/{n}"] = ({"torch": add_setup}, 3 * n * 4)
    # The strided cases, at the small size: a column broadcast along the rows,
    # and silu of a transposed view.
    n = SIZES[0]

    def mul_column_setup(n=n):
        a, b = torch.randn(n // 256, 256), torch.randn(n // 256, 1)
        return lambda: a * b

    def silu_transposed_setup(n=n):
        x = torch.randn(n // 256, 256) * 4
        return lambda: F.silu(x.t())

    cases[f"mul_broadcast_column/{n}"] = ({"torch": mul_column_setup}, 2 * n * 4)
    cases[f"silu_transposed/{n}"] = ({"torch": silu_transposed_setup}, 2 * n * 4)
    for N, C in NORM_SHAPES:
        def fwd_setup(fn, N=N, C=C):
            x, w = torch.randn(N, C) * 2, torch.rand(C) + 0.5
            return lambda: fn(x, w)

        def fwd_bwd_setup(fn, N=N, C=C):
            x = (torch.randn(N, C) * 2).requires_grad_(True)
            w = (torch.rand(C) + 0.5).requires_grad_(True)
            g = torch.randn(N, C)

            def run():
                x.grad = w.grad = None
                fn(x, w).backward(g)
            return run

        def f_rms(x, w, C=C):
            return F.rms_norm(x, (C,), w, EPS)

        cases[f"rmsnorm_fwd/{N}/{C}"] = (
            {"F.rms_norm": partial(fwd_setup, f_rms), "hf": partial(fwd_setup, hf_rmsnorm)},
            2 * N * C * 4)
        cases[f"rmsnorm_fwd_bwd/{N}/{C}"] = (
            {"F.rms_norm": partial(fwd_bwd_setup, f_rms),
             "hf": partial(fwd_bwd_setup, hf_rmsnorm)},
            5 * N * C * 4)
    return cases


def time_torch(setup, min_seconds, clock):
    """Best mean seconds per call over 3 timed loops of at least min_seconds
    (as ours: the best of Google Benchmark's 3 repetitions)."""
    call = setup()
    which = 1 if clock == "cpu" else 0
    return min(time_calls(call, min_seconds, warmup=i == 0)[which] for i in range(3))


def time_ours(bench, threads, clock):
    """name -> best seconds per iteration, from one run of a bench program."""
    runs = google_benchmark(bench, ["--benchmark_repetitions=3", "--benchmark_min_time=0.2"],
                            {"REPRISE_NUM_THREADS": str(threads)})
    key = "cpu_s" if clock == "cpu" else "real_s"
    best = {}
    for b in runs:
        name = b["run_name"].removeprefix("BM_").removesuffix("/real_time")
        best[name] = min(best.get(name, float("inf")), b[key])
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu needs --threads 1: the two sides count CPU time of "
                     "different sets of threads")
    torch.set_num_threads(args.threads)
    benches = [os.path.join(args.build, "bench", b) for b in ("bench_elementwise", "bench_norm")]
    cases = torch_cases()
    def run_ours():
        times = {}
        for bench in benches:
            times.update(time_ours(bench, args.threads, args.clock))
        return times

    def run_theirs():
        times = {}
        for name, (variants, _) in cases.items():
            for v, setup in variants.items():
                with torch.no_grad() if "bwd" not in name else torch.enable_grad():
                    times[(name, v)] = time_torch(setup, args.min_seconds, args.clock)
        return times

    runs = alternate(args.rounds, {"ours": run_ours, "theirs": run_theirs})
    ours = {name: [r[name] for r in runs["ours"]] for name in cases}
    theirs = {key: [r[key] for r in runs["theirs"]] for key in runs["theirs"][0]}
    print(f"torch {torch.__version__}, threads {args.threads}, {args.clock} clock, f32, "
          f"{args.rounds} alternating rounds, medians; ratio = torch time / ours")
    print(f"{'case':<26} {'ours us':>9} {'ours GB/s':>9}  torch variants (us, GB/s, ratio)")
    for name, (variants, nbytes) in cases.items():
        o = statistics.median(ours[name])
        line = f"{name:<26} {o * 1e6:>9.1f} {nbytes / o / 1e9:>9.1f}"
        for v in variants:
            t = statistics.median(theirs[(name, v)])
            line += f"  {v}: {t * 1e6:.1f} us, {nbytes / t / 1e9:.1f} GB/s, {t / o:.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
