"""Checkpoint regions from Python: policies as Python callables, exact
replay with dropout, the verifier, noise injection, counters, the budget
planner, and errors inside regions."""

from __future__ import annotations

import numpy as np
import pytest

import reprise
from reprise import Decision, policies


def make_inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = reprise.tensor(rng.standard_normal((8, 16)).astype(np.float32), requires_grad=True)
    w1 = reprise.tensor(rng.standard_normal((16, 32)).astype(np.float32), requires_grad=True)
    w2 = reprise.tensor(rng.standard_normal((32, 16)).astype(np.float32), requires_grad=True)
    return x, w1, w2


def block(x, w1, w2, gen):
    with reprise.scope("mlp"):
        h = reprise.matmul(x, w1).silu()
        h = reprise.dropout(h, 0.3, generator=gen)
        return reprise.matmul(h, w2).tanh()


def run(policy=None, seed: int = 11, **options):
    """Loss and gradients of the block, as a region under `policy` or plainly."""
    x, w1, w2 = make_inputs()
    gen = reprise.Generator(seed)
    if policy is None:
        y = block(x, w1, w2, gen)
    else:
        y = reprise.checkpoint("block", policy, lambda: block(x, w1, w2, gen), generator=gen,
                               **options)
    loss = (y * y).mean()
    loss.backward()
    return [reprise.hash_values(t) for t in (loss, x.grad, w1.grad, w2.grad)]


def save_first_matmul(v: reprise.ValueInfo):
    """Keep the first matmul's output, recompute everything else."""
    if v.op == "matmul" and v.op_ordinal == 0:
        return Decision.must_save
    return Decision.prefer_recompute


def test_python_policy_is_bitwise_equal_to_no_checkpointing_with_dropout():
    before = reprise.recompute_stats()
    assert run(save_first_matmul) == run(None)
    counts = reprise.recompute_stats() - before
    assert counts.regions == 1 and counts.replays == 1
    assert counts.values_dropped >= 2 and counts.nodes_replayed >= 2


def test_fresh_random_numbers_on_replay_change_the_gradients():
    # PyTorch's preserve_rng_state=False, on purpose: shows the test above can fail.
    plain = run(None)
    fresh = run(policies.full(), rng=reprise.RngReplay.fresh)
    assert fresh[0] == plain[0] and fresh[1:] != plain[1:]
    assert run(policies.full(), rng=reprise.RngReplay.stash) == plain


def test_policy_sees_each_value():
    seen = []

    def record(v):
        seen.append((v.op, v.scope, v.region, v.output, v.shape, v.dtype, v.bytes, v.is_random))
        return None  # abstain: recompute

    run(record)
    ops = [s[0] for s in seen]
    assert ops == ["matmul", "silu", "dropout", "matmul", "tanh"]
    assert seen[0] == ("matmul", "block.mlp", "block", 0, (8, 32), reprise.float32, 8 * 32 * 4,
                       False)
    assert seen[2][7]  # dropout draws random numbers


def test_value_info_expires_after_the_call():
    kept = []
    run(lambda v: kept.append(v))
    with pytest.raises(reprise.Error, match="after the policy call"):
        kept[0].op


def test_python_policy_that_raises_propagates_and_leaves_the_tape_consistent():
    x, w1, w2 = make_inputs()
    gen = reprise.Generator(11)
    intermediates = []

    def failing(v):
        if v.op == "dropout":
            raise ValueError("policy failed on " + v.scope)
        return Decision.prefer_recompute

    def fn():
        y = block(x, w1, w2, gen)
        intermediates.append(y)
        return y

    with pytest.raises(ValueError, match="policy failed on block.mlp"):
        reprise.checkpoint("block", failing, fn, generator=gen)
    # The region was finished: what it recorded backpropagates, replaying the
    # values the policy dropped before it failed, with the same gradients as
    # a plain run.
    (intermediates[0] * intermediates[0]).mean().backward()
    hashes = [reprise.hash_values(t) for t in (x.grad, w1.grad, w2.grad)]
    assert hashes == run(None)[1:]
    # And the next region on this thread runs normally.
    assert run(save_first_matmul) == run(None)


def test_policy_returning_nonsense_is_a_type_error():
    with pytest.raises(TypeError, match="expected a reprise.Decision or None"):
        run(lambda v: "save")


def test_error_inside_the_region_keeps_recorded_values_replayable():
    x, w1, w2 = make_inputs()
    gen = reprise.Generator(11)
    kept = []

    def fn():
        y = block(x, w1, w2, gen)
        kept.append(y)
        return y @ reprise.ones((3, 3))  # shapes do not match

    with pytest.raises(reprise.Error, match="inner dims") as raised:
        reprise.checkpoint("block", policies.full(), fn, generator=gen)
    if hasattr(raised.value, "__notes__"):  # Python 3.11 and later
        assert raised.value.__notes__ == ["in checkpoint region 'block'"]
    (kept[0] * kept[0]).mean().backward()
    assert [reprise.hash_values(t) for t in (x.grad, w1.grad, w2.grad)] == run(None)[1:]


def test_builtin_policies_combine_with_python_ones():
    combined = policies.combine([policies.save_scopes("*.mlp"), lambda v: Decision.must_recompute])
    before = reprise.recompute_stats()
    assert run(combined) == run(None)
    # The glob's must_save came first: nothing was dropped, nothing replayed.
    assert (reprise.recompute_stats() - before).replays == 0
    assert policies.save_ops(["matmul"]).name
    with pytest.raises(reprise.Error, match="matmull"):
        policies.save_ops(["matmull"])


def test_bitwise_verifier_reports_noise():
    reprise.take_mismatches()
    assert run(policies.full(), verify=reprise.Verify.bitwise) == run(None)
    assert reprise.take_mismatches() == []
    noisy = run(policies.full(), verify=reprise.Verify.bitwise, recompute_noise_ulps=4,
                on_mismatch=reprise.OnMismatch.report)
    mismatches = reprise.take_mismatches()
    assert noisy[1:] != run(None)[1:] and mismatches
    first = mismatches[0]
    assert first.region == "block" and first.scope == "block.mlp"
    assert first.differing > 0 and 0 < first.max_ulp <= 4
    with pytest.raises(reprise.Error, match="block"):
        run(policies.full(), verify=reprise.Verify.bitwise, recompute_noise_ulps=4)


def test_checkpoint_saves_activation_memory():
    def peak_saved(policy):
        x, w1, w2 = make_inputs()
        x = x @ reprise.ones((16, 16))  # a non-leaf input, so nothing is a parameter
        reprise.reset_peak_memory()
        gen = reprise.Generator(1)
        f = lambda: block(x, w1, w2, gen)  # noqa: E731
        y = f() if policy is None else reprise.checkpoint("block", policy, f, generator=gen)
        saved = reprise.memory_stats()[reprise.MemoryKind.saved_activation].peak
        y.sum().backward()
        return saved

    assert peak_saved(policies.full()) < peak_saved(None)


def test_budget_planner_plans_from_a_recorded_step():
    # The region's inputs are leaves that require grad, the user's
    # parameters, which the planner does not count; it holds 2560 bytes when
    # it keeps everything backward reads: 1392 leaves room for one value.
    planner = reprise.BudgetPlanner(1392)
    policy = planner.policy()
    assert not planner.planned()
    reference = run(None)
    assert run(policy) == reference  # records
    planner.plan()
    assert planner.planned()
    assert run(policy) == reference  # applies the plan
    s = planner.summary()
    assert s.budget == 1392 and s.planned_bytes <= 1392 and s.values_kept == 1
    assert 0 < s.replay_cost < s.full_replay_cost


def test_multiple_outputs_and_nested_regions():
    x, w1, w2 = make_inputs()
    gen = reprise.Generator(3)

    def outer():
        a = reprise.checkpoint("inner", lambda v: Decision.must_recompute,
                               lambda: reprise.matmul(x, w1).silu())
        return a, (a @ w2).tanh()

    a, b = reprise.checkpoint("outer", policies.save_all(), outer, generator=gen)
    assert a.shape == (8, 32) and b.shape == (8, 16)
    (b.sum() + a.sum()).backward()
    assert x.grad is not None


def test_checkpoint_sequential():
    x, w1, w2 = make_inputs()
    stages = [lambda h: (h @ w1).silu(), lambda h: h @ w2, lambda h: h.tanh()]
    y = reprise.checkpoint_sequential("seq", stages, 2, x, policies.full())
    y.sum().backward()
    expected = x.grad.tolist()
    x.grad = None
    stages[2](stages[1](stages[0](x))).sum().backward()
    assert x.grad.tolist() == expected
