"""The checkpointing benchmark's model in PyTorch, under torch.utils.checkpoint.

The same 4-block transformer stack as bench/autograd/checkpoint.cpp (the
Llama example's shapes): B = 8, T = 256, C = 256, 8 query heads, 4 kv heads,
D = 32, SiLU-gated MLP of width 688, linears without bias (weights N(0, 0.02)),
RMSNorm weights 1 (eps 1e-6), causal grouped-query SDPA, residual dropout 0.1.
A training step is forward + backward of mean(h * h), f32, 2 threads.

Modes (one region per block):
  none        no checkpointing
  full        checkpoint(use_reentrant=False, preserve_rng_state=True)
  full_norng  the same with preserve_rng_state=False (wrong gradients with dropout)
  op_sac      selective activation checkpointing: create_selective_checkpoint_contexts
              with torchtitan's op-level policy restricted to our save list: MUST_SAVE
              the SDPA op and every second aten.mm (the 1st, 3rd, ... of a region),
              PREFER_RECOMPUTE everything else

Memory, "held": bytes malloc has in use at the end of the forward minus at its
start, minus the output (glibc mallinfo2: every arena and every mmap'd chunk;
torch's CPU allocator does not cache). That is what autograd, the checkpoint
frames and the SAC cache keep for backward, measured the same way whatever
holds it; saved_tensors_hooks would not see what checkpoint keeps inside a
region. bench_checkpoint's held_MiB is the same quantity from MemoryStats.

Region overhead: a region around one dropout on 64 elements, forward only,
minus the same dropout outside a region, in microseconds.

Used by bench/autograd/compare_checkpoint.py; run alone for a quick table:
    .venv/bin/python bench/autograd/checkpoint_torch.py
"""

import argparse
import ctypes
import functools
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

B, T, C, H, G, F_MLP = 8, 256, 256, 8, 4, 688
D = C // H
BLOCKS = 4
DROPOUT = 0.1
EPS = 1e-6
MODES = ("none", "full", "full_norng", "op_sac")


class Block:
    def __init__(self, gen):
        def w(*shape):
            return (torch.randn(*shape, generator=gen) * 0.02).requires_grad_()

        self.norm1 = torch.ones(C, requires_grad=True)
        self.wq, self.wk, self.wv, self.wo = w(C, C), w(G * D, C), w(G * D, C), w(C, C)
        self.norm2 = torch.ones(C, requires_grad=True)
        self.wg, self.wu, self.wd = w(F_MLP, C), w(F_MLP, C), w(C, F_MLP)

    def params(self):
        return [self.norm1, self.wq, self.wk, self.wv, self.wo, self.norm2, self.wg, self.wu,
                self.wd]

    def __call__(self, x):  # (B, T, C) -> (B, T, C)
        h = F.rms_norm(x, (C,), self.norm1, EPS)

        def heads(w, n):  # (B, T, n D) -> (B, n, T, D)
            return F.linear(h, w).view(B, T, n, D).transpose(1, 2)

        q, k, v = heads(self.wq, H), heads(self.wk, G), heads(self.wv, G)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        a = a.transpose(1, 2).reshape(B, T, C)
        r = x + F.dropout(F.linear(a, self.wo), DROPOUT)
        h2 = F.rms_norm(r, (C,), self.norm2, EPS)
        m = F.linear(F.silu(F.linear(h2, self.wg)) * F.linear(h2, self.wu), self.wd)
        return r + F.dropout(m, DROPOUT)


SDPA_OPS = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
}


def op_sac_context():
    """torchtitan's op-level SAC policy with our save list (sdpa, every second mm).

    Called once per region per step, so the mm counters restart in each
    region; forward and recompute count separately, as in torchtitan.
    """
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, op, *args, **kwargs):
        if op in SDPA_OPS:
            return CheckpointPolicy.MUST_SAVE
        if op == torch.ops.aten.mm.default:
            key = "recompute" if ctx.is_recompute else "forward"
            counts[key] += 1
            if counts[key] % 2 == 1:
                return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def region(mode):
    """How one block runs under `mode`: a function of (block, x)."""
    if mode == "none":
        return lambda block, x: block(x)
    if mode == "op_sac":
        return lambda block, x: checkpoint(block, x, use_reentrant=False,
                                           context_fn=op_sac_context)
    preserve = {"full": True, "full_norng": False}[mode]
    return lambda block, x: checkpoint(block, x, use_reentrant=False, preserve_rng_state=preserve)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _Mallinfo2


def malloc_in_use():
    """Bytes malloc has handed out and not had back (all arenas + mmap'd chunks)."""
    m = _libc.mallinfo2()
    return m.uordblks + m.hblkhd


class Stack:
    def __init__(self, seed=42):
        gen = torch.Generator().manual_seed(seed)
        self.blocks = [Block(gen) for _ in range(BLOCKS)]
        self.x = torch.randn(B, T, C, generator=gen)

    def params(self):
        return [p for b in self.blocks for p in b.params()]

    def step(self, mode):
        """One forward + backward; returns the bytes held at the end of the forward."""
        for p in self.params():
            p.grad = None
        run = region(mode)
        before = malloc_in_use()
        h = self.x
        for block in self.blocks:
            h = run(block, h)
        held = malloc_in_use() - before - h.nbytes
        (h * h).mean().backward()
        return held

    def grads_from(self, seed, mode):
        torch.manual_seed(seed)
        self.step(mode)
        return [p.grad.clone() for p in self.params()]


def grad_error(stack, mode, seed=1234):
    """Largest |g - g_none| / max|g_none| over the parameters, same dropout seed."""
    ref = stack.grads_from(seed, "none")
    got = stack.grads_from(seed, mode)
    return max(float((g - r).abs().max() / r.abs().max()) for g, r in zip(got, ref))


def time_step(stack, mode, reps):
    """Median over reps of (process CPU seconds, wall seconds) per step, after a warm-up."""
    stack.step(mode)
    cpu, wall = [], []
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        stack.step(mode)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return sorted(cpu)[len(cpu) // 2], sorted(wall)[len(wall) // 2]


def held_bytes(stack, mode):
    """Bytes held for backward at the end of the forward (second of two steps)."""
    stack.step(mode)
    return stack.step(mode)


def region_overhead(preserve_rng_state, iters=20000):
    """Per-iteration (process CPU us, wall us) of a dropout on 64 elements,
    inside a checkpoint region (preserve_rng_state True/False) or, with None,
    outside any region. Forward only, as bench_checkpoint's BM_Region_*."""
    x = torch.ones(64, requires_grad=True)
    op = functools.partial(F.dropout, p=0.5)
    if preserve_rng_state is None:
        def fn():
            return op(x)
    else:
        def fn():
            return checkpoint(op, x, use_reentrant=False, preserve_rng_state=preserve_rng_state)
    for _ in range(iters // 10):
        fn()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(iters):
        fn()
    return ((time.process_time() - c0) / iters * 1e6, (time.perf_counter() - w0) / iters * 1e6)


def rng_state_bytes():
    """What preserve_rng_state=True copies per region on CPU: the generator state."""
    return torch.get_rng_state().numel()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)
    stack = Stack()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"median of {args.reps} steps")
    print(f"{'mode':>11} {'cpu ms':>8} {'wall ms':>8} {'held MiB':>9} {'grad err':>9}")
    for mode in MODES:
        cpu, wall = time_step(stack, mode, args.reps)
        held = held_bytes(stack, mode) / 2**20
        err = grad_error(stack, mode)
        print(f"{mode:>11} {cpu * 1e3:>8.1f} {wall * 1e3:>8.1f} {held:>9.2f} {err:>9.2e}")
    op = region_overhead(None)
    for preserve in (True, False):
        r = region_overhead(preserve)
        print(f"region preserve_rng_state={preserve}: {r[0] - op[0]:.2f} us CPU "
              f"({r[1] - op[1]:.2f} us wall) over the op alone")
    print(f"rng state copied per region with preserve_rng_state=True: {rng_state_bytes()} bytes")


if __name__ == "__main__":
    main()
