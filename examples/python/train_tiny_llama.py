#!/usr/bin/env python3
"""Trains the example byte-level Llama from Python, with the training loop
written out here, and prints what the C++ binary llama_train prints: for
the same flags the losses, gradient norms and held-out losses are the same
digit for digit (the loop below is nn::Trainer::step's, op for op).

    python examples/python/train_tiny_llama.py                 # llama_train's default run
    python examples/python/train_tiny_llama.py --steps 20 --checkpoint-policy full --dropout 0.1
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import reprise
from reprise import nn


def parse_args(argv: list[str]) -> argparse.Namespace:
    d = nn.TrainConfig()  # llama_train's defaults
    m = d.model
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="train on the bytes of FILE (default: the built-in corpus)")
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch", type=int, default=d.batch)
    p.add_argument("--seq", type=int, default=d.seq)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--min-lr", type=float, default=d.min_lr)
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--grad-clip", type=float, default=d.grad_clip)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                   help="precision of the projections (bf16: mixed precision, f32 masters)")
    p.add_argument("--attention-dtype", default="f32", choices=["f32", "bf16"])
    p.add_argument("--dropout", type=float, default=m.dropout)
    p.add_argument("--attn-dropout", type=float, default=m.attention_dropout)
    p.add_argument("--hidden", type=int, default=m.hidden_size)
    p.add_argument("--layers", type=int, default=m.num_hidden_layers)
    p.add_argument("--heads", type=int, default=m.num_attention_heads)
    p.add_argument("--kv-heads", type=int, default=m.num_key_value_heads)
    p.add_argument("--intermediate", type=int, default=m.intermediate_size)
    p.add_argument("--checkpoint-policy", default="none",
                   help="none | full | every-n-layers:N | op-sac | budget:BYTES")
    p.add_argument("--rng-replay", default="recorded", help="recorded | stash | fresh")
    p.add_argument("--verify", default="none", help="none | metadata | bitwise")
    p.add_argument("--recompute-noise-ulps", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=4)
    return p.parse_args(argv)


def train_config(a: argparse.Namespace) -> nn.TrainConfig:
    c = nn.TrainConfig(steps=a.steps, batch=a.batch, seq=a.seq, lr=a.lr, min_lr=a.min_lr,
                       warmup=a.warmup, weight_decay=a.weight_decay, grad_clip=a.grad_clip,
                       seed=a.seed, dtype=reprise.as_dtype(a.dtype),
                       attention_dtype=reprise.as_dtype(a.attention_dtype))
    model = c.model  # a copy: assigned back below
    model.dropout, model.attention_dropout = a.dropout, a.attn_dropout
    model.hidden_size, model.num_hidden_layers = a.hidden, a.layers
    model.num_attention_heads, model.num_key_value_heads = a.heads, a.kv_heads
    model.intermediate_size = a.intermediate
    c.model = model
    ck = nn.CheckpointConfig.parse(a.checkpoint_policy)
    ck.rng_replay = nn.parse_rng_replay(a.rng_replay)
    ck.verify = nn.parse_verify(a.verify)
    ck.recompute_noise_ulps = a.recompute_noise_ulps
    c.checkpointing = ck
    c.validate()
    return c


def machine_peak(cores: int, dtype) -> tuple[float, str]:
    """llama_train's peak: cores x 2 FMA x lanes x 2 x the first CPU's clock,
    twice that for bf16 products on vdpbf16ps."""
    mhz = 0.0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    mhz = float(line.split(":")[1])
                    break
    except OSError:
        pass
    if mhz <= 0:
        return 0.0, "unknown (no clock in /proc/cpuinfo): MFU not shown"
    cap = reprise.cpu_capability()
    lanes, isa = {reprise.CpuCapability.avx512_bf16: (16, "AVX-512"),
                  reprise.CpuCapability.avx512: (16, "AVX-512"),
                  reprise.CpuCapability.avx2: (8, "AVX2")}.get(cap, (4, "SSE"))
    dot = dtype == reprise.bfloat16 and cap == reprise.CpuCapability.avx512_bf16
    flops = cores * 2 * lanes * 2 * mhz * 1e6 * (2 if dot else 1)
    return flops, (f"{flops / 1e9:.0f} GFLOP/s {'bf16' if dot else 'f32'} = {cores} cores x 2 FMA "
                   f"x {lanes} lanes ({isa}) x 2{' x 2 (vdpbf16ps)' if dot else ''} x "
                   f"{mhz / 1e3:.2f} GHz")


def mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def eta(steps: int, seconds_per_step: float) -> str:
    """"ETA 1h02m", "ETA 3m05s", "ETA 12s", as llama_train prints it."""
    s = round(steps * seconds_per_step)
    if s >= 3600:
        return f"ETA {s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"ETA {s // 60}m{s % 60:02d}s"
    return f"ETA {s}s"


def evaluate(model: nn.LlamaForCausalLM, data: nn.TextDataset, batch: int, seq: int,
             batches: int, precision: nn.autocast) -> float:
    """Mean held-out loss over fixed windows, in eval mode without grad: no
    dropout and no random numbers drawn, so the run is not disturbed."""
    windows = min(data.num_val_windows(seq), batches * batch)
    total = 0.0
    model.eval()
    try:
        with reprise.no_grad(), precision:
            for first in range(0, windows, batch):
                n = min(batch, windows - first)
                b = data.val_batch(first, n, seq)
                loss = nn.LlamaForCausalLM.loss(model(b.input_ids).logits, b.labels)
                total += loss.item() * n
    finally:
        model.train()
    return total / windows


def main(argv: list[str]) -> int:
    try:
        a = parse_args(argv)
        c = train_config(a)
    except reprise.Error as e:
        print(f"train_tiny_llama: {e}", file=sys.stderr)
        return 2
    if a.threads > 0:
        reprise.set_num_threads(a.threads)

    data = nn.TextDataset.from_file(a.data) if a.data else nn.TextDataset.builtin()
    # The run: one generator (streams init, data, dropout), the model
    # initialised from it, AdamW with decay on projections and head only,
    # the cosine schedule, and the layers' checkpointing.
    gen = reprise.Generator(c.seed)
    model = nn.LlamaForCausalLM(c.model, gen)
    model.set_dropout_generator(gen)
    opt = nn.AdamW(model.parameters(), lr=c.lr, beta1=c.beta1, beta2=c.beta2,
                   weight_decay=c.weight_decay)
    schedule = nn.CosineSchedule(c.lr, c.min_lr, c.warmup, c.steps)
    ck = c.checkpointing
    if ck.recompute_noise_ulps > 0:
        ck.on_mismatch = reprise.OnMismatch.report  # noise exists to be measured
    layers = nn.LayerCheckpointing(ck, gen)
    precision = nn.autocast(c.dtype, c.attention_dtype)

    entropy = nn.corpus_entropy()
    peak_flops, peak_how = machine_peak(reprise.num_threads(), c.dtype)
    flops_per_token = model.training_flops_per_token(c.seq)
    m = c.model
    print(f"model    {m.describe()}: {model.num_parameters() / 1e6:.2f}M parameters, "
          f"{flops_per_token / 1e6:.1f} MFLOP per token per step")
    print(f"data     {data.name}: {data.size} bytes, {data.train_size} for training, "
          f"{data.val_size} held out")
    if not a.data:
        print(f"         entropy rate {entropy.nats_per_byte:.3f} nats/byte (a model that cannot "
              f"copy or add: {entropy.grammar_only_nats:.3f}); uniform {entropy.uniform_nats:.3f}")
    print("run      %d steps of %d x %d tokens, AdamW lr %.3g -> %.3g (cosine, warmup %d), "
          "wd %.3g, clip %.3g, dropout %.3g/%.3g, seed %d"
          % (c.steps, c.batch, c.seq, c.lr, c.min_lr, c.warmup, c.weight_decay, c.grad_clip,
             m.dropout, m.attention_dropout, c.seed))
    print(f"compute  checkpoint {ck.policy_string()}, rng replay {ck.rng_replay.name}, "
          f"verify {ck.verify.name}, noise {ck.recompute_noise_ulps} ulps, "
          f"{reprise.num_threads()} threads, cpu {reprise.cpu_capability().name}, device cpu, "
          f"dtype {c.dtype.name}")
    if c.attention_dtype != reprise.float32:
        print(f"         attention in {c.attention_dtype.name}")
    if c.dtype == reprise.bfloat16:
        cap = reprise.cpu_capability()
        if cap == reprise.CpuCapability.avx512_bf16:
            print("         bf16 products on the dot-product instruction (vdpbf16ps)")
        else:
            print(f"         bf16 products emulated at {cap.name} (no AVX512-BF16 in use): the same "
                  "bits at the f32 product's speed, half the dot-product instruction's")
    print(f"peak     {peak_how}", flush=True)

    window_tokens = window_peak_saved = window_peak_total = 0
    window_seconds = total_seconds = 0.0
    last_loss, last_val = 0.0, None
    for step in range(1, c.steps + 1):
        # ---- one step: nn::Trainer::step, op for op ---------------------------
        start = time.perf_counter()
        reprise.reset_peak_memory()
        lr = schedule.lr(step - 1)
        opt.lr = lr
        batch = data.sample(c.batch, c.seq, gen)
        with precision:
            out = model(batch.input_ids, layers)
        loss = model.causal_lm_loss(out, batch.labels)
        reprise.backward(loss)
        last_loss = loss.item()
        del batch, out, loss  # as the C++ step's scope ends here
        grad_norm = nn.clip_grad_norm(opt.params, c.grad_clip if c.grad_clip > 0 else math.inf)
        opt.step()
        opt.zero_grad()
        mem = reprise.memory_stats()
        seconds = time.perf_counter() - start
        # ---- logging, as llama_train ---------------------------------------------
        window_tokens += c.batch * c.seq
        window_seconds += seconds
        total_seconds += seconds
        window_peak_saved = max(window_peak_saved,
                                mem[reprise.MemoryKind.saved_activation].peak)
        window_peak_total = max(window_peak_total, mem.total.peak)
        if not math.isfinite(last_loss):
            print(f"train_tiny_llama: error: the loss is not finite at step {step}",
                  file=sys.stderr)
            return 1
        last = step == c.steps
        do_eval = (a.eval_every > 0 and step % a.eval_every == 0) or last
        if not (do_eval or step == 1 or step % a.log_every == 0):
            continue
        val = None
        if do_eval and data.num_val_windows(c.seq) > 0:
            val = last_val = evaluate(model, data, c.batch, c.seq, a.eval_batches, precision)
        tokens_per_s = window_tokens / window_seconds
        line = "step %5d/%d | loss %.4f | lr %.2e | grad norm %6.3f | %7.0f tok/s" % (
            step, c.steps, last_loss, lr, grad_norm, tokens_per_s)
        if peak_flops > 0:
            line += " | MFU %4.1f%%" % (100 * flops_per_token * tokens_per_s / peak_flops)
        if step < c.steps:
            line += " | " + eta(c.steps - step, total_seconds / step)
        line += f" | saved act {mib(window_peak_saved)} | mem {mib(window_peak_total)}"
        if val is not None:
            line += " | val loss %.4f" % val
        print(line, flush=True)
        window_tokens = window_peak_saved = window_peak_total = 0
        window_seconds = 0.0

    r = reprise.recompute_stats()
    done = "done     %d steps in %.1f s, last loss %.4f" % (c.steps, total_seconds, last_loss)
    if last_val is not None:
        done += ", val loss %.4f" % last_val
    if not a.data:
        done += f" (entropy rate {entropy.nats_per_byte:.3f})"
    if ck.kind != nn.CheckpointKind.none:
        done += "; %d region replays (%.1f s), %d verifier mismatches" % (
            r.replays, r.replay_seconds, r.mismatches)
    print(done)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
