"""Side-by-side: reprise's matmul/linear GEMM against PyTorch CPU, GFLOP/s.

Cases are bench_matmul's (bench/ops/matmul.cpp): 1024^3, every product of
one Llama example layer step (tokens 2048, hidden 256, intermediate 688,
vocab 256), forward y = x W^T (F.linear), backward dx = dy W (dy @ W) and
dW = dy^T x (dy.t() @ x, a transposed view), and the forward products of the
SmolLM2-135M shape with the tied head's backward products. A case named bf16/<case> multiplies bf16 operands into a
bf16 result on both sides (torch: oneDNN's bf16 GEMM, as autocast calls it).
Both sides use --threads threads (default 2); torch's BLAS is MKL on the pip
wheel (torch.__config__.show()).

The machine is shared, so each case alternates ours and theirs for several
rounds (ours first in even rounds, theirs first in odd ones) and reports the
median GFLOP/s of each and the ratio ours / torch of the medians. Ours is one
run of bench_matmul per round (Google Benchmark, --benchmark_min_time); torch
is timed the same way: as many calls as fit in the same minimum time.

--clock cpu (with --threads 1) times by process CPU time instead
of wall time on both sides: on a loaded machine it measures the kernels
rather than the scheduler.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/ops/matmul_torch.py --bench build/bench/bench_matmul
"""

import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from side_by_side import alternate, google_benchmark, time_calls  # noqa: E402

# name: (M, N, K, form), as in bench/ops/matmul.cpp.
CASES = {
    "mm_1024": (1024, 1024, 1024, "matmul"),
    "fwd_qkvo_lm_head": (2048, 256, 256, "linear"),
    "fwd_gate_up": (2048, 688, 256, "linear"),
    "fwd_down": (2048, 256, 688, "linear"),
    "dx_qkvo_lm_head": (2048, 256, 256, "matmul"),
    "dx_gate_up": (2048, 256, 688, "matmul"),
    "dx_down": (2048, 688, 256, "matmul"),
    "dw_qkvo_lm_head": (256, 256, 2048, "matmul_at"),
    "dw_gate_up": (688, 256, 2048, "matmul_at"),
    "dw_down": (256, 688, 2048, "matmul_at"),
    "smol_q_o": (1024, 576, 576, "linear"),
    "smol_k_v": (1024, 192, 576, "linear"),
    "smol_gate_up": (1024, 1536, 576, "linear"),
    "smol_down": (1024, 576, 1536, "linear"),
    "smol_head": (1024, 49152, 576, "linear"),
    "smol_dx_head": (1024, 576, 49152, "matmul"),
    "smol_dw_head": (49152, 576, 1024, "matmul_at"),
}
CASES.update({f"bf16/{name}": dims for name, dims in list(CASES.items())})


def torch_fn(M, N, K, form, dtype):
    def u(*shape):
        return (torch.rand(*shape) * 2 - 1).to(dtype)

    if form == "linear":
        x, w = u(M, K), u(N, K)
        return lambda: F.linear(x, w)
    if form == "matmul_at":
        at, b = u(K, M), u(K, N)
        return lambda: at.t() @ b
    a, b = u(M, K), u(K, N)
    return lambda: a @ b


def time_torch(case, args):
    M, N, K, form = CASES[case]
    dtype = torch.bfloat16 if case.startswith("bf16/") else torch.float32
    wall, cpu = time_calls(torch_fn(M, N, K, form, dtype), args.min_time)
    return 2 * M * N * K / (cpu if args.clock == "cpu" else wall) / 1e9


def time_ours(case, args):
    (run,) = google_benchmark(
        args.bench, [f"--benchmark_filter=^{case}/", f"--benchmark_min_time={args.min_time}"],
        {"REPRISE_NUM_THREADS": str(args.threads)})
    if args.clock == "cpu":
        M, N, K, _ = CASES[case]
        return 2 * M * N * K / run["cpu_s"] / 1e9
    return run["GFLOP"]  # a rate counter over wall time: GFLOP per second


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="build/bench/bench_matmul")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--cases", default=",".join(c for c in CASES if "/" not in c),
                        help="comma-separated case names (bf16/<case> for bf16)")
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu times one thread: use it with --threads 1")
    torch.set_num_threads(args.threads)
    blas = "MKL" if torch.backends.mkl.is_available() else "non-MKL BLAS"
    print(f"torch {torch.__version__} ({blas}), threads {args.threads}, {args.clock} clock, "
          f"{args.rounds} alternating rounds, min time {args.min_time} s; GFLOP/s medians, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| case | M x N x K | ours | torch | ours / torch |")
    print("|---|---|---:|---:|---:|")
    for case in args.cases.split(","):
        M, N, K, _ = CASES[case]
        runs = alternate(args.rounds, {"ours": lambda: time_ours(case, args),
                                       "torch": lambda: time_torch(case, args)})
        mo, mt = statistics.median(runs["ours"]), statistics.median(runs["torch"])
        print(f"| {case} | {M}x{N}x{K} | {mo:.1f} | {mt:.1f} | {mo / mt:.2f} |", flush=True)


if __name__ == "__main__":
    main()
