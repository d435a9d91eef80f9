"""The building blocks of reprise.nn in Python, torch.nn's names,
arguments and initialisation, over reprise's ops: Linear, Embedding,
LayerNorm, RMSNorm, Dropout, and the activations as modules (GELU, ReLU,
SiLU, Tanh, Sigmoid, Softmax, Identity).

Initial values come from the stream 'init' of a reprise.Generator (default:
the default generator), as the C++ models draw theirs, so a seed fixes
them. The C++ layers of the same names (reprise._core.nn.Linear, ...,
inside the C++ models) count as instances of these classes."""

from __future__ import annotations

import math
from typing import Any

from . import _core
from . import _functional as F
from ._core import Error, Generator, Tensor, kaiming_uniform_, normal_, ones, uniform_, zeros
from ._module import Module, Parameter


def _positive(layer: str, **sizes: int) -> None:
    for what, n in sizes.items():
        if not isinstance(n, int) or n <= 0:
            raise Error(f"nn.{layer}: {what} must be a positive int, got {n!r}")


class Linear(Module):
    """y = x @ weight^T + bias (torch.nn.Linear); x (..., in_features) ->
    (..., out_features). weight (out, in) and bias (out) are drawn from
    U(-1/sqrt(in), 1/sqrt(in)) as torch draws them (kaiming_uniform_ with
    a = sqrt(5))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 generator: Generator | None = None) -> None:
        super().__init__()
        _positive("Linear", in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(kaiming_uniform_(zeros((out_features, in_features)), math.sqrt(5),
                                                 generator=generator))
        if bias:
            bound = 1.0 / math.sqrt(in_features)
            self.bias = Parameter(uniform_(zeros(out_features), -bound, bound,
                                           generator=generator))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Embedding(Module):
    """Rows of weight (num_embeddings, embedding_dim) by index
    (torch.nn.Embedding): ids (...) i64 -> (..., embedding_dim). weight is
    drawn from N(0, 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *,
                 generator: Generator | None = None) -> None:
        super().__init__()
        _positive("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(normal_(zeros((num_embeddings, embedding_dim)),
                                        generator=generator))

    def forward(self, ids: Tensor) -> Tensor:
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


def _last_dim(layer: str, normalized_shape: Any) -> int:
    """The one normalised dim of torch's normalized_shape (an int or a
    1-tuple): reprise's norms normalise over the last dim only."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1:
        raise Error(f"nn.{layer}: normalized_shape {shape}: reprise normalises over the last "
                    "dim only (give one size)")
    _positive(layer, normalized_shape=shape[0])
    return shape[0]


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dim
    (torch.nn.LayerNorm, biased variance); weight starts at 1, bias at 0."""

    def __init__(self, normalized_shape: int | tuple[int], eps: float = 1e-5,
                 bias: bool = True) -> None:
        super().__init__()
        dim = _last_dim("LayerNorm", normalized_shape)
        self.normalized_shape, self.eps = (dim,), eps
        self.weight = Parameter(ones(dim))
        if bias:
            self.bias = Parameter(zeros(dim))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dim
    (torch.nn.RMSNorm); weight starts at 1. eps None: the machine epsilon
    of x's dtype, as torch."""

    def __init__(self, normalized_shape: int | tuple[int], eps: float | None = None) -> None:
        super().__init__()
        dim = _last_dim("RMSNorm", normalized_shape)
        self.normalized_shape, self.eps = (dim,), eps
        self.weight = Parameter(ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by
    1 / (1 - p) in training mode; the identity in eval mode
    (torch.nn.Dropout). The mask comes from the stream 'dropout' of
    generator (default: the default generator) and replays exactly under
    checkpointing."""

    def __init__(self, p: float = 0.5, *, generator: Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise Error(f"nn.Dropout: p must be in [0, 1], got {p}")
        self.p, self.generator = p, generator

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, generator=self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GELU(Module):
    """x Phi(x) (torch.nn.GELU): exact with approximate='none', else the
    tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise Error(f"nn.GELU: approximate={approximate!r}: expected 'none' or 'tanh'")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """softmax over dim (torch.nn.Softmax)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, dim=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def _activation(name: str, fn: Any, doc: str) -> type:
    def forward(self: Module, x: Tensor) -> Tensor:
        return fn(x)

    return type(name, (Module,), {"forward": forward, "__doc__": doc,
                                  "__module__": __name__})


ReLU = _activation("ReLU", _core.relu, "max(x, 0) (torch.nn.ReLU).")
SiLU = _activation("SiLU", _core.silu, "x sigmoid(x) (torch.nn.SiLU).")
Tanh = _activation("Tanh", _core.tanh, "tanh(x) (torch.nn.Tanh).")
Sigmoid = _activation("Sigmoid", _core.sigmoid, "1 / (1 + exp(-x)) (torch.nn.Sigmoid).")
Identity = _activation("Identity", lambda x: x, "x itself (torch.nn.Identity).")


Linear.register(_core.nn.Linear)
Embedding.register(_core.nn.Embedding)
RMSNorm.register(_core.nn.RMSNorm)
