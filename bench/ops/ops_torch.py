"""Side-by-side: bench_ops (every registered op, bench/ops/ops.cpp) against
PyTorch CPU on the same shapes, f32, forward and forward + backward.

Each case below is named as bench_ops names it ("silu/2048x688") and builds
the PyTorch counterpart of our op: the same shapes, values drawn from the
same ranges (not the same values: no op here is data-dependent in speed
beyond its ranges). forward runs under no_grad; fwd_bwd runs autograd with a
fixed upstream gradient for each floating output, as ours does. Ops with no
single PyTorch counterpart use what a model would write (moe_route: top-k of
the scores and renormalisation; rotary: HF's rotate_half formula).

The machine is shared, so the two sides alternate over rounds (the order
flips every round) and each reports its median; ratio = torch time / ours
(> 1: ours is faster). --clock cpu times process CPU time on both sides,
which holds up better when the machine is oversubscribed.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/ops/ops_torch.py --bench build/bench/bench_ops [--filter 'silu|exp'] [--clock cpu]

--check only compares the case names with the ones bench_ops lists and fails
on any case that has no PyTorch counterpart here, or any here that bench_ops
no longer has (CTest runs it; it needs no
PyTorch).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from side_by_side import alternate, google_benchmark, time_calls  # noqa: E402

torch = None  # imported by main() unless --check

N, C, FF, B, T, HQ, HKV, D, V, E, K = 2048, 256, 688, 8, 256, 8, 4, 32, 256, 8, 2


class AnyName:
    """Stands for torch and torch.nn.functional under --check, which builds
    the case table only for its names."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self


def u(*shape, lo=-4.0, hi=4.0):
    return torch.rand(*shape) * (hi - lo) + lo


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def hf_rotary(x):
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def moe_route(scores):
    weights, indices = torch.topk(scores, K, dim=-1)
    return weights / weights.sum(-1, keepdim=True), indices


def gated_delta_rule(q, k, v, decay, beta):
    """The recurrence as transformers' torch fallback for decoding writes it
    (torch_recurrent_gated_delta_rule), on (B, T, H, K) inputs."""
    state = q.new_zeros(q.shape[0], q.shape[2], q.shape[3], v.shape[3])
    outs = []
    for t in range(q.shape[1]):
        state = state * decay[:, t, :, None, None]
        kt = k[:, t, :, :, None]
        delta = (v[:, t] - (state * kt).sum(-2)) * beta[:, t, :, None]
        state = state + kt * delta[:, :, None, :]
        outs.append((state * q[:, t, :, :, None]).sum(-2))
    return torch.stack(outs, 1)


def grouped_linear(x, *weights):
    blocks = x.split(N * K // E)
    return torch.cat([b @ w.t() for b, w in zip(blocks, weights)])


def unary_ops(F):
    """Each row of engine/elementwise_ops.h's REPRISE_UNARY_OPS as PyTorch
    writes it, and the low end of its inputs (bench_ops: the row's smooth
    interval widened to [lo, 4])."""
    return {"neg": (torch.neg, -4), "exp": (torch.exp, -4), "log": (torch.log, 0.1),
            "sqrt": (torch.sqrt, 0.1), "rsqrt": (torch.rsqrt, 0.1), "relu": (F.relu, -4),
            "gelu": (lambda x: F.gelu(x, approximate="tanh"), -4), "silu": (F.silu, -4),
            "sigmoid": (torch.sigmoid, -4), "tanh": (torch.tanh, -4), "softplus": (F.softplus, -4),
            "abs": (torch.abs, -4), "sign": (torch.sign, -4), "square": (torch.square, -4),
            "reciprocal": (torch.reciprocal, 0.1), "sin": (torch.sin, -4), "cos": (torch.cos, -4),
            "erf": (torch.erf, -4), "log1p": (torch.log1p, -0.25), "expm1": (torch.expm1, -4),
            "gelu_erf": (F.gelu, -4), "logsigmoid": (F.logsigmoid, -4)}


def cases(F):
    """case name -> (inputs() returning a list of tensors, fn(*inputs) -> outputs)."""
    act = lambda: [u(N, C)]  # noqa: E731
    qkv = lambda: [u(B, HQ, T, D), u(B, HKV, T, D), u(B, HKV, T, D)]  # noqa: E731
    c = {}
    for name, (f, lo) in unary_ops(F).items():
        c[f"{name}/2048x688"] = (lambda lo=lo: [u(N, FF, lo=lo)], f)
    c["pow/2048x688_cube"] = (lambda: [u(N, FF)], lambda x: x.pow(3))
    for name, f in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
                    ("maximum", torch.maximum), ("minimum", torch.minimum)):
        c[f"{name}/2048x256"] = (lambda: [u(N, C), u(N, C, lo=0.5)], f)
    c["add_scalar/2048x256"] = (act, lambda x: x + 0.5)
    c["mul_scalar/2048x256"] = (act, lambda x: x * 0.5)
    c["clamp/2048x256"] = (act, lambda x: x.clamp(-0.4, 0.5))
    c["swiglu/2048x688"] = (lambda: [u(N, FF), u(N, FF)], lambda g, up: F.silu(g) * up)
    c["sum/2048x256_rows"] = (act, lambda x: x.sum(-1))
    c["mean/2048x256_rows"] = (act, lambda x: x.mean(-1))
    c["max/2048x256_rows"] = (act, lambda x: x.max(-1))
    c["cumsum/2048x256_rows"] = (act, lambda x: x.cumsum(-1))
    c["softmax/2048x256"] = (act, lambda x: torch.softmax(x, -1))
    c["log_softmax/2048x256"] = (act, lambda x: torch.log_softmax(x, -1))
    c["cross_entropy/2048x256"] = (lambda: [u(N, V), torch.randint(0, V, (N,))], F.cross_entropy)
    c["rmsnorm/2048x256"] = (lambda: [u(N, C), u(C, lo=0.5, hi=1.5)],
                             lambda x, w: F.rms_norm(x, (C,), w, 1e-6))
    c["layernorm/2048x256"] = (lambda: [u(N, C), u(C, lo=0.5, hi=1.5), u(C)],
                               lambda x, w, b: F.layer_norm(x, (C,), w, b))
    c["rotary/8x8x256x32"] = (lambda: [u(B, HQ, T, D)], hf_rotary)
    c["embedding/256x256_8x256"] = (lambda: [u(V, C), torch.randint(0, V, (B, T))],
                                    lambda w, i: F.embedding(i, w))
    c["index_select/2048x256_rows"] = (lambda: [u(N, C), torch.randint(0, N, (N,))],
                                       lambda x, i: x.index_select(0, i))
    c["gather/2048x256_8_per_row"] = (lambda: [u(N, C), torch.randint(0, C, (N, 8))],
                                      lambda x, i: x.gather(1, i))
    c["scatter_add/2048x256_8_per_row"] = (
        lambda: [u(N, C), torch.randint(0, C, (N, 8)), u(N, 8)], lambda x, i, s: x.scatter_add(1, i, s))
    c["index_add/2048x256_top2_combine"] = (
        lambda: [u(N, C), torch.randint(0, N, (N * K,)), u(N * K, C)],
        lambda x, i, s: x.index_add(0, i, s))
    c["where/2048x256"] = (lambda: [u(N, C), u(N, C), torch.rand(N, C) > 0.5],
                           lambda a, b, m: torch.where(m, a, b))
    c["topk/2048x8_top2"] = (lambda: [u(N, E)], lambda x: torch.topk(x, K, -1))
    c["sort/2048x256_rows"] = (lambda: [u(N, V)], lambda x: torch.sort(x, stable=True, dim=-1))
    c["matmul/2048x256_256x688"] = (lambda: [u(N, C), u(C, FF)], torch.matmul)
    c["linear/2048x256_688x256"] = (lambda: [u(N, C), u(FF, C)], F.linear)
    c["grouped_linear/4096x256_8_experts_688x256"] = (
        lambda: [u(N * K, C)] + [u(FF, C) for _ in range(E)], grouped_linear)
    c["sdpa/8x8x256x32_gqa4_causal"] = (
        qkv, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    c["sdpa_dropout/8x8x256x32_gqa4_causal_p0.1"] = (
        qkv, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True,
                                                            enable_gqa=True))
    c["gated_delta_rule/8x256x4x32x32"] = (
        lambda: [u(B, T, 4, D, lo=-0.2, hi=0.2), u(B, T, 4, D, lo=-0.2, hi=0.2), u(B, T, 4, D),
                 u(B, T, 4, lo=0.5, hi=1.0), u(B, T, 4, lo=0.0, hi=1.0)], gated_delta_rule)
    c["moe_route/2048x8_top2"] = (lambda: [torch.softmax(u(N, E), -1)], moe_route)
    c["dropout/2048x256_p0.1"] = (act, lambda x: F.dropout(x, 0.1))
    c["cast/2048x256_f64_to_f32"] = (lambda: [u(N, C).double()], lambda x: x.float())
    c["reshape/2048x256_to_8x256x256"] = (act, lambda x: x.reshape(B, T, C))
    c["transpose/2048x256"] = (act, lambda x: x.t())
    c["permute/8x256x8x32_heads_first"] = (lambda: [u(B, T, HQ, D)], lambda x: x.permute(0, 2, 1, 3))
    c["slice/2048x256_half"] = (act, lambda x: x[:, : C // 2])
    c["expand/2048x1_to_2048x256"] = (lambda: [u(N, 1)], lambda x: x.expand(N, C))
    c["squeeze/2048x1x256"] = (lambda: [u(N, 1, C)], lambda x: x.squeeze(1))
    c["unsqueeze/2048x256"] = (act, lambda x: x.unsqueeze(1))
    c["contiguous/256x2048_transposed"] = (act, lambda x: x.t().contiguous())
    c["cat/3x2048x256_last_dim"] = (lambda: [u(N, C), u(N, C), u(N, C)],
                                    lambda *xs: torch.cat(xs, -1))
    c["split/2048x768_in_3"] = (lambda: [u(N, 3 * C)], lambda x: x.split(C, -1))
    c["stack/3x2048x256"] = (lambda: [u(N, C), u(N, C), u(N, C)], lambda *xs: torch.stack(xs))
    return c


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def torch_call(inputs, fn, backward):
    """A zero-argument call running fn (forward), or fn and autograd."""
    if not backward:
        def forward():
            with torch.no_grad():
                return fn(*inputs)
        return forward
    leaves = [x.requires_grad_(True) if x.is_floating_point() else x for x in inputs]
    wrt = [x for x in leaves if x.requires_grad]
    outs = [y for y in as_list(fn(*leaves)) if y.requires_grad]
    grads = [torch.rand_like(y) * 2 - 1 for y in outs]

    def forward_backward():
        ys = [y for y in as_list(fn(*leaves)) if y.requires_grad]
        return torch.autograd.grad(ys, wrt, grads)
    return forward_backward


def check(bench):
    """Fails unless the cases here are exactly the ones bench_ops lists."""
    global torch
    torch = AnyName()
    listed = subprocess.run([bench, "--benchmark_list_tests"], check=True, capture_output=True,
                            text=True).stdout.split()
    ours = {re.sub(r"/(fwd|fwd_bwd)(/real_time)?$", "", name) for name in listed}
    here = set(cases(AnyName()))
    missing, stale = sorted(ours - here), sorted(here - ours)
    if missing:
        sys.exit("ops_torch.py: bench_ops cases without a PyTorch counterpart: " + " ".join(missing))
    if stale:
        sys.exit("ops_torch.py: cases that bench_ops no longer has: " + " ".join(stale))
    print(f"ops_torch.py: all {len(ours)} bench_ops cases have a PyTorch counterpart")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="build/bench/bench_ops")
    parser.add_argument("--filter", default=".", help="regex over case names, as bench_ops names them")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--check", action="store_true", help="only check the case names")
    args = parser.parse_args()
    if args.check:
        return check(args.bench)
    global torch
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    key = "cpu_s" if args.clock == "cpu" else "real_s"
    table = {name: case for name, case in cases(F).items() if re.search(args.filter, name)}
    timed = [(name, phase) for name in table for phase in ("fwd", "fwd_bwd")]

    def run_ours():
        flags = [f"--benchmark_filter={args.filter}", f"--benchmark_min_time={args.min_seconds}"]
        runs = google_benchmark(args.bench, flags, {"REPRISE_NUM_THREADS": str(args.threads)})
        return {b["run_name"].removesuffix("/real_time"): b[key] for b in runs}

    def run_theirs():
        times = {}
        for name, phase in timed:
            make_inputs, fn = table[name]
            call = torch_call(make_inputs(), fn, phase == "fwd_bwd")
            times[f"{name}/{phase}"] = time_calls(call, args.min_seconds)[1 if args.clock == "cpu" else 0]
        return times

    runs = alternate(args.rounds, {"ours": run_ours, "theirs": run_theirs})
    print(f"torch {torch.__version__}, threads {args.threads}, {args.clock} clock, f32, "
          f"{args.rounds} alternating rounds, medians; ratio = torch time / ours (> 1: ours faster)")
    print(f"{'case':<48} {'ours us':>10} {'torch us':>10} {'ratio':>6}")
    for name, phase in timed:
        case = f"{name}/{phase}"
        ours = [r[case] for r in runs["ours"] if case in r]
        if not ours:
            continue  # ops without a gradient have no fwd_bwd case
        o = statistics.median(ours)
        t = statistics.median(r[case] for r in runs["theirs"])
        print(f"{case:<48} {o * 1e6:>10.1f} {t * 1e6:>10.1f} {t / o:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
