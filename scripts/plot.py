#!/usr/bin/env python3
"""Pictures of training runs, from the files the trainers write.

  plot.py metrics run.jsonl [other.jsonl ...] -o loss.png
      loss (and held-out loss) and throughput per step, from --metrics files;
      one line per file.
  plot.py memory none.json full.json ... [--label none --label full ...] -o memory.png
      saved-activation memory over one step, from --trace files; one line per
      file, labelled by --label or else by the file's name.

  plot.py grpo dense.jsonl moe.jsonl [--label dense --label moe ...] -o reward.png
      the mean reward per step of examples/python/grpo.py --metrics runs, with
      a moving average; one line per file.

  plot.py study docs/study -o study.png
      from checkpoint_study's loss_curves.csv and table.csv: how far the
      losses of checkpointed training drift from training without it
      (recorded against fresh randomness), and the MoE routing flips per step
      against the noise on recomputed values.

Needs matplotlib.
"""

import argparse
import csv
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

MIB = 1024 * 1024


def read_metrics(path):
    """The logged steps of a metrics JSONL file (lines without a step, such
    as a leading {"config": ...}, are skipped)."""
    steps = []
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                if "step" in record:
                    steps.append(record)
    if not steps:
        raise SystemExit(f"{path}: no logged steps")
    return steps


def plot_metrics(args):
    fig, (loss_ax, speed_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
    for path in args.files:
        steps = read_metrics(path)
        name = pathlib.Path(path).stem
        x = [s["step"] for s in steps]
        loss_ax.plot(x, [s["loss"] for s in steps], label=f"{name} train")
        val = [(s["step"], s["val_loss"]) for s in steps if "val_loss" in s]
        if val:
            loss_ax.plot(*zip(*val), "o--", markersize=3, label=f"{name} held out")
        speed_ax.plot(x, [s["tokens_per_s"] for s in steps], label=name)
    loss_ax.set(xlabel="step", ylabel="loss (nats per token)", title="loss")
    speed_ax.set(xlabel="step", ylabel="tokens / s", title="throughput")
    speed_ax.set_ylim(bottom=0)
    for ax in (loss_ax, speed_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)


def read_saved_activation(path):
    """(time in ms from the trace's first sample, saved-activation MiB) of a
    --trace file's memory counters."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    samples = [e for e in events if e.get("ph") == "C" and e.get("name") == "memory"]
    if not samples:
        raise SystemExit(f"{path}: no memory counters")
    start = samples[0]["ts"]
    return ([(e["ts"] - start) / 1e3 for e in samples],
            [e["args"]["saved_activation"] / MIB for e in samples])


def plot_memory(args):
    if args.label and len(args.label) != len(args.files):
        raise SystemExit(f"{len(args.label)} --label for {len(args.files)} files")
    labels = args.label or [pathlib.Path(p).stem for p in args.files]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for path, label in zip(args.files, labels):
        t, mib = read_saved_activation(path)
        ax.plot(t, mib, label=f"{label} (peak {max(mib):.1f} MiB)", linewidth=1.2)
    ax.set(xlabel="time in the step (ms)", ylabel="saved activations (MiB)",
           title=args.title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)


def plot_grpo(args):
    labels = args.label or [pathlib.Path(f).stem for f in args.files]
    if len(labels) != len(args.files):
        raise SystemExit("plot.py grpo: give one --label per file")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for path, label in zip(args.files, labels):
        steps = read_metrics(path)
        x = [s["step"] for s in steps]
        reward = [s["reward"] for s in steps]
        window = 5
        smooth = [sum(reward[max(0, i - window + 1):i + 1]) / len(reward[max(0, i - window + 1):i + 1])
                  for i in range(len(reward))]
        line, = ax.plot(x, reward, alpha=0.3)
        ax.plot(x, smooth, color=line.get_color(), label=f"{label} (mean of {window})")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward (exact sums)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)


def noise_ulps(cell):
    """The ulps of a table.csv noise cell ("0", "16 (router)") and where the
    noise went ("router", "all"; "" for none)."""
    ulps, _, where = cell.partition(" ")
    return int(ulps), where.strip("()")


def plot_study(args):
    folder = pathlib.Path(args.folder)
    with open(folder / "loss_curves.csv") as f:
        curves = list(csv.DictReader(f))
    with open(folder / "table.csv") as f:
        rows = list(csv.DictReader(f))
    fig, (loss_ax, flips_ax) = plt.subplots(1, 2, figsize=(10, 3.8))

    # The loss difference to the run without checkpointing, step by step.
    steps = [int(c["step"]) for c in curves]
    for column, label in (("full_recorded", "full, recorded replay"),
                          ("full_fresh", "full, fresh randomness")):
        diff = [float(c[column]) - float(c["none"]) for c in curves]
        loss_ax.plot(steps, diff, label=label, linewidth=1.0)
    loss_ax.set(xlabel="step", ylabel="loss - loss without checkpointing",
                title="dropout 0.1: recorded replay vs fresh randomness")
    loss_ax.grid(alpha=0.3)
    loss_ax.legend(fontsize=8)

    # Routing flips per step against noise on the recomputed router, by
    # gate precision and by whether the router is saved or recomputed.
    series = {}
    for r in rows:
        if not r["model"].startswith("moe") or r["rng"] != "recorded":
            continue
        if not r["policy"].startswith("full"):
            continue
        ulps, where = noise_ulps(r["noise_ulps"])
        if where not in ("", "router"):
            continue
        gate = "bf16 gate" if "bf16" in r["model"] else "fp32 gate"
        router = "saved" if "router saved" in r["policy"] else "recomputed"
        series.setdefault(f"{gate}, router {router}", []).append(
            (ulps, float(r["routing_flips"])))
    for label, points in sorted(series.items()):
        points.sort()
        saved = label.endswith("saved")  # 0 flips: dashed, so both saved lines show
        flips_ax.plot(*zip(*points), "s--" if saved else "o-", label=label,
                      markersize=7 if saved and "bf16" in label else 4)
    flips_ax.set_xscale("symlog", linthresh=1)
    flips_ax.set(xlabel="noise on recomputed values (ulps)", ylabel="routing flips per step",
                 title="MoE routing under inexact recompute")
    flips_ax.grid(alpha=0.3)
    flips_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    metrics = sub.add_parser("metrics", help="loss and throughput from --metrics files")
    metrics.add_argument("files", nargs="+")
    metrics.set_defaults(run=plot_metrics)
    memory = sub.add_parser("memory", help="saved activations over a step from --trace files")
    memory.add_argument("files", nargs="+")
    memory.add_argument("--label", action="append",
                        help="a line's label, once per file in order (default: file names)")
    memory.add_argument("--title", default="saved activations over one training step")
    memory.set_defaults(run=plot_memory)
    grpo = sub.add_parser("grpo", help="the reward per step of grpo.py --metrics runs")
    grpo.add_argument("files", nargs="+")
    grpo.add_argument("--label", action="append",
                      help="a line's label, once per file in order (default: file names)")
    grpo.set_defaults(run=plot_grpo)
    study = sub.add_parser("study", help="checkpoint_study's loss curves and routing flips")
    study.add_argument("folder", help="checkpoint_study's --out folder (docs/study)")
    study.set_defaults(run=plot_study)
    for p in (metrics, memory, grpo, study):
        p.add_argument("-o", "--output", required=True, help="the picture (.png, .svg, ...)")
        p.add_argument("--dpi", type=int, default=100)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
