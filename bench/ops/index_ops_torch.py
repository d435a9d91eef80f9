"""Side-by-side: reprise's shape, indexing and cast ops against PyTorch CPU.

The same shapes as bench/ops/index_ops.cpp (B = 4096 tokens, C = 512, V =
32000), 2 threads on both sides (torch.set_num_threads(2); bench_index_ops
defaults to 2). PyTorch:
  index_select   torch.index_select(table, 0, ids)     (V, C), B ids
  index_add      torch.index_add(zeros, 0, ids, src)   (1024, C), B rows
  topk_router    torch.topk(logits, 2)                 (8B, 64)
  topk_vocab     torch.topk(logits, 50)                (64, V)
  gather         torch.gather(x, 1, idx)               (B, 1024), 8 per row
  scatter_add    torch.scatter_add(zeros, 1, idx, src) (B, 1024), 8 per row
  cat            torch.cat([a, b, c], 1)               3 x (B, C)
  where          torch.where(cond, a, b)               (B, 1024)
  cast_bf16      x.to(torch.bfloat16)                  2^24
The machine is shared, so the script alternates ours and theirs for several
rounds (ours: one run of bench_index_ops per round) and reports the median
time of each and the ratio of medians (> 1: reprise is faster), then the
best round of each and their ratio, which a busy machine disturbs less.
GB/s is reprise's best round.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/ops/index_ops_torch.py --bench build-index/bench/bench_index_ops
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from side_by_side import alternate, google_benchmark, time_calls  # noqa: E402

B, C, V = 4096, 512, 32000

ROWS = {
    "index_select": "BM_IndexSelectRows",
    "index_add": "BM_IndexAddRows",
    "topk_router": "BM_TopkRouter",
    "topk_vocab": "BM_TopkVocab",
    "gather": "BM_GatherLastDim",
    "scatter_add": "BM_ScatterAddLastDim",
    "cat": "BM_CatLastDim",
    "where": "BM_Where",
    "cast_bf16": "BM_CastF32ToBf16",
}


def torch_ops():
    table, ids = torch.rand(V, C), torch.randint(0, V, (B,))
    zeros_rows, row_ids, rows = torch.zeros(1024, C), torch.randint(0, 1024, (B,)), torch.rand(B, C)
    router, vocab = torch.rand(8 * B, 64), torch.rand(64, V)
    x, idx, picks = torch.rand(B, 1024), torch.randint(0, 1024, (B, 8)), torch.rand(B, 8)
    zeros_wide = torch.zeros(B, 1024)
    a, b, c = torch.rand(B, C), torch.rand(B, C), torch.rand(B, C)
    wa, wb, cond = torch.rand(B, 1024), torch.rand(B, 1024), torch.rand(B, 1024) < 0.5
    flat = torch.rand(1 << 24)
    return {
        "index_select": lambda: torch.index_select(table, 0, ids),
        "index_add": lambda: torch.index_add(zeros_rows, 0, row_ids, rows),
        "topk_router": lambda: torch.topk(router, 2),
        "topk_vocab": lambda: torch.topk(vocab, 50),
        "gather": lambda: torch.gather(x, 1, idx),
        "scatter_add": lambda: torch.scatter_add(zeros_wide, 1, idx, picks),
        "cat": lambda: torch.cat([a, b, c], 1),
        "where": lambda: torch.where(cond, wa, wb),
        "cast_bf16": lambda: flat.to(torch.bfloat16),
    }


def time_torch(fn, seconds=0.3):
    """Mean wall seconds per call (side_by_side.time_calls)."""
    return time_calls(fn, seconds, min_calls=5)[0]


def time_ours(bench, threads):
    runs = google_benchmark(bench, ["--benchmark_min_time=0.3"],
                            {"REPRISE_BENCH_THREADS": str(threads)})
    return {b["run_name"].split("/")[0]: (b["real_s"], b.get("GB/s", 0.0)) for b in runs}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ops = torch_ops()
    runs = alternate(args.rounds, {
        "ours": lambda: time_ours(args.bench, args.threads),
        "theirs": lambda: {key: time_torch(ops[key]) for key in ROWS},
    })
    ours = {key: [run[name][0] for run in runs["ours"]] for key, name in ROWS.items()}
    gbs = {key: [run[name][1] for run in runs["ours"]] for key, name in ROWS.items()}
    theirs = {key: [run[key] for run in runs["theirs"]] for key in ROWS}
    print(f"{'op':14} {'reprise us':>11} {'GB/s':>6} {'torch us':>10} {'torch/reprise':>14} "
          f"{'best: reprise':>14} {'torch':>9} {'ratio':>6}")
    for key in ROWS:
        o, t = statistics.median(ours[key]), statistics.median(theirs[key])
        bo, bt = min(ours[key]), min(theirs[key])
        print(f"{key:14} {o * 1e6:11.1f} {max(gbs[key]):6.1f} {t * 1e6:10.1f} {t / o:14.2f} "
              f"{bo * 1e6:14.1f} {bt * 1e6:9.1f} {bt / bo:6.2f}")


if __name__ == "__main__":
    main()
