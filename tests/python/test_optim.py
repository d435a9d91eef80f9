"""reprise.optim: torch.optim's AdamW and SGD over plain tensors and param
groups, against the update rules written out in NumPy (f64; the engine
updates f32 parameters in f32, hence the 1e-6 tolerances), and their
errors."""

from __future__ import annotations

import numpy as np
import pytest

import reprise


def leaf(values):
    return reprise.tensor(np.asarray(values, dtype=np.float32), requires_grad=True)


def set_grad(p, g):
    (p * reprise.tensor(np.asarray(g, dtype=np.float32))).sum().backward()


def test_adamw_groups_follow_torchs_rule():
    w0, b0 = np.array([0.5, -1.0, 2.0]), np.array([0.25])
    w, b = leaf(w0), leaf(b0)
    opt = reprise.optim.AdamW([{"params": [w], "weight_decay": 0.1},
                               {"params": [b], "weight_decay": 0.0, "lr": 0.5}],
                              lr=0.1, betas=(0.9, 0.95), eps=1e-8)
    grads = [np.array([0.3, -0.2, 0.1]), np.array([-0.4])]
    state = {"w": (w0.copy(), 0.1, 0.1, np.zeros(3), np.zeros(3)),
             "b": (b0.copy(), 0.5, 0.0, np.zeros(1), np.zeros(1))}
    for step in range(1, 4):
        set_grad(w, grads[0] * step)
        set_grad(b, grads[1] * step)
        opt.step()
        opt.zero_grad()
        for key, g in (("w", grads[0] * step), ("b", grads[1] * step)):
            x, lr, wd, m, v = state[key]
            x = x * (1 - lr * wd)
            m = 0.9 * m + 0.1 * g
            v = 0.95 * v + 0.05 * g * g
            x = x - lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.95 ** step)) + 1e-8)
            state[key] = (x, lr, wd, m, v)
    np.testing.assert_allclose(w.tolist(), state["w"][0], rtol=1e-6)
    np.testing.assert_allclose(b.tolist(), state["b"][0], rtol=1e-6)
    assert w.grad is None
    assert len(opt.state_dict()) > 0


def test_sgd_momentum_and_a_schedule_through_param_groups():
    p = leaf([1.0, 2.0])
    opt = reprise.optim.SGD([p], lr=0.1, momentum=0.9)
    x, buf = np.array([1.0, 2.0]), None
    for step, lr in enumerate([0.1, 0.05, 0.01]):
        opt.param_groups[0]["lr"] = lr
        set_grad(p, [1.0, -1.0])
        opt.step()
        opt.zero_grad()
        g = np.array([1.0, -1.0])
        buf = g if buf is None else 0.9 * buf + g
        x = x - lr * buf
    np.testing.assert_allclose(p.tolist(), x, rtol=1e-6)


def test_bad_parameters_are_errors():
    p = leaf([1.0])
    with pytest.raises(reprise.Error, match="not a leaf that requires grad"):
        reprise.optim.AdamW([p * 2])
    with pytest.raises(reprise.Error, match="appears twice"):
        reprise.optim.AdamW([{"params": [p]}, {"params": [p]}])
    with pytest.raises(reprise.Error, match="unknown options"):
        reprise.optim.SGD([{"params": [p], "momentun": 0.9}])
    with pytest.raises(reprise.Error, match="empty parameter list"):
        reprise.optim.AdamW([])
    with pytest.raises(reprise.Error, match="not one tensor"):
        reprise.optim.AdamW(p)
