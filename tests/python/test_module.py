"""reprise.nn.Module subclassed from Python as torch.nn.Module is: what
registers and under which names, state dicts and files, modes, gradients,
the scopes a forward records under, checkpointed submodules, the building
blocks, and C++ modules as children."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import reprise
from conftest import FIXTURES
from reprise import nn, policies


class Attention(nn.Module):
    def __init__(self, dim: int, gen: reprise.Generator):
        super().__init__()
        self.c_attn = nn.Linear(dim, 3 * dim, generator=gen)
        self.c_proj = nn.Linear(3 * dim, dim, bias=False, generator=gen)

    def forward(self, x):
        return self.c_proj(self.c_attn(x).tanh())


class Block(nn.Module):
    def __init__(self, dim: int, gen: reprise.Generator):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.attn = Attention(dim, gen)
        self.drop = nn.Dropout(0.25, generator=gen)

    def forward(self, x):
        return x + self.drop(self.attn(self.ln(x)))


class Net(nn.Module):
    def __init__(self, seed: int = 0, dim: int = 8, layers: int = 2):
        super().__init__()
        gen = reprise.Generator(seed)
        self.scale = nn.Parameter(reprise.ones(dim))
        self.blocks = nn.ModuleList([Block(dim, gen) for _ in range(layers)])
        self.head = nn.Linear(dim, 4, generator=gen)
        self.policy = None  # set: each block runs as a checkpoint region

    def forward(self, x):
        x = x * self.scale
        for block in self.blocks:
            x = block(x) if self.policy is None else nn.checkpoint(block, x, policy=self.policy)
        return self.head(x)


BLOCK_NAMES = ["ln.weight", "ln.bias", "attn.c_attn.weight", "attn.c_attn.bias",
               "attn.c_proj.weight"]
NET_NAMES = (["scale"] + [f"blocks.{i}.{n}" for i in range(2) for n in BLOCK_NAMES]
             + ["head.weight", "head.bias"])


def inputs(seed: int = 1) -> reprise.Tensor:
    return reprise.tensor(np.random.default_rng(seed).standard_normal((3, 5, 8)).astype(np.float32))


def hashes(tensors) -> list[int]:
    return [reprise.hash_values(t) for t in tensors]


def node_scopes(out: reprise.Tensor) -> dict[str, set[str]]:
    """{scope: op names} of every op node behind out (not the leaves'
    accumulate_grad nodes)."""
    found: dict[str, set[str]] = {}
    todo, seen = [out.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node.sequence_nr in seen:
            continue
        seen.add(node.sequence_nr)
        if node.name != "accumulate_grad":
            found.setdefault(node.scope, set()).add(node.name)
        todo.extend(n for n, _ in node.next_functions)
    return found


# ---- registration --------------------------------------------------------------

def test_reprise_nn_module_is_the_python_class_however_reprise_is_imported():
    # In a fresh interpreter: `import reprise.nn` elsewhere in this process
    # would hide an `import reprise` that binds reprise.nn to _core's.
    code = ("import reprise; assert reprise.nn.Module.__module__ == 'reprise._module'; "
            "assert reprise.nn.LlamaForCausalLM is reprise._core.nn.LlamaForCausalLM")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_attributes_register_in_assignment_order_under_dotted_names():
    net = Net()
    assert [name for name, _ in net.named_parameters()] == NET_NAMES
    assert len(list(net.parameters())) == len(NET_NAMES)
    assert [name for name, _ in net.named_children()] == ["blocks", "head"]
    assert [name for name, _ in net.named_modules()][:5] == [
        "", "blocks", "blocks.0", "blocks.0.ln", "blocks.0.attn"]
    assert net.blocks[1].attn.c_proj.bias is None and "policy" not in dict(net.named_children())
    p = dict(net.named_parameters())["blocks.1.attn.c_attn.weight"]
    assert p is net.blocks[1].attn.c_attn.weight and p.shape == (24, 8)


def test_shared_tensors_are_listed_once_by_parameters_and_under_each_name_by_state_dict():
    net = Net()
    net.blocks[1].attn.c_attn.weight = net.blocks[0].attn.c_attn.weight
    names = [name for name, _ in net.named_parameters()]
    assert "blocks.1.attn.c_attn.weight" not in names and len(names) == len(NET_NAMES) - 1
    assert list(net.state_dict()) == NET_NAMES


def test_parameter_is_a_leaf_that_requires_grad_and_shares_memory():
    t = reprise.ones(3)
    p = nn.Parameter(t)
    assert isinstance(p, reprise.Tensor) and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad and p.data_ptr() == t.data_ptr()
    assert not isinstance(p * 2, nn.Parameter) and not isinstance(t, nn.Parameter)

    class Frozen(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(reprise.ones(2), requires_grad=False)
            self.plain = reprise.ones(2)  # not a parameter: a plain attribute

    m = Frozen()
    assert [name for name, _ in m.named_parameters()] == ["w"] and not m.w.requires_grad


def test_attributes_that_cannot_register_are_errors():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(reprise.ones(2))
            super().__init__()

    with pytest.raises(reprise.Error, match=r"'w' before Module.__init__\(\)"):
        Early()
    net = Net()
    with pytest.raises(reprise.Error, match="head is a submodule"):
        net.head = 3
    with pytest.raises(reprise.Error, match=r"scale is a parameter.*an op's result f32\[8\]"):
        net.scale = net.scale * 2
    net.scale = None
    assert "scale" not in dict(net.named_parameters()) and net.scale is None
    with pytest.raises(reprise.Error, match="without '.'"):
        net.register_buffer("a.b", reprise.ones(1))


def test_buffers_are_state_but_not_parameters():
    net = Net()
    net.register_buffer("mask", reprise.ones(2))
    net.register_buffer("cache", reprise.zeros(2), persistent=False)
    assert "mask" not in dict(net.named_parameters())
    assert [name for name, _ in net.named_buffers()] == ["mask", "cache"]
    assert list(net.state_dict())[-1] == "mask" and "cache" not in net.state_dict()
    net.to("f64")
    assert net.mask.dtype == reprise.float64 and net.head.weight.dtype == reprise.float64


# ---- state ---------------------------------------------------------------------

def test_save_and_load_round_trip_bitwise(tmp_path):
    a, b = Net(seed=1), Net(seed=2)
    assert hashes(a.parameters()) != hashes(b.parameters())
    path = str(tmp_path / "net.safetensors")
    a.save(path)
    assert reprise.io.read_safetensors(path).keys() == NET_NAMES
    assert b.load(path) == nn.IncompatibleKeys([], [])
    assert hashes(b.parameters()) == hashes(a.parameters())
    a.eval()
    b.eval()
    assert reprise.hash_values(a(inputs())) == reprise.hash_values(b(inputs()))


def test_strict_load_names_missing_and_unexpected_keys():
    a, b = Net(seed=1), Net(seed=2)
    state = a.state_dict()
    del state["head.bias"]
    state["extra"] = reprise.zeros(1)
    before = hashes(b.parameters())
    with pytest.raises(reprise.Error, match="missing 'head.bias'; unexpected 'extra'"):
        b.load_state_dict(state)
    assert hashes(b.parameters()) == before
    report = b.load_state_dict(state, strict=False)
    assert report.missing_keys == ["head.bias"] and report.unexpected_keys == ["extra"]
    assert reprise.hash_values(b.head.weight) == reprise.hash_values(a.head.weight)
    assert reprise.hash_values(b.head.bias) != reprise.hash_values(a.head.bias)


def test_a_wrong_shape_names_the_parameter_and_both_shapes_and_changes_nothing():
    a, b = Net(seed=1), Net(seed=2)
    state = a.state_dict()
    state["blocks.1.attn.c_attn.weight"] = reprise.zeros((8, 24))
    before = hashes(b.parameters())
    with pytest.raises(reprise.Error) as error:
        b.load_state_dict(state, strict=False)
    assert ("'blocks.1.attn.c_attn.weight' has shape (24, 8) in the module but (8, 24) in the "
            "state") in str(error.value)
    assert hashes(b.parameters()) == before


# ---- modes and gradients -------------------------------------------------------

def test_train_and_eval_reach_every_module():
    net = Net()
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    x = inputs()
    assert reprise.hash_values(net.blocks[0].drop(x)) == reprise.hash_values(x)
    net.train()
    assert all(m.training for m in net.modules())
    assert reprise.hash_values(net.blocks[0].drop(x)) != reprise.hash_values(x)


def test_zero_grad_drops_every_gradient():
    net = Net()
    net(inputs()).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_linear_gradients_match_a_hand_computation():
    lin = nn.Linear(4, 3, generator=reprise.Generator(3)).to("f64")
    x_np = np.random.default_rng(0).standard_normal((5, 4))
    y = lin(reprise.tensor(x_np, dtype="f64"))
    (y * y).sum().backward()
    w, b = lin.weight.numpy(), lin.bias.numpy()
    dy = 2 * (x_np @ w.T + b)
    np.testing.assert_allclose(y.numpy(), x_np @ w.T + b, rtol=1e-12)
    np.testing.assert_allclose(lin.weight.grad.numpy(), dy.T @ x_np, rtol=1e-12)
    np.testing.assert_allclose(lin.bias.grad.numpy(), dy.sum(0), rtol=1e-12)


def test_to_makes_new_leaves_keeping_gradients_and_sharing():
    net = Net()
    net.blocks[1].attn.c_attn.weight = net.blocks[0].attn.c_attn.weight
    net(inputs()).sum().backward()
    net.to(reprise.float64)
    p = net.blocks[0].attn.c_attn.weight
    assert p.dtype == reprise.float64 and p.is_leaf and p.requires_grad
    assert p.grad is not None and p.grad.dtype == reprise.float64
    assert net.blocks[1].attn.c_attn.weight is p
    assert net.to("cpu") is net and net.blocks[0].attn.c_attn.weight is p


# ---- scopes and checkpointing --------------------------------------------------

def test_a_forward_records_under_attribute_paths():
    net = Net()
    scopes = node_scopes(net(inputs()))
    for i in range(2):
        assert "linear" in scopes[f"blocks.{i}.attn.c_attn"]
        assert "add" in scopes[f"blocks.{i}.attn.c_attn"]  # the bias
        assert scopes[f"blocks.{i}.ln"] == {"layernorm"}
    assert "linear" in scopes["head"] and "mul" in scopes[""]  # the root adds nothing
    # A submodule called on its own is a root; inside a scope it records there.
    with reprise.scope("outer"):
        scopes = node_scopes(net.blocks[1].attn(inputs()))
    assert scopes.keys() == {"outer", "outer.c_attn", "outer.c_proj"}


def test_a_checkpointed_submodule_gives_the_same_bits_as_a_plain_one():
    def run(policy):
        net = Net(seed=4)
        net.policy = policy
        out = net(inputs())
        loss = (out * out).mean()
        loss.backward()
        return hashes([loss] + [p.grad for p in net.parameters()])

    regions = []

    def full(v):
        regions.append((v.region, v.scope))
        return reprise.Decision.must_recompute

    plain = run(None)
    before = reprise.recompute_stats()
    assert run(full) == plain
    assert run(policies.full()) == plain
    stats = reprise.recompute_stats() - before
    assert stats.regions == 4 and stats.replays == 4
    assert ("blocks.1", "blocks.1.attn.c_attn") in regions
    assert {r for r, _ in regions} == {"blocks.0", "blocks.1"}


def test_checkpoint_takes_python_modules_only():
    with pytest.raises(reprise.Error, match="Python nn.Module"):
        nn.checkpoint(reprise._core.nn.Linear("q", 2, 2), reprise.ones((1, 2)))


# ---- building blocks -----------------------------------------------------------

def test_linear_draws_torch_bounds_from_its_generator():
    a = nn.Linear(16, 8, generator=reprise.Generator(7))
    b = nn.Linear(16, 8, generator=reprise.Generator(7))
    assert hashes(a.parameters()) == hashes(b.parameters())
    bound = 1 / math.sqrt(16)
    assert all(np.abs(p.numpy()).max() <= bound for p in a.parameters())
    assert np.abs(a.weight.numpy()).max() > 0.95 * bound  # 128 draws reach near the bound
    assert repr(a) == "Linear(in_features=16, out_features=8, bias=True)"


def test_norms_embedding_and_dropout_follow_torch():
    x_np = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    x = reprise.tensor(x_np)
    ln = nn.LayerNorm(6)
    mean, var = x_np.mean(-1, keepdims=True), x_np.var(-1, keepdims=True)
    np.testing.assert_allclose(ln(x).numpy(), (x_np - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    rms = nn.RMSNorm(6)  # eps: f32's machine epsilon
    expected = x_np / np.sqrt((x_np**2).mean(-1, keepdims=True) + 2.0**-23)
    np.testing.assert_allclose(rms(x).numpy(), expected, rtol=1e-5)
    emb = nn.Embedding(10, 3, generator=reprise.Generator(1))
    ids = reprise.tensor(np.array([[1, 9], [9, 0]], dtype=np.int64))
    assert emb(ids).numpy()[0, 1].tolist() == emb.weight.numpy()[9].tolist()
    drop = nn.Dropout(0.5, generator=reprise.Generator(1))
    kept = drop(reprise.ones((64,))).numpy()
    assert set(kept.tolist()) == {0.0, 2.0}
    with pytest.raises(reprise.Error, match="last dim only"):
        nn.LayerNorm((2, 3))
    with pytest.raises(reprise.Error, match=r"p must be in \[0, 1\]"):
        nn.Dropout(1.5)


def test_module_list_and_sequential():
    gen = reprise.Generator(0)
    layers = nn.ModuleList([nn.Linear(4, 4, generator=gen) for _ in range(2)])
    layers.append(nn.Linear(4, 2, generator=gen)).extend([nn.LayerNorm(2)])
    assert len(layers) == 4 and layers[-1] is list(layers)[3]
    assert [type(m).__name__ for m in layers[1:3]] == ["Linear", "Linear"]
    assert [name for name, _ in layers.named_parameters()][-2:] == ["3.weight", "3.bias"]
    seq = nn.Sequential(*layers)
    x = reprise.ones((1, 4))
    expected = layers[3](layers[2](layers[1](layers[0](x))))
    out = seq(x)
    assert reprise.hash_values(out) == reprise.hash_values(expected)
    assert {"0", "1", "2", "3"} <= node_scopes(out).keys()


# ---- C++ modules as children ---------------------------------------------------

def test_cpp_modules_are_modules_and_children():
    llama = nn.load_model(str(FIXTURES / "llama_tiny"))
    assert isinstance(llama, nn.Module) and not isinstance(llama, nn.Linear)
    assert isinstance(llama.model.layers[0].self_attn.q_proj, nn.Linear)

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = reprise._core.nn.Linear("q_proj", 4, 4, True)
            self.lm = llama

        def forward(self, x):
            return self.q_proj(x)

    w = Wrapper()
    names = [name for name, _ in w.named_parameters()]
    assert names[:3] == ["q_proj.weight", "q_proj.bias", "lm.model.embed_tokens.weight"]
    assert names[2:] == ["lm." + name for name, _ in llama.named_parameters()]
    assert "lm.model.layers.1.self_attn" in dict(w.named_modules())
    assert list(w.state_dict()) == names
    w.eval()
    assert not llama.training and not w.q_proj.training
    with reprise.scope("outer"):
        assert "outer.q_proj" in node_scopes(w(reprise.ones((1, 4))))
    with pytest.raises(reprise.Error, match="'q_proj.weight' belongs to the C\\+\\+ module"):
        w.to("f64")


def test_parameters_count_as_parameter_memory_from_the_start():
    kind = reprise.MemoryKind.parameter
    before = reprise.memory_stats()[kind].live
    layer = nn.Linear(16, 32)
    assert reprise.memory_stats()[kind].live - before == (16 * 32 + 32) * 4
    del layer
    assert reprise.memory_stats()[kind].live == before


def test_module_dict_names_as_attributes_do_and_activations_are_modules():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(11, 4),
                                                  h=nn.ModuleList([nn.Linear(4, 4)])))
            self.transformer["act"] = nn.GELU()
            self.head = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Identity())

        def forward(self, ids):
            x = self.transformer["act"](self.transformer.h[0](self.transformer["wte"](ids)))
            return self.head(x)

    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["transformer.wte.weight", "transformer.h.0.weight", "transformer.h.0.bias",
                     "head.0.weight", "head.0.bias"]
    assert list(net.transformer) == ["wte", "h", "act"] and "h" in net.transformer
    assert len(net.transformer) == 3 and isinstance(net.transformer["h"], nn.ModuleList)
    ids = reprise.tensor([[1, 2, 3]], dtype="i64")
    y = net(ids)
    assert y.shape == (1, 3, 3)
    x = reprise.tensor(np.linspace(-2, 2, 9))
    for module, expected in [(nn.ReLU(), np.maximum(np.linspace(-2, 2, 9), 0)),
                             (nn.Tanh(), np.tanh(np.linspace(-2, 2, 9))),
                             (nn.Sigmoid(), 1 / (1 + np.exp(-np.linspace(-2, 2, 9)))),
                             (nn.SiLU(), np.linspace(-2, 2, 9) / (1 + np.exp(-np.linspace(-2, 2, 9)))),
                             (nn.Softmax(dim=0), np.exp(np.linspace(-2, 2, 9))
                              / np.exp(np.linspace(-2, 2, 9)).sum())]:
        np.testing.assert_allclose(module(x).tolist(), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nn.GELU(approximate="tanh")(x).tolist(),
                               reprise.gelu(x).tolist(), rtol=0)
    del net.transformer["act"]
    assert "act" not in net.transformer
    with pytest.raises(KeyError):
        net.transformer["act"]
    with pytest.raises(reprise.Error, match="approximate"):
        nn.GELU("erf")
    assert "GELU(approximate='tanh')" in repr(nn.GELU("tanh"))
