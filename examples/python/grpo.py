#!/usr/bin/env python3
"""GRPO on the built-in corpus's sums: the sampler and the trainer are one
engine, so the trainer's log-probs are the sampler's bit for bit and an MoE
model's training forward routes every token as its rollout did.

A model first learns the corpus for --pretrain-steps with the trainer
llama_train and moe_train run (nn.Trainer), or comes from --init (an HF
folder, such as llama_train --export writes). Then each step:

  1. draws --prompts sums "a + b = " and samples --group completions of
     each (reprise.nn.generate, temperature 1, stop at a newline);
  2. rewards a completion 1 when it is the exact sum and a newline, else 0;
  3. normalises the rewards within each group (advantage (r - mean) / (std
     + 1e-4));
  4. takes --updates AdamW steps on the clipped policy-gradient loss
     -min(ratio A, clip(ratio, 1 - eps, 1 + eps) A) per completion token,
     ratio = exp(trainer log-prob - sampler log-prob), with an optional KL
     to the frozen starting model (--kl, the k3 estimator).

Each step prints the mean reward, logprob_mismatch (the largest |sampler
log-prob - trainer log-prob| over every completion token, measured on the
first update, before any change: 0 exactly), router_flips (tokens of the
training forward whose experts differ from the rollout's; 0, and with
--replay the flips that routing replay overrode) and the rollout and
training tokens/s.

    python examples/python/grpo.py                      # dense, 60 steps
    python examples/python/grpo.py --moe --replay       # MoE, routing replay
    python examples/python/grpo.py --steps 3 --pretrain-steps 20   # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time

import reprise
from reprise import nn

NEWLINE = ord("\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60, help="GRPO steps")
    p.add_argument("--moe", action="store_true", help="moe_train's model instead of llama_train's")
    p.add_argument("--init", help="start from this HF folder instead of pretraining")
    p.add_argument("--pretrain-steps", type=int, default=4000)
    p.add_argument("--save-start", metavar="DIR",
                   help="write the starting model as an HF folder (for --init, or a side-by-side)")
    p.add_argument("--prompts", type=int, default=16, help="sums per step")
    p.add_argument("--group", type=int, default=8, help="completions per sum (G)")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--updates", type=int, default=1, help="AdamW steps per batch of rollouts")
    p.add_argument("--clip", type=float, default=0.2, help="the ratio's clip eps")
    p.add_argument("--kl", type=float, default=0.0, help="KL coefficient to the starting model")
    p.add_argument("--replay", action="store_true", help="route training by the rollouts' records")
    p.add_argument("--checkpoint-policy", default="none",
                   help="none | full | every-n-layers:N | op-sac | budget:BYTES")
    p.add_argument("--metrics", metavar="FILE",
                   help="also write each step as a JSON line (scripts/plot.py grpo draws them)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=0)
    return p.parse_args(argv)


def starting_model(a: argparse.Namespace) -> nn.LlamaForCausalLM:
    """The --init folder, or a model pretrained on the built-in corpus by the
    trainers' own loop."""
    if a.init:
        return nn.load_model(a.init)
    c = nn.TrainConfig(steps=a.pretrain_steps, seed=a.seed)
    if a.moe:  # moe_train's default model
        m = c.model
        m.intermediate_size = 176
        m.family = nn.Family.mixtral
        m.moe = nn.MoeConfig(num_local_experts=8, num_experts_per_tok=2)
        c.model = m
    trainer = nn.Trainer(c, nn.TextDataset.builtin())
    start = time.perf_counter()
    while not trainer.finished:
        stats = trainer.step()
    print(f"pretrain {a.pretrain_steps} steps of {c.batch} x {c.seq} bytes in "
          f"{time.perf_counter() - start:.0f} s, loss {stats.loss:.3f}", flush=True)
    return trainer.model


def frozen_copy(model: nn.LlamaForCausalLM) -> nn.LlamaForCausalLM:
    copy = nn.LlamaForCausalLM(model.config, reprise.Generator(0))
    copy.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()})
    return copy


def draw_sums(rng: random.Random, n: int) -> list[tuple[list[int], str]]:
    """n prompts "a + b = " as byte ids, each with its answer."""
    sums = []
    for _ in range(n):
        x, y = rng.randint(0, 99), rng.randint(0, 99)
        sums.append((list(f"{x} + {y} = ".encode()), str(x + y)))
    return sums


def reward(tokens: list[int], answer: str) -> float:
    return 1.0 if bytes(tokens) == (answer + "\n").encode() else 0.0


def advantages(rewards: list[float], group: int) -> list[float]:
    out = []
    for g in range(0, len(rewards), group):
        r = rewards[g:g + group]
        mean = sum(r) / len(r)
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / len(r))
        out += [(x - mean) / (std + 1e-4) for x in r]
    return out


class Batch:
    """prompt + completion rows, right-padded, and what the loss needs per
    completion token: its (row, position) among next_token_logprobs' (B,
    T - 1), the sampler's log-prob and the advantage."""

    def __init__(self, prompts: list[list[int]], rollouts: list, adv: list[float]):
        rows = [p + r.tokens for p, r in zip(prompts, rollouts)]
        self.length = max(len(r) for r in rows)
        self.ids = reprise.tensor([r + [0] * (self.length - len(r)) for r in rows], dtype="i64")
        self.records = [r.routing for r in rollouts]
        self.where, self.old, self.adv = [], [], []
        for b, (p, r) in enumerate(zip(prompts, rollouts)):
            for t, lp in enumerate(r.logprobs):
                self.where.append(b * (self.length - 1) + len(p) - 1 + t)
                self.old.append(lp)
                self.adv.append(adv[b])
        self.tokens = len(self.where)


def completion_logprobs(model, batch: Batch, layers, replay=False, count_flips=False):
    """The trainer's log-prob of every completion token (recorded); with
    count_flips, also the routing flips against the rollouts' records (with
    replay, those it overrode), else None."""
    replayer = nn.RoutingReplay(batch.records, batch.length) if replay else None
    moe = model.config.moe is not None
    capture = nn.RoutingCapture() if count_flips and moe and not replay else None
    with contextlib.ExitStack() as scopes:
        for scope in (replayer, capture):
            if scope is not None:
                scopes.enter_context(scope)
        logits = model(batch.ids, layers).logits
    flat = reprise.reshape(nn.next_token_logprobs(logits, batch.ids), [-1])
    picked = reprise.index_select(flat, 0, reprise.tensor(batch.where, dtype="i64"))
    if not count_flips:
        return picked, None
    if replayer is not None:
        return picked, replayer.overridden
    if capture is None:  # a dense model
        return picked, 0
    trained = capture.records(len(batch.records), batch.length)
    return picked, sum(nn.routing_flips(r, t.first_positions(r.positions))
                       for r, t in zip(batch.records, trained))


def clipped_objective(new, batch: Batch, eps: float):
    """-mean over tokens of min(ratio A, clip(ratio, 1 - eps, 1 + eps) A), as
    PPO and GRPO write it; no gradient flows through a clipped ratio."""
    old = reprise.tensor(batch.old, dtype="f32")
    adv = reprise.tensor(batch.adv, dtype="f32")
    ratio = (new - old).exp()
    objective = reprise.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    return -objective.mean()


def kl_to(reference, batch: Batch, new):
    """The k3 estimate of KL(new || reference) per token, mean over tokens."""
    with reprise.no_grad():
        ref, _ = completion_logprobs(reference, batch, None)
    d = reprise.sub(ref.detach(), new)
    k3 = reprise.add(reprise.sub(reprise.exp(d), d), -1.0)
    return reprise.mul(reprise.sum(k3), 1.0 / batch.tokens)


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    if a.threads > 0:
        reprise.set_num_threads(a.threads)
    model = starting_model(a)
    if a.save_start:
        nn.save_model(model, a.save_start)
    reference = frozen_copy(model) if a.kl > 0 else None
    layers = nn.LayerCheckpointing(nn.CheckpointConfig.parse(a.checkpoint_policy),
                                   model.dropout_generator, nn.moe_scopes_of(model.config))
    opt = nn.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    rng = random.Random(a.seed)
    metrics = open(a.metrics, "w") if a.metrics else None
    print(f"grpo     {a.steps} steps of {a.prompts} sums x {a.group} completions, lr {a.lr:g}, "
          f"clip {a.clip:g}, kl {a.kl:g}, {a.updates} update(s) per batch, checkpoint "
          f"{a.checkpoint_policy}, {'MoE' if a.moe else 'dense'}"
          f"{', routing replay' if a.replay else ''}", flush=True)
    for step in range(1, a.steps + 1):
        sums = draw_sums(rng, a.prompts)
        prompts = [p for p, _ in sums for _ in range(a.group)]
        answers = [s for _, s in sums for _ in range(a.group)]
        start = time.perf_counter()
        rollouts = nn.generate(model, prompts, max_new_tokens=5, temperature=1.0,
                               seed=a.seed * 100003 + step, stop_tokens=[NEWLINE],
                               record_routing=model.config.moe is not None)
        rollout_seconds = time.perf_counter() - start
        rewards = [reward(r.tokens, ans) for r, ans in zip(rollouts, answers)]
        batch = Batch(prompts, rollouts, advantages(rewards, a.group))

        start = time.perf_counter()
        mismatch, flips = 0.0, 0
        for update in range(a.updates):
            first = update == 0
            new, f = completion_logprobs(model, batch, layers, a.replay, count_flips=first)
            if first:
                mismatch = max(abs(x - y) for x, y in zip(new.tolist(), batch.old))
                flips = f
            loss = clipped_objective(new, batch, a.clip)
            if reference is not None:
                loss = reprise.add(loss, reprise.mul(kl_to(reference, batch, new), a.kl))
            reprise.backward(loss)
            opt.step()
            opt.zero_grad()
        train_seconds = time.perf_counter() - start
        record = {"step": step, "reward": sum(rewards) / len(rewards),
                  "logprob_mismatch": mismatch, "router_flips": flips,
                  "rollout_tok_s": sum(len(r.tokens) for r in rollouts) / rollout_seconds,
                  "train_tok_s": a.updates * batch.ids.numel() / train_seconds}
        print(f"step {step:4d} | reward {record['reward']:.3f} | "
              f"logprob_mismatch {mismatch:.3g} | router_flips {flips} | rollout "
              f"{record['rollout_tok_s']:.0f} tok/s | train {record['train_tok_s']:.0f} tok/s",
              flush=True)
        if metrics:
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
