"""Everyday research snippets written with torch's names run on reprise:
each is torch code with `torch` replaced by `reprise`, checked against the
same computation in NumPy (f64), and its gradient against a finite
difference where it has one."""

from __future__ import annotations

from math import erf, sqrt

import numpy as np
import pytest

import reprise
import reprise.nn.functional as F

RNG = np.random.default_rng(7)


def t(a, requires_grad=False):
    return reprise.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def close(x, expected, tol=1e-12):
    np.testing.assert_allclose(np.asarray(x.tolist(), dtype=np.float64), expected, rtol=tol,
                               atol=tol)


def test_ppo_clipped_loss():
    new, old, adv = RNG.normal(size=8) * 0.3, RNG.normal(size=8) * 0.3, RNG.normal(size=8)
    logp, old_logp, a = t(new, True), t(old), t(adv)
    ratio = (logp - old_logp).exp()
    loss = -reprise.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()
    r = np.exp(new - old)
    close(loss, -np.mean(np.minimum(r * adv, np.clip(r, 0.8, 1.2) * adv)))
    loss.backward()
    inside = (r >= 0.8) & (r <= 1.2)
    unclipped = r * adv < np.clip(r, 0.8, 1.2) * adv
    expected = -(r * adv) * np.where(unclipped | inside, 1.0, 0.0) / 8
    close(logp.grad, expected)


def test_dpo_loss():
    pc, pr, rc, rr = (RNG.normal(size=4) for _ in range(4))
    logits = 0.1 * ((t(pc) - t(pr)) - (t(rc) - t(rr)))
    loss = -F.logsigmoid(logits).mean()
    z = 0.1 * ((pc - pr) - (rc - rr))
    close(loss, np.mean(np.log1p(np.exp(-z))))


def test_masked_mean_and_argmax_accuracy():
    x = RNG.normal(size=(3, 5))
    mask = RNG.random((3, 5)) > 0.4
    xt, mt = t(x), reprise.tensor(mask).double()
    close((xt * mt).sum() / mt.sum(), x[mask].mean())
    labels = reprise.tensor(np.argmax(x, axis=-1), dtype="i64")
    accuracy = (xt.argmax(dim=-1) == labels).float().mean()
    assert accuracy.item() == 1.0
    close(xt.argmin(1).double(), np.argmin(x, axis=1))


def test_kl_through_logsumexp_and_log_softmax():
    p, q = RNG.normal(size=(2, 6)), RNG.normal(size=(2, 6))
    logp = t(p) - t(p).logsumexp(dim=-1, keepdim=True)
    logq = F.log_softmax(t(q), dim=-1)
    kl = (logp.exp() * (logp - logq)).sum(-1)
    lp = p - np.log(np.exp(p).sum(-1, keepdims=True))
    lq = q - np.log(np.exp(q).sum(-1, keepdims=True))
    close(kl, (np.exp(lp) * (lp - lq)).sum(-1))


def test_causal_mask_with_tril_and_masked_fill():
    scores = t(RNG.normal(size=(4, 4)))
    causal = reprise.ones(4, 4).tril().bool()
    masked = scores.masked_fill(~causal, float("-inf"))
    probs = F.softmax(masked, dim=-1)
    assert np.allclose(np.triu(np.asarray(probs.tolist()), 1), 0)
    assert probs[0, 0].item() == 1.0
    assert reprise.ones(3, 3).triu(1).tolist() == np.triu(np.ones((3, 3)), 1).tolist()


def test_huber_loss_with_abs_where_and_comparisons():
    pred, target = RNG.normal(size=10) * 2, RNG.normal(size=10)
    d = (t(pred, True) - t(target)).abs()
    loss = reprise.where(d < 1.0, 0.5 * d**2, d - 0.5).mean()
    e = np.abs(pred - target)
    close(loss, np.mean(np.where(e < 1, 0.5 * e**2, e - 0.5)))


def test_one_hot_cross_entropy_and_pad():
    logits = RNG.normal(size=(5, 4))
    labels = np.array([0, 3, 1, 1, 2])
    onehot = F.one_hot(reprise.tensor(labels, dtype="i64"), 4).double()
    ce = -(onehot * F.log_softmax(t(logits), dim=-1)).sum(-1).mean()
    close(ce, F.cross_entropy(t(logits), reprise.tensor(labels, dtype="i64")).item())
    padded = F.pad(t([[1, 2], [3, 4]]), (1, 2), value=9.0)
    close(padded, [[9, 1, 2, 9, 9], [9, 3, 4, 9, 9]])


def test_reductions_and_statistics():
    x = RNG.normal(size=(3, 4, 5))
    xt = t(x)
    close(xt.var(), x.var(ddof=1))
    close(xt.std(dim=(0, 2), keepdim=True), x.std(axis=(0, 2), ddof=1, keepdims=True))
    close(xt.var(1, correction=0), x.var(axis=1))
    close(xt.amax(dim=(1, 2)), x.max(axis=(1, 2)))
    close(xt.amin(), x.min())
    values, indices = xt.max(dim=2)
    close(values, x.max(axis=2))
    close(xt.min(dim=0)[1].double(), x.argmin(axis=0))
    close(xt.sum(dim=(0, 1)), x.sum(axis=(0, 1)))
    close(xt.max(), x.max())


def test_operators_both_ways_and_creation():
    x = t([1.0, 2.0, 4.0])
    close(2.0**x, [2.0, 4.0, 16.0])
    close(1.0 - x, [0.0, -1.0, -3.0])
    close(8.0 / x, [8.0, 4.0, 2.0])
    close(abs(-x), [1.0, 2.0, 4.0])
    assert ((x > 1.5) & (x < 3.0)).tolist() == [False, True, False]
    assert ((x <= 1.0) | (x >= 4.0)).tolist() == [True, False, True]
    assert (x != 2.0).tolist() == [True, False, True]
    assert x != None  # noqa: E711 (not a tensor: not equal)
    assert reprise.ones(2, 3).shape == (2, 3) and reprise.zeros((4,)).shape == (4,)
    assert reprise.zeros_like(x).dtype == x.dtype and reprise.full_like(x, 7.0).tolist() == [7.0] * 3
    assert reprise.arange(2, 8, 3).tolist() == [2, 5]
    assert reprise.arange(0.0, 1.0, 0.25).dtype == reprise.float32
    assert x.long().dtype == reprise.int64 and x.float().dtype == reprise.float32
    assert len({x, x.detach()}) == 2  # hashable by identity


def test_structure_ops():
    a = np.arange(12.0).reshape(3, 4)
    x = t(a)
    close(x.flip([0, 1]), a[::-1, ::-1])
    close(x.roll(1, 1), np.roll(a, 1, axis=1))
    close(x.roll(-2), np.roll(a, -2))
    close(x.repeat(2, 1), np.tile(a, (2, 1)))
    close(x.view(4, 3), a.reshape(4, 3))
    assert [c.shape for c in x.chunk(2, dim=1)] == [(3, 2), (3, 2)]
    close(x.T, a.T)
    close(x.clamp(min=2.0), np.clip(a, 2.0, None))
    close(x.clamp(max=t([1.0, 5.0, 9.0, 20.0])), np.minimum(a, [1.0, 5.0, 9.0, 20.0]))


def test_bad_input_names_the_op():
    x = t([1.0, 2.0])
    with pytest.raises(reprise.Error, match="one_hot"):
        F.one_hot(reprise.tensor([0, 5], dtype="i64"), 3)
    with pytest.raises(reprise.Error, match="pad"):
        F.pad(x, (-2, -1))
    with pytest.raises(reprise.Error, match="gelu"):
        F.gelu(x, approximate="erf")
    with pytest.raises(reprise.Error, match="lt"):
        reprise.tensor([1, 2], dtype="i64") < 0.5


def test_rope_from_sin_and_cos_and_exact_gelu():
    pos = reprise.arange(8).double().unsqueeze(1)
    inv = 1.0 / (10000.0 ** (reprise.arange(0, 4, 2).double() / 4))
    angles = pos * inv
    close(angles.sin(), np.sin(np.arange(8)[:, None] / 10000.0 ** (np.arange(0, 4, 2) / 4)))
    close(angles.cos(), np.cos(np.arange(8)[:, None] / 10000.0 ** (np.arange(0, 4, 2) / 4)))
    x = RNG.normal(size=6)
    close(F.gelu(t(x)), [v * 0.5 * (1 + erf(v / sqrt(2))) for v in x])
    close(t(x).erf(), [erf(v) for v in x])
    close(t(np.abs(x)).log1p().expm1(), np.abs(x))


def test_positions_by_cumsum():
    mask = reprise.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 1]], dtype="i64")
    position_ids = mask.cumsum(-1) - 1
    position_ids = position_ids.masked_fill(mask == 0, 1)
    assert position_ids.tolist() == [[1, 1, 0, 1, 2], [0, 1, 2, 1, 3]]
    x = RNG.normal(size=(3, 5))
    close(reprise.cumsum(t(x), dim=0), np.cumsum(x, axis=0))
    assert reprise.tensor([1, 2, 3], dtype="i32").cumsum(0).dtype == reprise.tensor([1]).long().dtype


def test_top_p_filtering_with_sort():
    logits = RNG.normal(size=(2, 10))
    x, top_p = t(logits), 0.8
    sorted_logits, sorted_indices = reprise.sort(x, descending=True)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    remove = cumulative > top_p
    remove = F.pad(remove.long(), (1, -1)).bool()  # keep the first token above the threshold
    kept = sorted_logits.masked_fill(remove, float("-inf"))
    # Back to vocabulary order: the inverse permutation is argsort of the order.
    filtered = kept.gather(1, sorted_indices.argsort(-1))
    # NumPy: the same filter.
    order = np.argsort(-logits, axis=-1, kind="stable")
    srt = np.take_along_axis(logits, order, -1)
    probs = np.exp(srt - srt.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    rm = np.concatenate([np.zeros((2, 1), bool), (np.cumsum(probs, -1) > top_p)[:, :-1]], -1)
    want = np.full_like(logits, -np.inf)
    for r in range(2):
        for j in range(10):
            if not rm[r, j]:
                want[r, order[r, j]] = srt[r, j]
    got = np.array(filtered.tolist())
    assert np.array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got[~np.isinf(got)], want[~np.isinf(want)], rtol=1e-12)
    assert x.argsort(descending=True).tolist() == order.tolist()
    ties = reprise.tensor([2.0, 1.0, 2.0, 1.0])
    assert ties.argsort().tolist() == [1, 3, 0, 2]  # stable


def test_einsum_attention_scores():
    q, k = RNG.normal(size=(2, 3, 4, 8)), RNG.normal(size=(2, 3, 5, 8))
    qt, kt = t(q, True), t(k, True)
    scores = reprise.einsum("bhqd,bhkd->bhqk", qt, kt) / 8 ** 0.5
    close(scores, np.einsum("bhqd,bhkd->bhqk", q, k) / 8 ** 0.5)
    close(reprise.einsum("...d,...d", [qt, qt]), np.einsum("...d,...d", q, q))
    scores.sum().backward()
    close(qt.grad, np.broadcast_to(k.sum(2, keepdims=True), q.shape) / 8 ** 0.5)


def test_assignment_and_tensor_indices():
    x = reprise.zeros(3, 4)
    x[:, 1:] = 1.0
    x[0] = reprise.tensor([5.0, 6.0, 7.0, 8.0])
    x[..., -1] = t([0.5, 0.25, 0.125]).float()
    assert x.tolist() == [[5, 6, 7, 0.5], [0, 1, 1, 0.25], [0, 1, 1, 0.125]]
    x[x > 4.0] = -1.0  # a bool mask, as logits[mask] = -inf
    assert x.tolist() == [[-1, -1, -1, 0.5], [0, 1, 1, 0.25], [0, 1, 1, 0.125]]
    # A tensor of indices selects along its dim, its shape in place of it.
    rows = x[reprise.tensor([[2, 0], [1, 1]], dtype="i64")]
    assert rows.shape == (2, 2, 4) and rows[0, 1].tolist() == [-1, -1, -1, 0.5]
    assert x[:, reprise.tensor([3, 0], dtype="i64")].tolist() == [[0.5, -1], [0.25, 0], [0.125, 0]]
    w = t(RNG.normal(size=(5, 3)), requires_grad=True)
    w[reprise.tensor([4, 4, 0], dtype="i64")].sum().backward()
    close(w.grad, [[1] * 3, [0] * 3, [0] * 3, [0] * 3, [2] * 3])
    with pytest.raises(reprise.Error, match="requires grad"):
        w[0] = 1.0
    with reprise.no_grad():
        w[0] = 1.0
    assert w.tolist()[0] == [1.0, 1.0, 1.0]
    with pytest.raises(reprise.Error, match="tensor index"):
        x[reprise.tensor([0], dtype="i64")] = 2.0
    with pytest.raises(reprise.Error, match="bool mask"):
        x[x > 0]
