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
