"""Side-by-side: rollouts and the training forward that scores them, reprise
against PyTorch + transformers on the same model folder.

Each side samples --group completions of --prompts sums ("57 + 82 = ", byte
ids: the folder should hold a byte-level model, such as grpo.py
--save-start writes) at temperature 1, exactly --new tokens each, then runs
a training forward (with grad) over prompt + completion and takes each
completion token's log-prob. Reported per side:

- rollout tokens/s (the median of --rounds alternating rounds);
- logprob_mismatch: the largest |sampler log-prob - trainer log-prob| over
  every completion token;
- router flips (MoE folders): the (layer, position) pairs of the sampled
  sequences whose expert sets differ between the sampler's forwards and
  the training forward, of all such pairs.

transformers samples with generate() (its KV cache, prompts left-padded to
one length with an attention mask, output_logits for the sampler's
log-probs) and trains with the model's forward on the same padded rows
(attention mask and position ids from it); its routing comes from forward
hooks on the routers. reprise runs reprise.nn.generate (its own
per-length batches, no padding) and next_token_logprobs over the
right-padded rows, its routing from RoutingCapture.

Run from the repository root with the Python package built
(-DREPRISE_PYTHON=ON):
    PYTHONPATH=build/release/python .venv/bin/python bench/nn/rollout_torch.py --model DIR [--rounds 3]
"""

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import side_by_side  # noqa: E402,F401  (PyTorch's OpenMP threads wait passively)
import reprise  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def sums(n, seed):
    rng = random.Random(seed)
    return [list(f"{rng.randint(0, 99)} + {rng.randint(0, 99)} = ".encode()) for _ in range(n)]


# ---- reprise ------------------------------------------------------------------


def ours_rollout(model, prompts, new, seed, moe):
    start = time.perf_counter()
    rollouts = reprise.nn.generate(model, prompts, max_new_tokens=new, temperature=1.0,
                                   seed=seed, record_routing=moe)
    return time.perf_counter() - start, rollouts


def ours_scores(model, prompts, rollouts, moe):
    rows = [p + r.tokens for p, r in zip(prompts, rollouts)]
    longest = max(len(r) for r in rows)
    ids = reprise.tensor([r + [0] * (longest - len(r)) for r in rows], dtype="i64")
    with reprise.nn.RoutingCapture() as capture:
        logprobs = reprise.nn.next_token_logprobs(model(ids).logits, ids).tolist()
    mismatch = 0.0
    for b, (p, r) in enumerate(zip(prompts, rollouts)):
        trained = logprobs[b][len(p) - 1:len(p) - 1 + len(r.tokens)]
        mismatch = max([mismatch] + [abs(x - y) for x, y in zip(trained, r.logprobs)])
    flips = pairs = 0
    if moe:
        for r, t in zip(rollouts, capture.records(len(rows), longest)):
            # The sampler's forwards fed every position but the last token's.
            fed = r.routing.positions - 1
            flips += reprise.nn.routing_flips(r.routing.first_positions(fed),
                                              t.first_positions(fed))
            pairs += fed * len(r.routing.layers)
    return mismatch, flips, pairs


# ---- transformers ---------------------------------------------------------------


class RouterHooks:
    """The experts each router chose, per call: (module, indices (N, k))."""

    def __init__(self, model):
        self.calls = []
        self.handles = [m.register_forward_hook(self.hook) for m in model.modules()
                        if type(m).__name__.endswith("TopKRouter")]

    def hook(self, module, inputs, output):
        self.calls.append((module, output[2].detach().reshape(-1, output[2].shape[-1])))

    def choices(self):
        """Per router (in first-call order), its calls' indices."""
        by_router = {}
        for module, idx in self.calls:
            by_router.setdefault(module, []).append(idx)
        self.calls = []
        return list(by_router.values())


def left_padded(prompts):
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def torch_rollout(model, prompts, new, seed):
    ids, mask = left_padded(prompts)
    torch.manual_seed(seed)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=new, min_new_tokens=new, pad_token_id=0,
                             eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    return time.perf_counter() - start, out, mask


def torch_scores(model, prompts, new, out, mask, hooks):
    """The mismatch and router flips of one rollout (hooks saw its generate)."""
    sampled = hooks.choices() if hooks else []
    seqs = out.sequences  # (B, width + new)
    B, width = seqs.shape[0], seqs.shape[1] - new
    sampler = torch.stack([torch.log_softmax(l.float(), -1) for l in out.logits], 1)  # (B, new, V)
    chosen = seqs[:, width:]
    sampler_lp = sampler.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    full_mask = torch.cat([mask, torch.ones(B, new, dtype=mask.dtype)], 1)
    positions = (full_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(seqs, attention_mask=full_mask, position_ids=positions).logits
    trainer = torch.log_softmax(logits[:, width - 1:-1].float(), -1)
    trainer_lp = trainer.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    mismatch = (trainer_lp.detach() - sampler_lp).abs().max().item()
    flips = pairs = 0
    if hooks:
        trained = hooks.choices()
        for calls, train in zip(sampled, trained):
            # generate's calls: the prefill (B width rows), then one row per
            # sequence per decode step; the training forward: B (width + new).
            train = train[0].reshape(B, width + new, -1)  # one call: the whole batch
            steps = [calls[0].reshape(B, width, -1)] + [c.reshape(B, 1, -1) for c in calls[1:]]
            fed = torch.cat(steps, 1)  # (B, width + new - 1, k)
            real = full_mask[:, :fed.shape[1]].bool()
            differ = (fed.sort(-1).values != train[:, :fed.shape[1]].sort(-1).values).any(-1)
            flips += int((differ & real).sum())
            pairs += int(real.sum())
    return mismatch, flips, pairs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, help="an HF folder of a byte-level model")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--new", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    reprise.set_num_threads(a.threads)

    ours = reprise.nn.load_model(a.model)
    theirs = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if hasattr(theirs.config, "output_router_logits"):
        theirs.config.output_router_logits = False  # no aux loss: the batch is padded
    moe = ours.config.moe is not None
    hooks = RouterHooks(theirs) if moe else None
    prompts = [q for q in sums(a.prompts, 7) for _ in range(a.group)]
    times = {"reprise": [], "transformers": []}
    results = {}
    for r in range(a.rounds):
        for side in (["reprise", "transformers"] if r % 2 == 0 else ["transformers", "reprise"]):
            if side == "reprise":
                seconds, rollouts = ours_rollout(ours, prompts, a.new, 100 + r, moe)
                results[side] = ours_scores(ours, prompts, rollouts, moe)
            else:
                seconds, out, mask = torch_rollout(theirs, prompts, a.new, 100 + r)
                results[side] = torch_scores(theirs, prompts, a.new, out, mask, hooks)
            times[side].append(seconds)
    tokens = len(prompts) * a.new
    print(f"{len(prompts)} sequences ({a.prompts} sums x {a.group}) of {a.new} new tokens, "
          f"{a.threads} threads, f32, {a.rounds} alternating rounds (medians)")
    print(f"{'side':14s} {'rollout tok/s':>14s} {'logprob_mismatch':>17s} {'router flips':>16s}")
    for side in ("reprise", "transformers"):
        mismatch, flips, pairs = results[side]
        rate = tokens / statistics.median(times[side])
        flip_text = f"{flips} of {pairs}" if moe else "-"
        print(f"{side:14s} {rate:14.0f} {mismatch:17.3g} {flip_text:>16s}")
    print(f"throughput ratio (reprise / transformers): "
          f"{statistics.median(times['transformers']) / statistics.median(times['reprise']):.2f}")


if __name__ == "__main__":
    main()
