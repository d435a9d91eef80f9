"""The tape from Python: backward, grad, grad mode, scopes, graph nodes."""

from __future__ import annotations

import numpy as np
import pytest

import reprise


def test_backward_matches_the_analytic_gradient():
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    x = reprise.tensor(x_np, requires_grad=True)
    w = reprise.tensor(w_np, requires_grad=True)
    loss = (x @ w).tanh().sum()
    loss.backward()
    # d/dx sum(tanh(x w)) = (1 - tanh^2) w^T
    d = 1 - np.tanh(x_np @ w_np) ** 2
    np.testing.assert_allclose(x.grad.numpy(), d @ w_np.T, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), x_np.T @ d, rtol=1e-12)
    assert x.is_leaf and not loss.is_leaf and loss.grad_fn.name == "sum"


def test_gradients_accumulate_and_can_be_reset():
    x = reprise.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0] * 3
    x.grad = None
    assert x.grad is None


def test_grad_leaves_dot_grad_alone():
    x = reprise.tensor([1.0, 2.0], requires_grad=True)
    y = reprise.tensor([3.0, 4.0], requires_grad=True)
    (gx, gy) = reprise.grad([(x * y).sum()], [x, y])
    assert gx.tolist() == [3.0, 4.0] and gy.tolist() == [1.0, 2.0]
    assert x.grad is None
    z = reprise.ones(2, requires_grad=True)
    assert reprise.grad([(x * 2).sum()], [z], allow_unused=True) == [None]
    with pytest.raises(reprise.Error):
        reprise.grad([(x * 2).sum()], [z])


def test_no_grad_context_and_decorator():
    x = reprise.ones(2, requires_grad=True)
    with reprise.no_grad():
        assert not reprise.is_grad_enabled()
        assert not (x * 2).requires_grad
        with reprise.enable_grad():
            assert (x * 2).requires_grad
    assert reprise.is_grad_enabled()

    @reprise.no_grad()
    def update():
        x.fill_(0.5)  # a leaf that requires grad may be written under no_grad only

    update()
    assert x.tolist() == [0.5, 0.5]
    with pytest.raises(reprise.Error, match="requires grad"):
        x.fill_(1.0)


def test_scope_names_recorded_nodes():
    x = reprise.ones((2, 2), requires_grad=True)
    with reprise.scope("model"), reprise.scope("layers.3"):
        assert reprise.current_scope() == "model.layers.3"
        y = x.exp()
    assert y.grad_fn.scope == "model.layers.3" and reprise.current_scope() == ""
    node = (y * 2).grad_fn
    assert node.name == "mul_scalar"
    assert [n.name if n else None for n, _ in node.next_functions] == ["exp"]


def test_in_place_write_after_save_is_caught():
    x = reprise.ones(3, requires_grad=True)
    h = x * 1.0
    y = h.exp()  # saves its output
    with reprise.no_grad():
        y.fill_(0.0)
    with pytest.raises(reprise.Error):
        y.sum().backward()


def test_random_ops_follow_their_generator():
    g1, g2 = reprise.Generator(7), reprise.Generator(7)
    a = reprise.randn((4, 4), generator=g1)
    b = reprise.randn((4, 4), generator=g2)
    assert reprise.hash_values(a) == reprise.hash_values(b)
    assert g1.offset("default") == 16  # Box-Muller: two words per pair of normals
    state = g1.state()
    c = reprise.rand(5, generator=g1)
    g1.set_state(reprise.GeneratorState.from_bytes(state.to_bytes()))
    assert reprise.rand(5, generator=g1).tolist() == c.tolist()


def test_gated_delta_rule_carries_its_state_across_calls():
    """Two calls, the second from the first's state, give one call's bits;
    the output backpropagates, the state does not."""
    rng = np.random.default_rng(7)
    B, T, H, K, V = 2, 70, 2, 4, 3

    def t(*shape, lo=-1.0, hi=1.0):
        return reprise.tensor(rng.uniform(lo, hi, shape).astype(np.float32))

    q, k, v = t(B, T, H, K), t(B, T, H, K), t(B, T, H, V)
    decay, beta = t(B, T, H, lo=0.8), t(B, T, H, lo=0.0)
    whole, final = reprise.gated_delta_rule(q, k, v, decay, beta)
    first, state = reprise.gated_delta_rule(*(x[:, :40] for x in (q, k, v, decay, beta)))
    second, last = reprise.gated_delta_rule(*(x[:, 40:] for x in (q, k, v, decay, beta)), state)
    assert np.array_equal(whole.numpy()[:, :40], first.numpy())
    assert np.array_equal(whole.numpy()[:, 40:], second.numpy())
    assert np.array_equal(final.numpy(), last.numpy())
    assert not final.requires_grad
    q.requires_grad_(True)
    out, _ = reprise.gated_delta_rule(q, k, v, decay, beta)
    out.sum().backward()
    assert q.grad is not None and np.abs(q.grad.numpy()).sum() > 0


def test_attention_takes_sinks_and_a_window():
    rng = np.random.default_rng(8)
    q, k, v = (reprise.tensor(rng.standard_normal((1, 2, 5, 4)).astype(np.float32))
               for _ in range(3))
    plain = reprise.scaled_dot_product_attention(q, k, v, causal=True)
    sinks = reprise.tensor(np.array([0.5, -1.0], dtype=np.float32))
    sunk = reprise.scaled_dot_product_attention(q, k, v, causal=True, sinks=sinks)
    # A sink takes weight from every key, so each output shrinks toward 0.
    assert np.all(np.abs(sunk.numpy()) <= np.abs(plain.numpy()) + 1e-6)
    one = reprise.scaled_dot_product_attention(q, k, v, causal=True, window=1)
    assert np.allclose(one.numpy(), v.numpy(), atol=1e-6)  # each query sees itself only
