"""Side-by-side: one Llama training step, reprise against Hugging Face
transformers' LlamaForCausalLM on PyTorch CPU.

Model: hidden 256, 4 layers, 8 heads, 4 kv heads, intermediate 688, byte
vocabulary 256; batch 8 x seq 256; f32; 2 threads on both sides. A step is
zero_grad, forward, HF's shifted causal-LM loss, backward and an AdamW update
(lr 1e-3, weight decay 0.1 on the 2-D projections only, as reprise's
default). Both sides train the same weights (this script writes them with
save_pretrained and bench_llama_step loads them) on the same batch (bytes
from the same 64-bit LCG), and the script checks that the first step's
losses agree before it reports any timing.

PyTorch runs HF's default attention ("sdpa": F.scaled_dot_product_attention)
and, for reference, "eager" (explicit softmax). Checkpointing: none, and full
(HF's activation_checkpointing_enable(use_reentrant=False), one region per
decoder layer, as reprise's "full").

The machine is shared, so rounds alternate ours and theirs and the report
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
Each torch measurement runs in a fresh process. --rounds 0 measures memory
only.

Run from the repository root after building with -DREPRISE_BUILD_BENCH=ON:
    .venv/bin/python bench/nn/llama_step_torch.py --bench build/bench/bench_llama_step
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

B, T = 8, 256
POLICIES = {"none": 0, "full": 1}
ATTENTION = ("sdpa", "eager")


def config(attn):
    return LlamaConfig(
        vocab_size=256, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=T,
        attention_dropout=0.0, tie_word_embeddings=False, attn_implementation=attn)


def batch():
    """The bytes bench_llama_step uses: s <- s * a + c mod 2^64, byte = s >> 56."""
    s, out = 12345, []
    for _ in range(B * T):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(s >> 56)
    return torch.tensor(out, dtype=torch.int64).view(B, T)


def load(model_dir, attn, policy):
    model = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation=attn)
    model.train()
    if policy == "full":
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed_tokens" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}], lr=1e-3)
    return model, opt


def step(model, opt, ids):
    opt.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return loss.item()


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_rss_mib(model_dir, attn, policy):
    """Rise of the peak resident set over one step after a warm-up step."""
    torch.set_num_threads(2)
    model, opt = load(model_dir, attn, policy)
    ids = batch()
    step(model, opt, ids)
    base = status_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    step(model, opt, ids)
    return status_mib("VmHWM") - base


def peak_tensor_mib(model_dir, attn, policy):
    """Peak of torch's CPU allocations over one step (after a warm-up step
    and zero_grad), above what was allocated when the step began."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    torch.set_num_threads(2)
    model, opt = load(model_dir, attn, policy)
    ids = batch()
    step(model, opt, ids)
    opt.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    live = peak = 0
    for _, action, (key, _), size in prof._memory_profile().timeline:
        if key.device.type != "cpu" or action == Action.PREEXISTING:
            continue
        live += size if action == Action.CREATE else -size if action == Action.DESTROY else 0
        peak = max(peak, live)
    return peak / 2**20


def in_fresh_process(fn, *args):
    """fn(*args) in a new interpreter, so earlier runs leave nothing behind."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r});"
            f"import llama_step_torch as m; print(m.{fn}(*{args!r}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def run_ours(bench, model_dir, policy):
    out = subprocess.run(
        [bench, f"--benchmark_filter=BM_llama_step/{POLICIES[policy]}/", "--benchmark_format=json"],
        check=True, capture_output=True, text=True,
        env={**os.environ, "REPRISE_NUM_THREADS": "2", "LLAMA_STEP_MODEL": model_dir})
    b = json.loads(out.stdout)["benchmarks"][0]
    if "error_message" in b:
        raise RuntimeError(f"bench_llama_step: {b['error_message']}")
    return b


def time_torch(model, opt, ids, reps):
    wall, cpu = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        step(model, opt, ids)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.mean(wall), statistics.mean(cpu)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="build/bench/bench_llama_step")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3, help="torch steps per round (ours: 3)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    ids = batch()
    with tempfile.TemporaryDirectory() as model_dir:
        LlamaForCausalLM(config("sdpa")).save_pretrained(model_dir, safe_serialization=True)
        print(f"torch {torch.__version__}, threads 2, B={B} T={T}, {args.rounds} alternating "
              f"rounds; medians of per-round mean step times (ms); ratio = ours / torch")
        for policy in POLICIES:
            torch_runs = {attn: load(model_dir, attn, policy) for attn in ATTENTION}
            # Same weights, same batch: the first losses must agree (f32
            # summation orders differ, so not bitwise).
            first = {attn: step(*torch_runs[attn], ids) for attn in ATTENTION}
            ours = run_ours(args.bench, model_dir, policy)  # its memory figures are printed below
            ours0 = ours["loss0"]
            for attn, l in first.items():
                if abs(l - ours0) > 1e-4 * abs(l):
                    raise SystemExit(f"{policy}/{attn}: first loss {l} vs ours {ours0}")
            wall = {k: [] for k in ("ours", *ATTENTION)}
            cpu = {k: [] for k in ("ours", *ATTENTION)}
            for _ in range(args.rounds):
                b = run_ours(args.bench, model_dir, policy)
                wall["ours"].append(b["real_time"] / 1e3)
                cpu["ours"].append(b["cpu_time"] / 1e3)
                for attn in ATTENTION:
                    w, c = time_torch(*torch_runs[attn], ids, args.reps)
                    wall[attn].append(w)
                    cpu[attn].append(c)
            print(f"checkpointing {policy}: first loss ours {ours0:.6f}, torch {first['sdpa']:.6f}")
            if args.rounds > 0:
                mw = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
                mc = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
                for label, m in (("wall", mw), ("cpu ", mc)):
                    print(f"  {label} ms: ours {m['ours']:.0f}, torch sdpa {m['sdpa']:.0f} "
                          f"(ratio {m['ours'] / m['sdpa']:.2f}), torch eager {m['eager']:.0f} "
                          f"(ratio {m['ours'] / m['eager']:.2f})")
            tensors = {a: in_fresh_process("peak_tensor_mib", model_dir, a, policy) for a in ATTENTION}
            rss = {a: in_fresh_process("peak_rss_mib", model_dir, a, policy) for a in ATTENTION}
            print(f"  peak tensor MiB: ours {ours['peak_MiB']:.1f} (saved {ours['saved_MiB']:.1f}), "
                  f"torch sdpa {tensors['sdpa']:.1f}, torch eager {tensors['eager']:.1f}")
            print(f"  peak rss rise MiB: ours {ours['rss_MiB']:.1f}, torch sdpa {rss['sdpa']:.1f}, "
                  f"torch eager {rss['eager']:.1f}", flush=True)


if __name__ == "__main__":
    main()
