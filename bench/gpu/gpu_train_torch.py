"""PyTorch's side of scripts/gpu_check.sh's throughput comparison: the
architecture bench/gpu/gpu_train.cpp trains (Llama: RMSNorm, RoPE,
grouped-query causal SDPA, SwiGLU MLP, untied head; vocabulary 32000), in
f32 with TF32 off (reprise's products are f32) or under
torch.autocast(bfloat16) (--dtype bf16, reprise's mixed precision: f32
master weights, bf16 products), trained with AdamW on random tokens, with every decoder layer under torch.utils.checkpoint
(use_reentrant=False, preserve_rng_state=True: PyTorch's default, which
stashes the generator state per region) or without. Reports tokens/s and
MFU against the peak and FLOPs per token the reprise program printed
(--peak, --flops), so both sides use one formula.

The dense model only: an MoE in plain PyTorch would need its own dispatch
code, and any choice there would decide the result.
"""

import argparse
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class RMSNorm(torch.nn.Module):
    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(c))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Layer(torch.nn.Module):
    def __init__(self, c, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, c // heads
        self.n1, self.n2 = RMSNorm(c), RMSNorm(c)
        self.q = torch.nn.Linear(c, heads * self.d, bias=False)
        self.k = torch.nn.Linear(c, kv_heads * self.d, bias=False)
        self.v = torch.nn.Linear(c, kv_heads * self.d, bias=False)
        self.o = torch.nn.Linear(heads * self.d, c, bias=False)
        self.gate = torch.nn.Linear(c, ffn, bias=False)
        self.up = torch.nn.Linear(c, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, c, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.n1(x)
        q = self.q(h).view(B, T, self.heads, self.d).transpose(1, 2)
        k = self.k(h).view(B, T, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(h).view(B, T, self.kv_heads, self.d).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(torch.nn.Module):
    def __init__(self, vocab, c, layers, heads, kv_heads, ffn, use_checkpoint):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, c)
        self.layers = torch.nn.ModuleList(Layer(c, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(c)
        self.head = torch.nn.Linear(c, vocab, bias=False)
        self.use_checkpoint = use_checkpoint
        self.d = c // heads

    def forward(self, ids):
        T = ids.shape[1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.d, 2, device=ids.device).float() / self.d))
        freqs = torch.outer(torch.arange(T, device=ids.device).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed(ids)
        for layer in self.layers:
            x = checkpoint(layer, x, cos, sin, use_reentrant=False) if self.use_checkpoint else layer(x, cos, sin)
        return self.head(self.norm(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--checkpoint", choices=["none", "full"], default="none")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--peak", type=float, required=True, help="FLOP/s, from gpu_train")
    p.add_argument("--flops", type=float, required=True, help="FLOP per token, from gpu_train")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Llama(32000, a.hidden, a.layers, 16, 4, a.hidden * 7 // 2, a.checkpoint == "full").to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    ids = torch.randint(0, 32000, (a.batch, a.seq), device=dev)
    seconds = 0.0
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, 32000), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if step >= a.warmup:
            seconds += time.perf_counter() - t0
    tps = a.batch * a.seq * a.steps / seconds
    print(f"torch {torch.__version__} llama checkpoint={a.checkpoint} dtype={a.dtype}: {tps:.0f} tok/s, "
          f"MFU {100 * tps * a.flops / a.peak:.1f}%, peak allocated "
          f"{torch.cuda.max_memory_allocated() / 2**20:.0f} MiB, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
