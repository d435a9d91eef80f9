"""What the training-step side-by-sides share (llama_step_torch.py,
moe_step_torch.py): one training step of a Hugging Face causal LM on PyTorch
CPU beside the same step of reprise's bench program (bench/nn/train_step.h),
on the same weights and batch, in alternating rounds, with wall and CPU time
and peak memory.

A step is zero_grad, forward, HF's causal-LM loss (with the router's
load-balancing loss for an MoE model whose config sets
output_router_logits), backward and an AdamW update (lr 1e-3, weight decay
0.1 on the 2-D projections only, as reprise's default). Both sides train the
same weights (the caller writes them with save_pretrained and the bench
program loads them from the folder named by its environment variable) on the
same batch (bytes from the same 64-bit LCG), and compare() checks that the
first step's losses agree before it reports any timing. Checkpointing
"full" is HF's activation_checkpointing_enable(use_reentrant=False), one
region per decoder layer, as reprise's "full".

The machine is shared, so rounds alternate ours and theirs (each side first
in every other round, side_by_side.alternate) and the report
gives the median over rounds of each side's mean step time, and the ratio
of medians; CPU time (all threads of the process) is reported beside wall
time because it suffers less from other processes' load.

Peak memory of a step above the parameters, optimizer state and batch that
live throughout (gradients, activations, temporaries), after a warm-up step:
  tensors: exact allocation bytes. Ours by MemoryStats (the bench's
           peak_MiB); torch's from its profiler's memory timeline
           (profile_memory=True: every CPU allocation and free in order,
           summed; the step after zero_grad).
  rss:     the rise of the process's peak resident set over a step, the
           same way on both sides (VmHWM reset through /proc/self/clear_refs).
           It depends on what malloc kept from earlier steps, so it is
           noisy; the tensor figures are the comparison.
Each torch measurement runs in a fresh process. rounds = 0 measures memory
only.

MFU: the model FLOPs of a step (forward and backward, counted by torch's
FlopCounterMode on the eager variant without checkpointing: matmuls and
attention's two products, so a recompute is not counted) over the step's
CPU seconds times one core's f32 FMA peak as bench_fma_peak measures it
(beside the --bench program) at the level REPRISE_CPU_CAPABILITY or the
CPU selects. CPU time counts every thread, so this is the fraction of the
cores' peak the step used while it ran on them.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import side_by_side  # noqa: E402


def batch(B, T):
    """The bytes of bench::lcg_batch: s <- s * a + c mod 2^64, byte = s >> 56."""
    s, out = 12345, []
    for _ in range(B * T):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(s >> 56)
    return torch.tensor(out, dtype=torch.int64).view(B, T)


def load(model_dir, variant, policy):
    model = AutoModelForCausalLM.from_pretrained(model_dir, **variant)
    model.train()
    if policy == "full":
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed_tokens" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed_tokens" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}], lr=1e-3)
    return model, opt


def bf16():
    """--dtype bf16: TRAIN_STEP_DTYPE=bf16 in the environment, which our bench
    program and every fresh process of this script read."""
    return os.environ.get("TRAIN_STEP_DTYPE") == "bf16"


def step(model, opt, ids):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16()):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return loss.item()


def peak_rss_mib(model_dir, variant, policy, B, T):
    """Rise of the peak resident set over one step after a warm-up step."""
    torch.set_num_threads(2)
    model, opt = load(model_dir, variant, policy)
    ids = batch(B, T)
    step(model, opt, ids)
    base = side_by_side.status_mib("VmRSS")
    side_by_side.reset_peak_rss()
    step(model, opt, ids)
    return side_by_side.status_mib("VmHWM") - base


def peak_rss_total_mib(model_dir, variant, policy, B, T):
    """The process's peak resident set over a step after a warm-up step:
    the model, its optimizer state and the step."""
    torch.set_num_threads(2)
    model, opt = load(model_dir, variant, policy)
    ids = batch(B, T)
    step(model, opt, ids)
    side_by_side.reset_peak_rss()
    step(model, opt, ids)
    return side_by_side.status_mib("VmHWM")


def peak_tensor_mib(model_dir, variant, policy, B, T):
    """Peak of torch's CPU allocations over one step (after a warm-up step
    and zero_grad), above what was allocated when the step began."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    torch.set_num_threads(2)
    model, opt = load(model_dir, variant, policy)
    ids = batch(B, T)
    step(model, opt, ids)
    opt.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16()):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
    live = peak = 0
    for _, action, (key, _), size in prof._memory_profile().timeline:
        if key.device.type != "cpu" or action == Action.PREEXISTING:
            continue
        live += size if action == Action.CREATE else -size if action == Action.DESTROY else 0
        peak = max(peak, live)
    return peak / 2**20


def step_flops(model, ids):
    """Model FLOPs of one step's forward and backward (torch's FLOP counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def core_peak_flops(bench):
    """(one core's measured f32 FMA peak in FLOP/s, ISA level), from
    bench_fma_peak in the folder of the bench program `bench`."""
    with open("/proc/cpuinfo") as f:
        has_avx512 = " avx512f" in f.read()
    level = os.environ.get("REPRISE_CPU_CAPABILITY") or ("avx512" if has_avx512 else "avx2")
    probe = os.path.join(os.path.dirname(bench), "bench_fma_peak")
    runs = side_by_side.google_benchmark(probe, [f"--benchmark_filter=/{level}$"])
    return runs[0]["GFLOP/s"] * 1e9, level


def in_fresh_process(fn, *args):
    """fn(*args) of this module in a new interpreter, so earlier runs leave
    nothing behind: a number, or a tuple of numbers."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r});"
            f"import train_step_torch as m; r = m.{fn}(*{args!r}); "
            f"print(*(r if isinstance(r, tuple) else (r,)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    values = tuple(float(v) for v in out.stdout.strip().splitlines()[-1].split())
    return values if len(values) > 1 else values[0]


def first_loss(model_dir, variant, policy, B, T):
    """The loss of a first step, before any update."""
    torch.set_num_threads(2)
    return step(*load(model_dir, variant, policy), batch(B, T))


def torch_seconds(model_dir, variant, policy, B, T, reps):
    """(wall, cpu) seconds of one torch step after a warm-up step: a mean
    over `reps` steps."""
    torch.set_num_threads(2)
    model, opt = load(model_dir, variant, policy)
    ids = batch(B, T)
    step(model, opt, ids)
    return time_torch(model, opt, ids, reps)


def run_ours(bench, case, model_env, model_dir):
    """One run of the bench program's case `case` ("BM_llama_step/0/") on
    the folder's weights, at 2 threads: its record (side_by_side)."""
    b = side_by_side.google_benchmark(bench, [f"--benchmark_filter={case}"],
                                      env={"REPRISE_NUM_THREADS": "2", model_env: model_dir})[0]
    if "error_message" in b:
        raise RuntimeError(f"{os.path.basename(bench)}: {b['error_message']}")
    return b


def ours_seconds(bench, case, model_env, model_dir):
    """(wall, cpu) seconds of one of our steps: a mean over the bench's iterations."""
    b = run_ours(bench, case, model_env, model_dir)
    return b["real_s"], b["cpu_s"]


def time_torch(model, opt, ids, reps):
    """(wall, cpu) seconds of one torch step: a mean over `reps` steps."""
    wall, cpu = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        step(model, opt, ids)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.mean(wall), statistics.mean(cpu)


def compare(model, bench, model_env, cases, variants, B, T, rounds, reps, one_at_a_time=False):
    """Saves `model` (a freshly initialised HF model) and runs the side by
    side: for each (label, ours, policy) in `cases` (ours: the bench
    program's case; policy: "none" or "full" for torch), the first-loss
    check, `rounds` alternating rounds against every variant (a dict name ->
    from_pretrained keyword arguments), and both sides' peak memory.
    one_at_a_time: every torch model lives in a process of its own, one
    round's at a time (the first step of each round warms it up), so a
    model too large to hold twice is never in memory beside ours."""
    torch.set_num_threads(2)
    ids = batch(B, T)
    with tempfile.TemporaryDirectory() as model_dir:
        model.save_pretrained(model_dir, safe_serialization=True)
        del model
        print(f"torch {torch.__version__}, threads 2, B={B} T={T}, "
              f"{'bf16 autocast' if bf16() else 'f32'}, {rounds} alternating "
              f"rounds; medians of per-round mean step times (ms); ratio = ours / torch")
        counted = "eager" if "eager" in variants else next(iter(variants))
        flops = step_flops(load(model_dir, variants[counted], "none")[0], ids)
        peak, level = core_peak_flops(bench)
        print(f"model GFLOP per step {flops / 1e9:.2f}; one core's {level} f32 FMA peak "
              f"{peak / 1e9:.1f} GFLOP/s (bench_fma_peak)")
        for label, case, policy in cases:
            if one_at_a_time:
                first = {v: in_fresh_process("first_loss", model_dir, kw, policy, B, T)
                         for v, kw in variants.items()}
            else:
                torch_runs = {v: load(model_dir, kw, policy) for v, kw in variants.items()}
                # Same weights, same batch: the first losses must agree (f32
                # summation orders differ, so not bitwise).
                first = {v: step(*torch_runs[v], ids) for v in variants}
            ours = run_ours(bench, case, model_env, model_dir)  # its memory figures are printed below
            ours0 = ours["loss0"]
            for v, l in first.items():  # bf16 products round: 1e-2
                if abs(l - ours0) > (1e-2 if bf16() else 1e-4) * abs(l):
                    raise SystemExit(f"{label}/{v}: first loss {l} vs ours {ours0}")
            sides = {"ours": lambda: ours_seconds(bench, case, model_env, model_dir)}
            for v, kw in variants.items():
                if one_at_a_time:
                    sides[v] = lambda kw=kw: in_fresh_process("torch_seconds", model_dir, kw, policy,
                                                              B, T, reps)
                else:
                    sides[v] = lambda v=v: time_torch(*torch_runs[v], ids, reps)
            # name -> [(wall, cpu) per round], each side first in every other round
            times = side_by_side.alternate(rounds, sides)
            name = next(iter(variants))
            print(f"checkpointing {label}: first loss ours {ours0:.6f}, torch {first[name]:.6f}")
            if rounds > 0:
                for clock, i in (("wall", 0), ("cpu ", 1)):
                    m = {k: statistics.median(t[i] for t in v) * 1e3 for k, v in times.items()}
                    theirs = ", ".join(f"torch {v} {m[v]:.0f} (ratio {m['ours'] / m[v]:.2f})"
                                       for v in variants)
                    print(f"  {clock} ms: ours {m['ours']:.0f}, {theirs}")
                mfu = {k: flops / (statistics.median(t[1] for t in v) * peak) * 100
                       for k, v in times.items()}
                print("  MFU (CPU time): " + ", ".join(
                    f"{'ours' if k == 'ours' else 'torch ' + k} {u:.1f}%" for k, u in mfu.items()))
            tensors = {v: in_fresh_process("peak_tensor_mib", model_dir, kw, policy, B, T)
                       for v, kw in variants.items()}
            rss = {v: in_fresh_process("peak_rss_mib", model_dir, kw, policy, B, T)
                   for v, kw in variants.items()}
            print(f"  peak tensor MiB: ours {ours['peak_MiB']:.1f} (saved {ours['saved_MiB']:.1f}), "
                  + ", ".join(f"torch {v} {tensors[v]:.1f}" for v in variants))
            total = {v: in_fresh_process("peak_rss_total_mib", model_dir, kw, policy, B, T)
                     for v, kw in variants.items()}
            print(f"  peak rss rise MiB: ours {ours['rss_MiB']:.1f}, "
                  + ", ".join(f"torch {v} {rss[v]:.1f}" for v in variants))
            print(f"  peak rss MiB: ours {ours['rss_peak_MiB']:.0f}, "
                  + ", ".join(f"torch {v} {total[v]:.0f} (ratio "
                              f"{ours['rss_peak_MiB'] / total[v]:.2f})" for v in variants),
                  flush=True)


def main(make_model, model_env, cases, variants, B, T, one_at_a_time=False):
    """The command line of a side-by-side script: --bench (the bench
    program), --rounds, --reps; compare() on make_model() built from seed 0."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True, help="the bench program (bench_*_step)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3, help="torch steps per round (ours: 3)")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                        help="bf16: torch.autocast's bf16 policy on both sides (bf16 attention)")
    parser.add_argument("--cases", default=",".join(label for label, _, _ in cases),
                        help="comma-separated checkpointing cases to run")
    args = parser.parse_args()
    wanted = args.cases.split(",")
    cases = [c for c in cases if c[0] in wanted]
    os.environ["TRAIN_STEP_DTYPE"] = args.dtype
    torch.manual_seed(0)
    compare(make_model(), args.bench, model_env, cases, variants, B, T, args.rounds, args.reps,
            one_at_a_time)
