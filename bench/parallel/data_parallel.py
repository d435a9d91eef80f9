"""Data parallel on one machine: 1 process x 2 threads against 2 processes x 1 thread.

Both train llama_train's default model (0.80M parameters) on the same global
batch of 16 x 128 bytes, alternately for --rounds rounds:
  one  llama_train --threads 2 --batch 16
  two  mpiexec -n 2 llama_train --threads 1 --batch 8 --rank-stats
Throughput is the tokens per second of the logged windows after the first
(which holds the warm-up step), averaged per run; the table gives medians
over rounds. For "two", --rank-stats gives per rank the time its gradient
buckets' all-reduces took (on the reducer's thread, from the first message
posted to the last received, waiting for the other rank included), the part
of it before backward ended, and how long the step waited after backward.

Then, on paper: the bucket schedule at R ranks. Each bucket b (bytes_b)
became ready at ready_b after backward started, and backward ended at E
(medians of the measured last steps of the windows); per-rank work does not
change with R (weak scaling), so neither do these. The reducer starts bucket
b at max(ready_b, end of b - 1) and, with a link of bandwidth BW per
process, latency a and a per-message cost o, takes
  t_b(R) = 2 ((R - 1) / R bytes_b / BW + a + (R - 1) o)
(a reduce-scatter and an all-gather, each sending (R - 1) / R of the bucket
as R - 1 messages), or, at this machine's measured rate, its measured
2-rank time x 2 (R - 1) / R. What is left after E is exposed communication.

  python3 bench/parallel/data_parallel.py --trainer build/examples/llama_train/llama_train
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def windows(metrics_path):
    with open(metrics_path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    steps = [m for m in lines if "step" in m]  # not the {"config": ...} line
    return steps[1:]  # the first window is the first step alone (warm-up)


def schedule(buckets, backward_end, took_ms):
    """The all-reduce time per step, when the last bucket is done and the time
    exposed after backward's end (ms), bucket b taking took_ms(b)."""
    end = total = 0.0
    for b in buckets:
        end = max(b["ready_ms"], end) + took_ms(b)
        total += took_ms(b)
    return total, end, max(0.0, end - backward_end)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trainer", default="build/examples/llama_train/llama_train")
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--log-every", type=int, default=10)
    args = p.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    common = ["--steps", str(args.steps), "--log-every", str(args.log_every), "--eval-every",
              "0", "--eval-batches", "1"]
    results = {"one": [], "two": []}
    rank_figures = []  # per run: per rank dicts averaged over windows
    bucket_steps = []  # every window's last step's buckets (rank 0)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ["one", "two"] if r % 2 == 0 else ["two", "one"]
            for side in order:
                metrics = os.path.join(tmp, f"{side}{r}.jsonl")
                if side == "one":
                    run([args.trainer, "--threads", "2", "--batch", "16", "--metrics", metrics]
                        + common, env)
                else:
                    run([args.mpiexec, "-n", "2", "--oversubscribe", args.trainer, "--threads",
                         "1", "--batch", "8", "--rank-stats", "--metrics", metrics] + common, env)
                ws = windows(metrics)
                results[side].append(statistics.mean(w["tokens_per_s"] for w in ws))
                if side == "two":
                    per_rank = []
                    for k in range(len(ws[0]["ranks"])):
                        per_rank.append({key: statistics.mean(w["ranks"][k][key] for w in ws)
                                         for key in ws[0]["ranks"][k]})
                    rank_figures.append(per_rank)
                    bucket_steps += [w["last_step_buckets"] for w in ws]

    one, two = statistics.median(results["one"]), statistics.median(results["two"])
    print(f"tokens/s (median of {args.rounds} rounds, global batch 16 x 128):")
    print(f"  1 process x 2 threads   {one:8.0f}   runs: {[round(x) for x in results['one']]}")
    print(f"  2 processes x 1 thread  {two:8.0f}   runs: {[round(x) for x in results['two']]}"
          f"   ({two / one:.2f}x)")
    print("per rank (median over runs of the run's mean per step):")
    for k in range(len(rank_figures[0])):
        f = {key: statistics.median(run[k][key] for run in rank_figures)
             for key in rank_figures[0][k]}
        print(f"  rank {k}: step {f['step_ms']:.1f} ms, all-reduce {f['all_reduce_ms']:.1f} ms"
              f" ({100 * f['all_reduce_ms'] / f['step_ms']:.0f}% of the step),"
              f" {f['all_reduce_during_backward_ms']:.1f} ms of it during backward"
              f" ({100 * f['all_reduce_during_backward_ms'] / f['all_reduce_ms']:.0f}%),"
              f" wait after backward {f['wait_after_backward_ms']:.1f} ms")

    n = len(bucket_steps[0]["buckets"])
    buckets = []
    for i in range(n):
        bs = [s["buckets"][i] for s in bucket_steps]
        buckets.append({
            "bytes": bs[0]["bytes"],
            "ready_ms": statistics.median(b["ready_ms"] for b in bs),
            "took_ms": statistics.median(b["end_ms"] - b["start_ms"] for b in bs),
        })
    backward_end = statistics.median(s["backward_end_ms"] for s in bucket_steps)
    print(f"buckets (rank 0, medians of {len(bucket_steps)} steps; backward ends at"
          f" {backward_end:.1f} ms after it starts):")
    for i, b in enumerate(buckets):
        print(f"  bucket {i}: {b['bytes'] / 2**20:.2f} MiB, ready at {b['ready_ms']:.1f} ms,"
              f" all-reduce took {b['took_ms']:.2f} ms on 2 ranks")
    print("on paper (a = 5 us latency, o = 1 us per message):")
    models = [(name, lambda b, R, bw=bw: 1e3 * 2 * ((R - 1) / R * b["bytes"] / bw + 5e-6
                                                   + (R - 1) * 1e-6))
              for name, bw in (("100 Gb/s (12.5 GB/s)", 12.5e9), ("10 Gb/s (1.25 GB/s)", 1.25e9))]
    models.append(("this machine's rate", lambda b, R: b["took_ms"] * 2 * (R - 1) / R))
    for name, took in models:
        for ranks in (2, 8, 64):
            total, end, exposed = schedule(buckets, backward_end, lambda b: took(b, ranks))
            print(f"  {name:22s} R = {ranks:2d}: all-reduce {total:6.2f} ms per step,"
                  f" last bucket done at {end:6.1f} ms, exposed after backward {exposed:5.2f} ms")

if __name__ == "__main__":
    main()
