"""reprise.optim: torch.optim's AdamW and SGD for any parameters.

    opt = reprise.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    opt = reprise.optim.AdamW([
        {"params": decayed, "weight_decay": 0.1},
        {"params": others, "weight_decay": 0.0},
    ], lr=3e-4)

params is an iterable of tensors (leaves that require grad), of
(name, tensor) pairs (Module.named_parameters()), or of param groups: dicts
with "params" and any option to override for that group. As in torch,
every parameter of a group takes the group's weight decay.

Each group is updated by the engine's optimizer (reprise.nn.AdamW, SGD:
PyTorch's order of operations, each element by one thread), so a step is
the same bits at any thread count. Changing a group's "lr" (a learning-rate
schedule) takes effect at the next step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import _core
from ._core import Error, Tensor


def _named(params: Iterable[Any], optimizer: str,
           group: int) -> tuple[list[Tensor], list[_core.nn.NamedParameter]]:
    """The group's tensors (the caller's objects) and their engine entries."""
    tensors, named = [], []
    for i, p in enumerate(params):
        name, t = p if isinstance(p, tuple) else (f"group{group}.param{i}", p)
        if not isinstance(t, Tensor):
            raise Error(f"optim.{optimizer}: param {i} of group {group} is a "
                        f"{type(t).__name__}, not a reprise.Tensor")
        if not (t.is_leaf and t.requires_grad):
            raise Error(f"optim.{optimizer}: param {name} {t.dtype} {list(t.shape)} is not a "
                        "leaf that requires grad; only those can be optimized")
        tensors.append(t)
        named.append(_core.nn.NamedParameter(name, t, True))
    if not named:
        raise Error(f"optim.{optimizer}: group {group} has no parameters")
    return tensors, named


class Optimizer:
    """torch.optim.Optimizer's surface over one engine optimizer per param
    group: param_groups, step(), zero_grad(), state_dict()."""

    _name = "Optimizer"

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise Error(f"optim.{self._name}: params must be an iterable of tensors or param "
                        "groups, not one tensor")
        params = list(params)
        if not params:
            raise Error(f"optim.{self._name}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self._engines: list[Any] = []
        seen: set[int] = set()
        for g, group in enumerate(groups):
            unknown = set(group) - {"params"} - set(defaults)
            if unknown:
                raise Error(f"optim.{self._name}: group {g} has unknown options "
                            f"{sorted(unknown)}; expected {sorted(defaults)}")
            options = {**defaults, **{k: v for k, v in group.items() if k != "params"}}
            tensors, named = _named(group["params"], self._name, g)
            for t, p in zip(tensors, named):
                if id(t) in seen:
                    raise Error(f"optim.{self._name}: param {p.name} appears twice")
                seen.add(id(t))
            self.param_groups.append({"params": tensors, **options})
            self._engines.append(self._make(named, options))

    def _make(self, named: list[Any], options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def step(self) -> None:
        """One update of every group from its parameters' gradients."""
        for group, engine in zip(self.param_groups, self._engines):
            engine.lr = group["lr"]
            engine.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops every parameter's gradient (set_to_none=False is not
        offered: a gradient is dropped, never zero-filled)."""
        if not set_to_none:
            raise Error(f"optim.{self._name}.zero_grad: set_to_none=False is not supported")
        for engine in self._engines:
            engine.zero_grad()

    def state_dict(self) -> dict[str, Tensor]:
        """The state of every group as {"<group>.<name>": tensor} copies."""
        return {f"{g}.{name}": t for g, engine in enumerate(self._engines)
                for name, t in engine.state().items()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        for g, engine in enumerate(self._engines):
            prefix = f"{g}."
            engine.load_state({k[len(prefix):]: v for k, v in state.items()
                               if k.startswith(prefix)})

    def __repr__(self) -> str:
        groups = ", ".join(f"{len(g['params'])} params" for g in self.param_groups)
        return f"{self._name}({groups}; {self.defaults})"


class AdamW(Optimizer):
    """torch.optim.AdamW: decoupled weight decay, bias-corrected moments."""

    _name = "AdamW"

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay})

    def _make(self, named: list[Any], o: dict[str, Any]) -> Any:
        beta1, beta2 = o["betas"]
        return _core.nn.AdamW(named, lr=o["lr"], beta1=beta1, beta2=beta2, eps=o["eps"],
                              weight_decay=o["weight_decay"], decay_all=True)


class SGD(Optimizer):
    """torch.optim.SGD, with momentum, dampening, weight decay and
    Nesterov momentum."""

    _name = "SGD"

    def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov})

    def _make(self, named: list[Any], o: dict[str, Any]) -> Any:
        return _core.nn.SGD(named, lr=o["lr"], momentum=o["momentum"],
                            dampening=o["dampening"], weight_decay=o["weight_decay"],
                            nesterov=o["nesterov"])
