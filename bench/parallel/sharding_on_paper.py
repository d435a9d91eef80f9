"""Sharded data parallel on paper: what each --shard mode sends per step, and
how much of it nothing hides, for a model shape at R ranks.

The shape is the Qwen3-0.6B folder's by default: P = 596.05M weights in f32
(4 bytes each), of which the tied embedding is 155.58M and each of the 28
decoder layers 15.73M. Per process and step, with (R - 1) / R of each
collective's bytes crossing the link as R - 1 messages (latency a per
collective, o per message, bandwidth BW per process):

  none        all-reduce of the gradients, 2 (R - 1) / R 4P, during backward
  optimizer   the same, then an all-gather of the updated blocks, (R - 1) / R 4P,
              after the step: exposed
  gradients   a reduce-scatter, (R - 1) / R 4P, during backward, then the same
              all-gather: exposed
  parameters  the reduce-scatter, then each layer gathered for its forward and
              again for its backward (and replay), (R - 1) / R 4 P_layer each,
              prefetched while the previous layer computes; the rest of the
              model (the embedding) gathered once, before the forward: exposed

A prefetched gather hides under the layer before it when it takes less than
that layer's compute: 2 P_layer T / F in forward and twice that in backward
(T tokens per process, F FLOP/s). The gradient reductions are taken as hidden
under backward, as the measured buckets mostly are (bench/parallel/
data_parallel.py models them bucket by bucket).

  python3 bench/parallel/sharding_on_paper.py
"""

import argparse

LINKS = {"100 Gb/s": 12.5e9, "NVLink": 450e9}


def collective(nbytes, ranks, bw, a, o):
    """Seconds of one all-gather or reduce-scatter of nbytes in all at R ranks."""
    return (ranks - 1) / ranks * nbytes / bw + a + (ranks - 1) * o


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--params", type=float, default=596.05e6)
    p.add_argument("--embedding", type=float, default=155.58e6)
    p.add_argument("--layers", type=int, default=28)
    p.add_argument("--tokens", type=float, default=1024, help="per process and step")
    p.add_argument("--flops", type=float, default=400e12, help="per process")
    p.add_argument("--latency-us", type=float, default=5)
    p.add_argument("--per-message-us", type=float, default=1)
    args = p.parse_args()
    a, o = args.latency_us * 1e-6, args.per_message_us * 1e-6
    layer = (args.params - args.embedding) / args.layers
    forward = 2 * layer * args.tokens / args.flops  # one layer's forward, seconds
    print(f"P = {args.params / 1e6:.2f}M, {args.layers} layers of {layer / 1e6:.2f}M, "
          f"{args.tokens:.0f} tokens per process at {args.flops / 1e12:.0f} TFLOP/s: "
          f"a layer's forward {forward * 1e6:.0f} us, backward {2 * forward * 1e6:.0f} us")
    print("| link | R | optimizer: all-gather | gradients: all-gather | parameters: layer gather "
          "| parameters: exposed per step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for link, bw in LINKS.items():
        for ranks in (8, 64, 1024) if link == "100 Gb/s" else (8,):
            whole = collective(4 * args.params, ranks, bw, a, o)
            per_layer = collective(4 * layer, ranks, bw, a, o)
            exposed_forward = max(0.0, per_layer - forward) * (args.layers - 1) + per_layer
            exposed_backward = max(0.0, per_layer - 2 * forward) * (args.layers - 1)
            embedding = collective(4 * args.embedding, ranks, bw, a, o)
            exposed = embedding + exposed_forward + exposed_backward
            print(f"| {link} | {ranks} | {whole * 1e3:.1f} ms | {whole * 1e3:.1f} ms "
                  f"| {per_layer * 1e3:.2f} ms | {exposed * 1e3:.1f} ms |")
    # Tokens per process at which a layer's gather hides under its forward
    # (bandwidth term only): 2 layer T / F >= (R - 1) / R 4 layer / BW.
    for link, bw in LINKS.items():
        t = 2 * args.flops / bw
        print(f"{link}: a layer's gather hides under its forward from {t:.0f} tokens per process "
              f"(its backward from {t / 2:.0f}), whatever the layer's size")


if __name__ == "__main__":
    main()
