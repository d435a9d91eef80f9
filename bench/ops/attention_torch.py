"""Side-by-side: reprise's fused attention against PyTorch CPU, forward + backward.

Shapes: the Llama example's B = 8, Hq = 8, Hkv = 4, D = 32, causal, T = S in
{256, 512, 1024}, f32, 2 threads on both sides. PyTorch runs
  explicit: softmax(q k^T / sqrt(D) + causal mask) v with autograd, kv heads
            repeated for grouped-query attention (the baseline to beat), and
  sdpa:     F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)
            (reference only).
The machine is shared, so the script alternates ours and theirs for several
rounds and reports the median of each and the ratio of medians. Ours is
timed by running bench_attention (Google Benchmark) once per round.

Peak memory over forward + backward, inputs excluded: "rss" is the rise of
the process's peak resident set (VmHWM after resetting it through
/proc/self/clear_refs; torch variants each in a fresh process), measured the
same way for ours (the bench's rss_MiB); "stats" is ours by MemoryStats
(exact live-tensor bytes, the bench's peak_MiB).

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/ops/attention_torch.py --bench build/bench/bench_attention
"""

import argparse
import os
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from side_by_side import (alternate, google_benchmark, reset_peak_rss,  # noqa: E402
                          status_mib, time_calls)

B, HQ, HKV, D = 8, 8, 4, 32
LENGTHS = (256, 512, 1024)


def inputs(T):
    g = torch.Generator().manual_seed(T)
    q = torch.randn(B, HQ, T, D, generator=g, requires_grad=True)
    k = torch.randn(B, HKV, T, D, generator=g, requires_grad=True)
    v = torch.randn(B, HKV, T, D, generator=g, requires_grad=True)
    dout = torch.randn(B, HQ, T, D, generator=g)
    return q, k, v, dout


def explicit(q, k, v):
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    T, S = q.shape[2], k.shape[2]
    mask = torch.full((T, S), float("-inf")).triu(1)
    s = q @ k.transpose(-1, -2) / D**0.5 + mask
    return torch.softmax(s, dim=-1) @ v


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


VARIANTS = {"explicit": explicit, "sdpa": sdpa}


def time_torch(fn, T, reps):
    """Best wall seconds of `reps` single forward + backward calls."""
    q, k, v, dout = inputs(T)

    def call():
        q.grad = k.grad = v.grad = None
        fn(q, k, v).backward(dout)
    call()  # warm up
    return min(time_calls(call, 0, warmup=False)[0] for _ in range(reps))


def time_ours(bench, T):
    runs = google_benchmark(
        bench, [f"--benchmark_filter=BM_attention_fwd_bwd/{T}/", "--benchmark_repetitions=3",
                "--benchmark_report_aggregates_only=false"], {"REPRISE_NUM_THREADS": "2"})
    return min(b["real_s"] for b in runs), runs[0]["peak_MiB"], runs[0]["rss_MiB"]


def peak_rss_mib(variant, T):
    """Rise of the peak resident set over one forward + backward."""
    torch.set_num_threads(2)
    q, k, v, dout = inputs(T)
    base = status_mib("VmRSS")
    reset_peak_rss()
    VARIANTS[variant](q, k, v).backward(dout)
    return status_mib("VmHWM") - base


def torch_peak_mib(variant, T):
    """peak_rss_mib in a fresh process, so earlier runs leave no cached memory."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r});"
            f"import attention_torch as a; print(a.peak_rss_mib({variant!r}, {T}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="build/bench/bench_attention")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(f"torch {torch.__version__}, threads 2, B={B} Hq={HQ} Hkv={HKV} D={D} causal f32, "
          f"{args.rounds} alternating rounds, times are per forward + backward")
    print(f"{'T':>5} {'ours ms':>8} {'explicit ms':>11} {'sdpa ms':>8} {'explicit/ours':>13} "
          f"{'sdpa/ours':>9}   peak MiB: {'ours stats':>10} {'ours rss':>8} {'explicit rss':>12} "
          f"{'sdpa rss':>8}")
    for T in LENGTHS:
        sides = {"ours": lambda: time_ours(args.bench, T)}
        for name, fn in VARIANTS.items():
            sides[name] = lambda fn=fn: time_torch(fn, T, args.reps)
        t = alternate(args.rounds, sides)
        _, stats, rss = t["ours"][-1]
        t["ours"] = [r[0] for r in t["ours"]]
        med = {name: statistics.median(v) * 1e3 for name, v in t.items()}
        mem = {name: torch_peak_mib(name, T) for name in VARIANTS}
        print(f"{T:>5} {med['ours']:>8.1f} {med['explicit']:>11.1f} {med['sdpa']:>8.1f} "
              f"{med['explicit'] / med['ours']:>13.2f} {med['sdpa'] / med['ours']:>9.2f} "
              f"            {stats:>10.1f} {rss:>8.1f} {mem['explicit']:>12.1f} {mem['sdpa']:>8.1f}",
              flush=True)


if __name__ == "__main__":
    main()
