"""What the tape keeps past a call, it owns: every Python object handed to a
checkpoint region, a model or a guard may be dropped before backward runs.
Each test drops its objects, collects, allocates to reuse their memory, and
then runs backward. The suite also runs under ASan+UBSan (scripts/test.sh),
where a dangling pointer is a report rather than a chance."""

from __future__ import annotations

import gc
import random
import time

import numpy as np
import pytest

import reprise
from conftest import FIXTURES
from reprise import RngReplay, policies


def churn():
    """Collects, then allocates and frees objects of the sizes a freed
    Generator, policy or guard had, so that freed memory is reused."""
    gc.collect()
    junk = [reprise.Generator(i) for i in range(64)]
    junk += [bytearray(n) for n in (32, 64, 128, 256, 512, 4096) for _ in range(16)]
    junk += [reprise.tensor(np.zeros(16, np.float32)) for _ in range(16)]
    del junk
    gc.collect()


def leaves(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = reprise.tensor(rng.standard_normal((6, 12)).astype(np.float32), requires_grad=True)
    w = reprise.tensor(rng.standard_normal((12, 12)).astype(np.float32), requires_grad=True)
    return x, w


def f(x, w):
    return reprise.matmul(x, w).tanh()


def grads(loss, *xs):
    loss.backward()
    return [reprise.hash_values(t) for t in (loss, *(x.grad for x in xs))]


def loss_of(xs, w, mode, keep: list | None = None):
    """A generator made here and, unless `keep` holds it, gone once this
    returns; silu reads the dropout's output, which the region replays."""
    g = reprise.Generator(5)
    if keep is not None:
        keep.append(g)
    y = reprise.checkpoint(
        "r",
        policies.full(),
        lambda: reprise.dropout(f(xs, w), 0.3, generator=g).silu(),
        rng=mode,
        generator=g,
    )
    return (y * y).mean()


def plain_grads():
    x, w = leaves()
    g = reprise.Generator(5)
    y = reprise.dropout(f(x, w), 0.3, generator=g).silu()
    return grads((y * y).mean(), x, w)


@pytest.mark.parametrize("mode", [RngReplay.stash, RngReplay.fresh, RngReplay.recorded])
def test_a_generator_dropped_before_backward_lives_as_long_as_its_region(mode):
    x, w = leaves()
    dropped = loss_of(x, w, mode)
    churn()
    got = grads(dropped, x, w)

    x, w = leaves()
    kept = []
    expected = grads(loss_of(x, w, mode, kept), x, w)
    assert got == expected
    # The documented gradients: stash and recorded replay the forward's mask,
    # fresh draws a new one (PyTorch's preserve_rng_state=False).
    if mode == RngReplay.fresh:
        assert got[0] == plain_grads()[0] and got[1:] != plain_grads()[1:]
    else:
        assert got == plain_grads()


def test_a_layer_checkpointing_and_its_generator_dropped_before_backward():
    model = reprise.nn.load_model(str(FIXTURES / "mixtral_tiny"))
    ids = reprise.tensor([[3, 14, 15, 9, 2, 6, 5, 3]], dtype="i64")

    def loss(keep: list | None):
        g = reprise.Generator(9)
        model.set_dropout_generator(g)
        config = reprise.nn.CheckpointConfig.parse("full")
        config.rng_replay = RngReplay.stash
        layers = reprise.nn.LayerCheckpointing(config, g, reprise.nn.moe_scopes_of(model.config))
        if keep is not None:
            keep += [g, layers]
        out = model(ids, layers)
        return reprise.nn.LlamaForCausalLM.loss(out.logits, ids)

    model.zero_grad()
    dropped = loss(None)
    # The model still shares the generator: replacing it drops the last
    # Python reference the test had.
    model.set_dropout_generator(reprise.Generator(1))
    churn()
    dropped.backward()
    got = [reprise.hash_values(p.value.grad) for p in model.parameters()]

    model.zero_grad()
    kept = []
    loss(kept).backward()
    assert got == [reprise.hash_values(p.value.grad) for p in model.parameters()]


def test_a_models_dropout_generator_is_shared():
    model = reprise.nn.load_model(str(FIXTURES / "llama_tiny"))
    model.set_dropout_generator(reprise.Generator(123))
    churn()
    assert model.dropout_generator.seed == 123


def test_python_policies_and_planners_dropped_before_backward():
    def region(x, w):
        def policy(v):
            return reprise.Decision.must_save if v.op == "matmul" else None

        return reprise.checkpoint("p", policy, lambda: f(x, w))

    x, w = leaves()
    loss = (region(x, w) ** 2).mean()
    churn()
    got = grads(loss, x, w)
    x, w = leaves()
    assert got == grads((f(x, w) ** 2).mean(), x, w)

    def planned(x, w):
        planner = reprise.BudgetPlanner(0)
        return reprise.checkpoint("b", planner.policy(), lambda: f(x, w))

    x, w = leaves()
    loss = (planned(x, w) ** 2).mean()
    churn()
    assert grads(loss, x, w) == got


def test_routing_guards_closed_out_of_order_leave_nothing_dangling():
    model = reprise.nn.load_model(str(FIXTURES / "mixtral_tiny"))
    ids = reprise.tensor([[3, 14, 15, 9]], dtype="i64")
    outer = reprise.nn.RoutingCapture()
    outer.__enter__()
    inner = reprise.nn.RoutingCapture()
    inner.__enter__()
    del outer  # closed first, though opened first
    churn()
    with reprise.no_grad():
        model(ids)
    assert inner.records(1, 4)[0].positions == 4
    inner.__exit__(None, None, None)
    del inner
    churn()
    with reprise.no_grad():
        model(ids)  # no capture is open: nothing to report to

    record = reprise.nn.generate(model, [[3, 14, 15]], max_new_tokens=1, record_routing=True)[0]
    replay = reprise.nn.RoutingReplay([record.routing], 4)
    replay.__enter__()
    del replay
    churn()
    with reprise.no_grad():
        model(ids)


def test_random_drops_before_backward_under_every_mode():
    """A bounded stress of the binding surface: regions in random modes,
    nested at random, with generators, policies and planners whose Python
    references are dropped at random points before backward. Recorded and
    stash replay must give the plain run's gradients bit for bit."""
    rnd = random.Random(20261206)
    deadline = time.monotonic() + 20
    for trial in range(40):
        if time.monotonic() > deadline:
            break
        depth = rnd.randint(1, 3)
        modes = [rnd.choice([RngReplay.recorded, RngReplay.stash, RngReplay.fresh])
                 for _ in range(depth)]
        kinds = [rnd.choice(["full", "python", "planner", "save_ops"]) for _ in range(depth)]
        seed = rnd.randint(0, 1 << 30)

        def build(checkpointed: bool):
            x, w = leaves(trial)
            objects = []  # what Python holds; dropped at random below
            g = reprise.Generator(seed)
            objects.append(g)

            def body(level, h):
                h = reprise.dropout(f(h, w), 0.25, generator=g)
                if level + 1 < depth:
                    h = wrap(level + 1, h)
                return h.sigmoid()

            def wrap(level, h):
                if not checkpointed:
                    return body(level, h)
                kind = kinds[level]
                if kind == "full":
                    policy = policies.full()
                elif kind == "save_ops":
                    policy = policies.save_ops(["tanh"])
                elif kind == "planner":
                    planner = reprise.BudgetPlanner(rnd.randint(0, 4096))
                    objects.append(planner)
                    policy = planner.policy()
                else:
                    def policy(v, cut=rnd.randint(0, 4)):
                        return reprise.Decision.must_save if v.node_index < cut else None
                objects.append(policy)
                return reprise.checkpoint(f"r{level}", policy, lambda: body(level, h),
                                          rng=modes[level], generator=g)

            y = wrap(0, x)
            loss = (y * y).sum()
            rnd.shuffle(objects)
            del objects[: rnd.randint(0, len(objects))]
            return loss, x, w, objects

        loss, x, w, held = build(True)
        del held
        churn()
        got = grads(loss, x, w)
        loss, x, w, _ = build(False)
        plain = grads(loss, x, w)
        if RngReplay.fresh not in modes:
            assert got == plain, (trial, modes, kinds)
        else:
            assert got[0] == plain[0]
