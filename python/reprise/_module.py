"""reprise.nn.Module for Python code: subclass it as torch.nn.Module is
subclassed, assign parameters, buffers and submodules as attributes, and
write forward.

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(64, 192)

        def forward(self, x):
            return self.attn(x)

A module's attribute path is both its parameters' names and the scope of
the nodes its forward records: `blocks.3.attn.weight` is the weight of the
module whose ops record as `blocks.3.attn`, so recompute policies, the
verifier and parameter files name the same things the same way.

The C++ modules (reprise._core.nn: LlamaForCausalLM and its layers) are
modules here too: isinstance(model, nn.Module) holds, a Python module
takes one as an attribute, and lists its parameters under the attribute's
name. Their forward runs in C++ and opens the scope of the C++ module's own
name (the `name` it was built with), so give the attribute that name for
its nodes and its parameters to agree; a nameless root (LlamaForCausalLM)
adds nothing to the scope.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from . import _core
from ._core import DType, Error, Tensor, as_device, as_dtype, is_floating, scope
from ._core.io import load_safetensors, save_safetensors
from ._grad import no_grad

_CppModule = _core.nn.Module


# ---- parameters ----------------------------------------------------------------

# reprise.Tensor is a C++ class without a Python constructor, so a Python
# subclass of it cannot be made, and its instances take no extra
# attributes. A parameter is therefore marked by what the engine already
# knows, reprise's rule that a leaf that requires grad is a parameter, never
# an activation. A frozen parameter (requires_grad=False) has no such mark:
# nn.Parameter keeps it here, by identity and alive (so that its id is not
# reused), until a module registers it.
_frozen: dict[int, Tensor] = {}


def _is_parameter(value: Any) -> bool:
    if not isinstance(value, Tensor):
        return False
    return (value.is_leaf and value.requires_grad) or _frozen.get(id(value)) is value


class _ParameterMeta(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return _is_parameter(value)


class Parameter(metaclass=_ParameterMeta):
    """torch.nn.Parameter: `nn.Parameter(t)` is a new leaf sharing t's
    memory that requires grad (a reprise.Tensor, usable in any op); a module
    registers it when it is assigned as an attribute. isinstance(t,
    nn.Parameter) is true of any leaf that requires grad."""

    def __new__(cls, data: Tensor, requires_grad: bool = True) -> Tensor:  # type: ignore[misc]
        if not isinstance(data, Tensor):
            raise Error(f"nn.Parameter: expected a reprise.Tensor, got {type(data).__name__}")
        leaf = data.detach()
        leaf.requires_grad_(requires_grad)
        if not requires_grad:
            _frozen[id(leaf)] = leaf
        return leaf


# ---- module tree ---------------------------------------------------------------

# Bumped whenever a name is registered or removed anywhere, so that the
# paths a module has cached for its descendants are rebuilt.
_tree_version = 0


def _tree_changed() -> None:
    global _tree_version
    _tree_version += 1


# The Python modules whose forward is running on this thread, innermost
# last: a module called from a forward takes its path in the caller's tree
# as its scope.
_running = threading.local()


def _call_stack() -> list[Module]:
    stack = getattr(_running, "stack", None)
    if stack is None:
        stack = _running.stack = []
    return stack


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


def _cpp_relative(module: _CppModule, name: str) -> str:
    """A C++ module's tensor name without the module's own name, which the
    C++ tree puts first ("q_proj.weight" -> "weight")."""
    own = module.name
    return name[len(own) + 1:] if own else name


def _cpp_tensors(module: _CppModule, kind: str) -> list[tuple[str, Tensor]]:
    """(name relative to the module, tensor) of a C++ module's parameters or
    buffers, its whole subtree's."""
    named = module.named_parameters() if kind == "parameters" else module.buffers()
    return [(_cpp_relative(module, name), t) for name, t in named]


def _check_name(owner: Module, name: Any, what: str) -> None:
    if not isinstance(name, str) or not name or "." in name:
        raise Error(f"{type(owner).__name__}: a {what} name must be a non-empty string "
                    f"without '.', got {name!r}")


class IncompatibleKeys(NamedTuple):
    """What load_state_dict did not match, as torch reports it."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module(metaclass=abc.ABCMeta):
    """Base class of models and layers (torch.nn.Module). Subclasses call
    super().__init__() first, then assign parameters (nn.Parameter),
    buffers (register_buffer) and submodules as attributes, in the order
    named_parameters() lists them, and define forward. A tensor attribute
    is a parameter when it is a leaf that requires grad (what nn.Parameter
    returns); other tensors stay plain attributes."""

    training: bool

    def __init__(self) -> None:
        # Set through object.__setattr__: ours needs these to exist.
        object.__setattr__(self, "_parameters", {})  # name -> Tensor | None
        object.__setattr__(self, "_buffers", {})  # name -> Tensor | None
        object.__setattr__(self, "_non_persistent", set())  # buffers state_dict leaves out
        object.__setattr__(self, "_modules", {})  # name -> Module | None
        object.__setattr__(self, "_paths", (-1, {}))  # (tree version, id -> path)
        object.__setattr__(self, "training", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    # ---- calling --------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """forward(*args, **kwargs) under this module's scope: its attribute
        path in the module whose forward calls it ("blocks.3"), nothing for
        a module called from outside any forward, or by a module it is not
        a descendant of."""
        path = _path_in_caller(self)
        if not path:
            return self._run_forward(args, kwargs)
        with scope(path):
            return self._run_forward(args, kwargs)

    def _run_forward(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stack = _call_stack()
        stack.append(self)
        try:
            return self.forward(*args, **kwargs)
        finally:
            stack.pop()

    def _descendant_paths(self) -> dict[int, str]:
        """id -> path of every Python module below this one (first path of a
        shared one, as named_modules gives it)."""
        version, paths = self._paths
        if version != _tree_version:
            paths = {id(m): name for name, m in self.named_modules()
                     if name and not isinstance(m, _CppModule)}
            object.__setattr__(self, "_paths", (_tree_version, paths))
        return paths

    # ---- registration ---------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if "_parameters" not in d and (_is_parameter(value) or isinstance(value, Module)):
            raise Error(f"cannot assign {type(value).__name__} '{name}' before "
                        f"Module.__init__() is called: call super().__init__() first in "
                        f"{type(self).__name__}.__init__")
        if _is_parameter(value):
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self.register_module(name, value)
        elif "_parameters" in d and name in self._parameters:
            if value is not None:
                raise Error(f"{type(self).__name__}.{name} is a parameter: assign an "
                            f"nn.Parameter (a leaf that requires grad) or None, not "
                            f"{_describe(value)}")
            self.register_parameter(name, None)
        elif "_modules" in d and name in self._modules:
            if value is not None:
                raise Error(f"{type(self).__name__}.{name} is a submodule: assign an "
                            f"nn.Module or None, not {_describe(value)}")
            self.register_module(name, None)
        elif "_buffers" in d and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise Error(f"{type(self).__name__}.{name} is a buffer: assign a tensor or "
                            f"None, not {_describe(value)}")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails: registered names live in the
        # three tables, not in __dict__.
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if self._forget(name):
            _tree_changed()
        else:
            object.__delattr__(self, name)

    def _forget(self, name: str, keep: dict[str, Any] | None = None) -> bool:
        """Removes name from the tables but keep; whether it was there."""
        found = False
        for table in (self._parameters, self._buffers, self._modules):
            if table is not keep and name in table:
                del table[name]
                found = True
        self._non_persistent.discard(name)
        return found

    def _place(self, table: dict[str, Any], name: str, value: Any) -> None:
        """Puts value under name in table (where it was, if there), and
        nowhere else."""
        self._forget(name, keep=table)
        self.__dict__.pop(name, None)
        table[name] = value
        _tree_changed()

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Adds a parameter (any leaf tensor, frozen ones included) or None."""
        _check_name(self, name, "parameter")
        if param is not None:
            if not isinstance(param, Tensor) or not param.is_leaf:
                raise Error(f"{type(self).__name__}.{name}: a parameter must be a leaf tensor "
                            f"(nn.Parameter(t)), got {_describe(param)}")
            if _frozen.get(id(param)) is param:
                del _frozen[id(param)]
        self._place(self._parameters, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Adds a tensor of module state that is not a parameter (a mask, a
        running statistic): it moves with to() and, when persistent, is in
        state_dict()."""
        _check_name(self, name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise Error(f"{type(self).__name__}.register_buffer('{name}'): expected a tensor "
                        f"or None, got {_describe(tensor)}")
        self._place(self._buffers, name, tensor)
        if not persistent:
            self._non_persistent.add(name)

    def register_module(self, name: str, module: Module | None) -> None:
        """Adds a submodule (a Python or C++ module) or None."""
        _check_name(self, name, "submodule")
        if module is not None and not isinstance(module, Module):
            raise Error(f"{type(self).__name__}.{name}: expected an nn.Module, got "
                        f"{_describe(module)}")
        self._place(self._modules, name, module)

    add_module = register_module

    # ---- the tree -------------------------------------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and every descendant, depth-first, each once (under its
        first path) unless remove_duplicate is False. C++ descendants come
        under their C++ names."""
        return _walk(self, prefix, {} if remove_duplicate else None, into_cpp=True)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def _named_tensors(self, kind: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, tensor) of the parameters or buffers: each module's
        own before its children's, in registration order."""
        memo: dict[int, Module] | None = {} if remove_duplicate else None
        modules = _walk(self, prefix, memo, into_cpp=False) if recurse else iter([(prefix, self)])
        seen: set[int] = set()
        kept: list[Tensor] = []  # holds fresh C++ wrappers so that their ids stay unique
        for path, m in modules:
            if isinstance(m, _CppModule):
                own = _cpp_tensors(m, kind)
            else:
                own = [(n, t) for n, t in getattr(m, "_" + kind).items() if t is not None]
            for name, t in own:
                if remove_duplicate and id(t) in seen:
                    continue
                seen.add(id(t))
                kept.append(t)
                yield _join(path, name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, leaf) of every parameter: a tensor shared by several
        modules comes once, under its first name."""
        return self._named_tensors("parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, t in self.named_parameters(recurse=recurse):
            yield t

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_tensors("buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, t in self.named_buffers(recurse=recurse):
            yield t

    # ---- modes and gradients --------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active) for this module and its descendants."""
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freezes (False) or unfreezes every parameter."""
        for t in self.parameters():
            t.requires_grad_(requires_grad)
        return self

    def zero_grad(self) -> None:
        """Drops every parameter's gradient (torch's set_to_none=True)."""
        for t in self.parameters():
            t.grad = None

    def to(self, target: Any) -> Module:
        """Moves the parameters and buffers to a device ('cuda', 'cpu', a
        reprise.Device or torch.device), or casts the floating ones to a
        dtype, in place: each becomes a new leaf (its gradient moved with
        it), tensors shared between modules stay shared."""
        device, dtype = _target(target)

        def changes(t: Tensor) -> bool:
            if device is not None:
                return t.device != device
            return t.dtype != dtype and is_floating(t.dtype)

        def convert(t: Tensor) -> Tensor:
            return t.to(device if device is not None else dtype) if changes(t) else t

        modules = list(_walk(self, "", {}, into_cpp=False))
        for path, m in modules:
            if isinstance(m, _CppModule):
                _check_cpp_in_place(m, path, changes)
        done: dict[int, Tensor] = {}  # id of a tensor -> its replacement
        with no_grad():
            for _, m in modules:
                if isinstance(m, _CppModule):
                    continue
                for table in (m._parameters, m._buffers):
                    for name, t in table.items():
                        if t is None:
                            continue
                        if id(t) not in done:
                            done[id(t)] = _replacement(t, convert)
                        table[name] = done[id(t)]
        return self

    # ---- state ----------------------------------------------------------------

    def state_dict(self) -> dict[str, Tensor]:
        """{name: tensor} of every parameter and persistent buffer, sharing
        their memory without their autograd history. A tensor shared by
        several modules is listed under each of its names, as in torch."""
        out = {name: t.detach() for name, t in
               self.named_parameters(remove_duplicate=False)}
        for path, m in _walk(self, "", None, into_cpp=False):
            if isinstance(m, _CppModule):
                buffers = _cpp_tensors(m, "buffers")
            else:
                buffers = [(n, t) for n, t in m._buffers.items()
                           if t is not None and n not in m._non_persistent]
            for name, t in buffers:
                out[_join(path, name)] = t.detach()
        return out

    def load_state_dict(self, state: dict[str, Tensor], strict: bool = True) -> IncompatibleKeys:
        """Copies state's tensors into the parameters and buffers of the same
        names (converting dtype and device), after checking everything, so
        that nothing changes unless everything fits. Returns the names state
        lacks and the names the module lacks; with strict, either is a
        reprise.Error instead, as a shape that differs always is."""
        own = self.state_dict()
        missing = [name for name in own if name not in state]
        unexpected = [name for name in state if name not in own]
        problems = [f"'{name}' has shape {tuple(t.shape)} in the module but "
                    f"{tuple(state[name].shape)} in the state"
                    for name, t in own.items()
                    if name in state and tuple(state[name].shape) != tuple(t.shape)]
        if strict and missing:
            problems.append("missing " + ", ".join(f"'{name}'" for name in missing))
        if strict and unexpected:
            problems.append("unexpected " + ", ".join(f"'{name}'" for name in unexpected))
        if problems:
            raise Error(f"{type(self).__name__}.load_state_dict: " + "; ".join(problems))
        with no_grad():
            for name, t in own.items():
                if name in state:
                    value = state[name]
                    t.copy_(value if value.device == t.device else value.to(t.device))
        return IncompatibleKeys(missing, unexpected)

    def save(self, path: str) -> None:
        """Writes state_dict() to a safetensors file (CPU copies, exact bits)."""
        save_safetensors(path, {name: t.cpu() for name, t in self.state_dict().items()})

    def load(self, path: str, strict: bool = True) -> IncompatibleKeys:
        """load_state_dict() from a safetensors file that save() wrote."""
        return self.load_state_dict(load_safetensors(path), strict)

    # ---- printing -------------------------------------------------------------

    def extra_repr(self) -> str:
        """What repr shows inside the parentheses; layers override it."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + _indent(repr(m) if not isinstance(m, _CppModule)
                                         else f"{type(m).__name__}(name={m.name!r})")
                 for name, m in self._modules.items() if m is not None]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"


# The C++ modules are modules too (for isinstance), though not Python ones.
Module.register(_CppModule)


def _walk(module: Module, prefix: str, memo: dict[int, Module] | None,
          into_cpp: bool) -> Iterator[tuple[str, Module]]:
    """(path, module) of module and its descendants, depth-first; each once
    when memo is given (it holds what it has seen, so that the fresh
    wrappers of C++ children keep distinct ids). A C++ module's children are
    visited when into_cpp."""
    if memo is not None:
        if id(module) in memo:
            return
        memo[id(module)] = module
    yield prefix, module
    if isinstance(module, _CppModule):
        if into_cpp:
            for child in module.children():
                yield from _walk(child, _join(prefix, child.name), memo, into_cpp)
        return
    for name, child in module._modules.items():
        if child is not None:
            yield from _walk(child, _join(prefix, name), memo, into_cpp)


def _path_in_caller(module: Module) -> str:
    """module's path in the module whose forward is running on this thread;
    '' when none is or module is not its descendant."""
    stack = _call_stack()
    if not stack:
        return ""
    return stack[-1]._descendant_paths().get(id(module), "")


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        kind = "a leaf" if value.is_leaf else "an op's result"
        return f"{kind} {value.describe()}"
    return type(value).__name__


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _target(target: Any) -> tuple[Any, DType | None]:
    """(device, None) or (None, dtype) for what Module.to was given."""
    try:
        return as_device(target), None
    except Error:
        return None, as_dtype(target)


def _replacement(t: Tensor, convert: Callable[[Tensor], Tensor]) -> Tensor:
    """t converted into a new leaf with t's requires_grad and gradient, or t."""
    moved = convert(t)
    if moved is t:
        return t
    moved.requires_grad_(t.requires_grad)
    if t.grad is not None:
        moved.grad = convert(t.grad)
    return moved


def _check_cpp_in_place(module: _CppModule, path: str,
                        changes: Callable[[Tensor], bool]) -> None:
    """C++ modules own their tensors and cannot move them: to() is an error
    unless it would leave them as they are."""
    for name, t in _cpp_tensors(module, "parameters") + _cpp_tensors(module, "buffers"):
        if changes(t):
            raise Error(f"Module.to: '{_join(path, name)}' belongs to the C++ module "
                        f"{type(module).__name__}, which cannot move its tensors "
                        f"({t.describe()})")


# ---- containers ----------------------------------------------------------------

class ModuleList(Module):
    """Modules in a list, named "0", "1", ... (torch.nn.ModuleList): indexed,
    iterated and appended to, and called one by one from a forward
    (`for block in self.blocks: x = block(x)` records under blocks.0,
    blocks.1, ...)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int | slice) -> Any:
        items = list(self._modules.values())
        return ModuleList(items[index]) if isinstance(index, slice) else items[index]

    def append(self, module: Module) -> ModuleList:
        self.register_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self


class Sequential(ModuleList):
    """Modules called in order, each on the previous one's output
    (torch.nn.Sequential); they record under "0", "1", ..."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def __getitem__(self, index: int | slice) -> Any:
        item = super().__getitem__(index)
        return Sequential(*item) if isinstance(index, slice) else item

    def forward(self, x: Any) -> Any:
        for m in self:
            x = m(x)
        return x


class ModuleDict(Module):
    """Modules by name (torch.nn.ModuleDict), in insertion order; each
    records under its key, as an attribute would (nanoGPT's
    `self.transformer = nn.ModuleDict(dict(wte=..., h=...))` names
    transformer.wte.weight)."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
                 ) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def __getitem__(self, key: str) -> Module:
        if key not in self._modules:
            raise KeyError(key)
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.register_module(key, module)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module


# ---- checkpointing -------------------------------------------------------------

def checkpoint(module: Module, *args: Any, policy: Any = None, **options: Any) -> Any:
    """module(*args) as a checkpoint region named by the module's scope:

        x = nn.checkpoint(self.blocks[i], x, policy=reprise.policies.full())

    records under blocks.<i>, as module(*args) would, with region
    'blocks.<i>'. policy: a reprise.Policy or a Python callable (default:
    policies.full(), recompute everything); options go to reprise.checkpoint
    (rng, generator, verify, ...). forward must return a tensor or a tuple
    of tensors."""
    if isinstance(module, _CppModule) or not isinstance(module, Module):
        raise Error(f"nn.checkpoint: expected a Python nn.Module, got {type(module).__name__} "
                    "(run a C++ model's layers through its forward's `layers` argument)")
    path = _path_in_caller(module)
    if policy is None:
        policy = _core.policies.full()
    return _core.checkpoint(path, policy, lambda: module._run_forward(args, {}), **options)
