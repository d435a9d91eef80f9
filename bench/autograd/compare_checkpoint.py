"""Checkpointing side by side: bench_checkpoint (ours) and PyTorch, alternately.

Each round runs, for every mode, ours (bench_checkpoint, one case per
process, --benchmark_format=json) and then PyTorch's counterpart in this
process (bench/autograd/checkpoint_torch.py), so both see the same machine
load; the order flips every round. The table gives medians over the rounds.

Pairs of modes (ours <-> torch), matched by what they keep of the RNG:
  none          <-> none
  full          <-> full, preserve_rng_state=False  (neither copies RNG state;
                    torch's gradients are wrong with dropout, ours are exact)
  full+stash    <-> full, preserve_rng_state=True   (both copy generator state)
  op-level SAC  <-> create_selective_checkpoint_contexts, same save list
  budget(30%)   <-> (torch has no budget planner in eager mode)

Times are per training step (forward + backward). "cpu" is the CPU time of the
whole process, all threads (Google Benchmark's MeasureProcessCPUTime, Python's
time.process_time); "wall" is elapsed time. On a loaded shared machine cpu is
the figure to read. Both sides run 2 threads: ours on reprise's pool (its
workers spin at most REPRISE_SPIN_US after a job, then sleep), torch's on
OpenMP with OMP_WAIT_POLICY (default PASSIVE: a thread waiting at a barrier
sleeps rather than spins, so CPU time counts work, not spinning while a peer
is descheduled).

Memory: "peak saved" is ours by MemoryStats (saved-activation bytes, peak over
the forward); "held" is what the forward leaves for backward (bytes alive at
its end minus at its start, output excluded): ours by MemoryStats, torch by
malloc's in-use bytes (see checkpoint_torch.py).

"paired": ours/none measured in one process by bench_checkpoint's BM_Paired_*
cases, which alternate a step under the mode with a no-checkpoint step and
compare their CPU times: both halves see the same load and the same heap,
where "ours/none" divides medians of separate processes.

"replay": the wall time our step spends replaying regions over the wall time
of our no-checkpoint step (medians): the part of ours/none that the
recomputed ops make up, which no overhead elsewhere can remove.

"torch grad err": max |g - g_none| / max |g_none| over the parameters for one
step from the same seed; ours is 0 by construction and bench_checkpoint
checks it bitwise before timing (a case with other gradients fails).

Region overhead: a checkpoint region around one dropout on 64 elements,
forward only, minus the same dropout outside any region: the cost of opening
and closing a region, per region. Ours: the three BM_Region_* cases in one
process per round, repetitions interleaved.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/autograd/compare_checkpoint.py --bench build/bench/bench_checkpoint
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

# --malloc-keep: glibc malloc keeps freed memory for reuse (no mmap'd chunks
# below 32 MiB, no trimming), so a re-allocated buffer does not page-fault
# and get zeroed again. For study: it shows the recompute cost net of the
# allocator. Set for both sides; glibc reads it at process start.
MALLOC_KEEP = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"

# (label, our benchmark, torch mode or None)
MODES = (
    ("none", "BM_Step_none", "none"),
    ("full", "BM_Step_full", "full_norng"),
    ("full+stash", "BM_Step_full_stash", "full"),
    ("op_sac", "BM_Step_op_sac", "op_sac"),
    ("budget30", "BM_Step_budget30", None),
)
REGIONS = ("BM_Region_op_only", "BM_Region_recorded", "BM_Region_stash")
# Our paired cases (a step under the mode alternating with a no-checkpoint
# step in one process), by mode label.
PAIRED = {"full": "BM_Paired_full", "full+stash": "BM_Paired_full_stash",
          "op_sac": "BM_Paired_op_sac", "budget30": "BM_Paired_budget30"}

TARGETS = {"full": 1.33, "op_sac": 1.10, "budget30": 1.15}


def run_bench(bench, pattern, min_time, *flags):
    """bench_checkpoint's JSON rows for the cases matching `pattern`.

    OPENBLAS_NUM_THREADS=1: a pthread OpenBLAS starts its worker threads when
    it is loaded, and they spin for about 0.1 s of CPU before they sleep,
    inside the first case's measurement; reprise never runs OpenBLAS threaded
    (ops/gemm.cpp), so this changes nothing else."""
    out = subprocess.run(
        [bench, f"--benchmark_filter={pattern}", "--benchmark_format=json",
         f"--benchmark_min_time={min_time}", *flags],
        check=True, capture_output=True, text=True,
        env={**os.environ, "REPRISE_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1"})
    rows = [b for b in json.loads(out.stdout)["benchmarks"] if b.get("run_type") == "iteration"]
    for row in rows:
        if row.get("error_occurred"):
            raise RuntimeError(f"{row['name']}: {row.get('error_message')}")
    if not rows:
        raise RuntimeError(f"{pattern}: no results: {out.stdout}")
    return rows


def run_ours(bench, name, min_time):
    """One step case, alone in its process: its JSON row (times in ms)."""
    (row,) = run_bench(bench, f"^{name}/", min_time)
    return row


def run_regions(bench, reps=3):
    """The three region cases in one process, repetitions interleaved at
    random (microsecond differences between processes are placement noise):
    {name: (median CPU us, row)}."""
    rows = run_bench(bench, "^BM_Region_", 0.2, f"--benchmark_repetitions={reps}",
                     "--benchmark_enable_random_interleaving=true")
    out = {}
    for name in REGIONS:
        mine = [r for r in rows if r["run_name"].startswith(name + "/")]
        out[name] = (med([r["cpu_time"] for r in mine]), mine[0])
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="build/bench/bench_checkpoint")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=2.0,
                        help="Google Benchmark --benchmark_min_time, seconds (a plain double)")
    parser.add_argument("--reps", type=int, default=2, help="torch steps timed per round")
    parser.add_argument("--wait-policy", default="PASSIVE", help="OMP_WAIT_POLICY for both sides")
    parser.add_argument("--malloc-keep", action="store_true",
                        help=f"GLIBC_TUNABLES={MALLOC_KEEP} for both sides")
    args = parser.parse_args()
    if args.malloc_keep and os.environ.get("GLIBC_TUNABLES") != MALLOC_KEEP:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  {**os.environ, "GLIBC_TUNABLES": MALLOC_KEEP})
    # The OpenMP runtime reads its environment when torch loads: set it first.
    os.environ["OMP_WAIT_POLICY"] = args.wait_policy
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import checkpoint_torch as ct
    import torch

    torch.set_num_threads(2)
    stack = ct.Stack()

    ours = {label: {"cpu": [], "wall": [], "replay": []} for label, _, _ in MODES}
    theirs = {label: {"cpu": [], "wall": []} for label, _, mode in MODES if mode}
    counters = {}
    region_ours = {name: [] for name in REGIONS}
    paired = {label: [] for label in PAIRED}
    region_theirs = {k: [] for k in ("op", "True", "False")}

    for rnd in range(args.rounds):
        for label, name, mode in MODES:
            def mine():
                row = run_ours(args.bench, name, args.min_time)
                ours[label]["cpu"].append(row["cpu_time"])
                ours[label]["wall"].append(row["real_time"])
                ours[label]["replay"].append(row["replay_ms"])
                counters[label] = row

            def torchs():
                cpu, wall = ct.time_step(stack, mode, args.reps)
                theirs[label]["cpu"].append(cpu * 1e3)
                theirs[label]["wall"].append(wall * 1e3)

            steps = [mine] + ([torchs] if mode else [])
            for run in (steps if rnd % 2 == 0 else steps[::-1]):
                run()
        for row in run_bench(args.bench, "^BM_Paired_", args.min_time):
            for label, name in PAIRED.items():
                if row["run_name"].startswith(name + "/"):
                    paired[label].append(row["ratio_vs_none"])
        regions = run_regions(args.bench)
        for name in REGIONS:
            region_ours[name].append(regions[name][0])
        region_theirs["op"].append(ct.region_overhead(None)[0])
        for preserve in (True, False):
            region_theirs[str(preserve)].append(ct.region_overhead(preserve)[0])
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    held = {label: ct.held_bytes(stack, mode) / 2**20 for label, _, mode in MODES if mode}
    grad_err = {label: ct.grad_error(stack, mode) for label, _, mode in MODES if mode}

    malloc = "GLIBC_TUNABLES=" + MALLOC_KEEP if args.malloc_keep else "default malloc"
    print(f"torch {torch.__version__}; 2 threads both sides, OMP_WAIT_POLICY={args.wait_policy}, "
          f"{malloc}; medians of {args.rounds} alternating rounds; step = forward + backward; "
          f"ms of process CPU time (wall in brackets)")
    print(f"B={ct.B} T={ct.T} C={ct.C} heads {ct.H}/{ct.G} D={ct.D} MLP {ct.F_MLP}, "
          f"{ct.BLOCKS} blocks, dropout {ct.DROPOUT}, f32")
    header = (f"{'mode':<11} {'ours ms':>16} {'torch ms':>17} {'ours/torch':>10} "
              f"{'ours/none':>9} {'paired':>6} {'target':>6} {'replay':>6} {'torch/none':>10} {'peak saved':>10} "
              f"{'held ours':>9} {'held torch':>10} {'torch grad err':>14}")
    print(header)
    none_cpu, none_wall = med(ours["none"]["cpu"]), med(ours["none"]["wall"])
    torch_none_cpu = med(theirs["none"]["cpu"])
    peak_none = counters["none"]["peak_saved_MiB"]
    for label, _, mode in MODES:
        o_cpu, o_wall = med(ours[label]["cpu"]), med(ours[label]["wall"])
        mine = f"{o_cpu:7.0f} [{o_wall:6.0f}]"
        if mode:
            t_cpu, t_wall = med(theirs[label]["cpu"]), med(theirs[label]["wall"])
            their = f"{t_cpu:7.0f} [{t_wall:6.0f}]"
            ratio, t_none = f"{o_cpu / t_cpu:10.2f}", f"{t_cpu / torch_none_cpu:10.2f}"
            t_held, err = f"{held[label]:10.2f}", f"{grad_err[label]:14.1e}"
        else:
            their, ratio, t_none, t_held, err = (f"{'-':>17}", f"{'-':>10}", f"{'-':>10}",
                                                 f"{'-':>10}", f"{'-':>14}")
        target = f"{TARGETS[label]:6.2f}" if label in TARGETS else f"{'':6}"
        peak = counters[label]["peak_saved_MiB"]
        replay = med(ours[label]["replay"]) / none_wall
        pair = f"{med(paired[label]):6.2f}" if label in PAIRED else f"{'':6}"
        print(f"{label:<11} {mine:>16} {their:>17} {ratio} {o_cpu / none_cpu:9.2f} {pair} {target} "
              f"{replay:6.3f} "
              f"{t_none} {peak:7.1f} Mi {counters[label]['held_MiB']:6.1f} Mi {t_held} {err}")
    print("ours/none per round (min..max; the spread is the machine's noise):",
          ", ".join(f"{label} {min(r):.2f}..{max(r):.2f}" for label, r in (
              (label, [c / n for c, n in zip(ours[label]["cpu"], ours["none"]["cpu"])])
              for label, _, _ in MODES[1:])))
    print("paired per round (min..max):",
          ", ".join(f"{label} {min(r):.2f}..{max(r):.2f}" for label, r in paired.items()))
    sac_share = counters["op_sac"]["peak_saved_MiB"] / peak_none
    print(f"op_sac peak saved = {100 * sac_share:.0f}% of none's (target <= 50%); "
          f"budget30 budget {counters['budget30']['budget_MiB']:.1f} MiB")

    op = med(region_ours["BM_Region_op_only"])
    t_op = med(region_theirs["op"])
    rec, sta = regions["BM_Region_recorded"][1], regions["BM_Region_stash"][1]
    print("per-region overhead = region time - the same op outside a region "
          "(dropout on 64 elements, forward only), us of CPU time, median of rounds")
    print(f"  ours recorded: {med(region_ours['BM_Region_recorded']) - op:6.2f} us, "
          f"{rec['stashed_bytes_per_region']:.0f} bytes stashed (target < 1 us, 0 bytes)")
    print(f"  ours stash:    {med(region_ours['BM_Region_stash']) - op:6.2f} us, "
          f"{sta['stashed_bytes_per_region']:.0f} bytes stashed")
    print(f"  torch preserve_rng_state=True:  {med(region_theirs['True']) - t_op:6.2f} us, "
          f"{ct.rng_state_bytes()} bytes stashed")
    print(f"  torch preserve_rng_state=False: {med(region_theirs['False']) - t_op:6.2f} us, "
          f"0 bytes stashed")
    print(f"  (the op alone: ours {op:.2f} us, torch {t_op:.2f} us)")


if __name__ == "__main__":
    main()
