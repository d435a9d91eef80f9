"""reprise.nn.functional: torch.nn.functional's names and arguments over
reprise's ops, so that `import reprise.nn.functional as F` reads as torch
code does. Each function records its ops on the tape; an argument reprise
cannot honour is a reprise.Error, never ignored."""

from __future__ import annotations

from collections.abc import Sequence

from . import _core
from ._core import Error, Generator, Tensor

__all__ = [
    "linear", "layer_norm", "rms_norm", "gelu", "silu", "relu", "sigmoid", "tanh", "softmax",
    "log_softmax", "logsigmoid", "softplus", "cross_entropy", "dropout",
    "scaled_dot_product_attention", "one_hot", "pad", "embedding",
]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight^T + bias; weight (out, in) as torch lays it out. Inside
    `reprise.nn.autocast("bf16")` the product runs on bf16 copies of input
    and weight, as torch.autocast runs F.linear."""
    y = _core.nn.autocast_linear(input, weight)
    return y if bias is None else y + bias


def _last_dim(op: str, input: Tensor, normalized_shape: int | Sequence[int]) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1 or shape[0] != input.shape[-1]:
        raise Error(f"{op}: normalized_shape {shape} for {input.describe()}: reprise normalises "
                    "over the last dim only, which it must name")
    return shape[0]


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    n = _last_dim("layer_norm", input, normalized_shape)
    if weight is None:
        weight = _core.ones(n, dtype=input.dtype, device=input.device)
    return _core.layernorm(input, weight, bias, eps)


# torch.finfo(dtype).eps: what torch's rms_norm adds when given no eps.
_EPSILON = {_core.DType.f32: 2.0**-23, _core.DType.f64: 2.0**-52, _core.DType.bf16: 2.0**-7,
            _core.DType.f16: 2.0**-10}


def rms_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    n = _last_dim("rms_norm", input, normalized_shape)
    if weight is None:
        weight = _core.ones(n, dtype=input.dtype, device=input.device)
    return _core.rmsnorm(input, weight, _EPSILON[input.dtype] if eps is None else eps)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x Phi(x) (approximate='none', with erf), or its tanh approximation."""
    if approximate == "none":
        return _core.gelu_erf(input)
    if approximate == "tanh":
        return _core.gelu(input)
    raise Error(f"gelu: approximate={approximate!r}: expected 'none' or 'tanh'")


def silu(input: Tensor) -> Tensor:
    return _core.silu(input)


def relu(input: Tensor) -> Tensor:
    return _core.relu(input)


def sigmoid(input: Tensor) -> Tensor:
    return _core.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return _core.tanh(input)


def softmax(input: Tensor, dim: int = -1) -> Tensor:
    return _core.softmax(input, dim)


def log_softmax(input: Tensor, dim: int = -1) -> Tensor:
    return _core.log_softmax(input, dim)


def softplus(input: Tensor) -> Tensor:
    return _core.softplus(input)


def logsigmoid(input: Tensor) -> Tensor:
    return _core.logsigmoid(input)


def cross_entropy(input: Tensor, target: Tensor, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """input (N, C) logits, target (N) i64 class indices."""
    if label_smoothing != 0.0:
        raise Error(f"cross_entropy: label_smoothing={label_smoothing} is not supported")
    return _core.cross_entropy(input, target, ignore_index, reduction)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, *,
            generator: Generator | None = None) -> Tensor:
    """Counter-based dropout: a checkpointed region replays its mask exactly."""
    return _core.dropout(input, p, generator=generator, training=training)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, *,
                                 generator: Generator | None = None) -> Tensor:
    """softmax(scale q k^T + causal mask) v with the fused kernel; (B, H, T, D)."""
    if attn_mask is not None:
        raise Error("scaled_dot_product_attention: attn_mask is not supported; reprise's kernel "
                    "takes is_causal (and a sliding window through ops.AttentionOptions)")
    return _core.scaled_dot_product_attention(query, key, value, causal=is_causal, scale=scale,
                                              dropout_p=dropout_p, generator=generator)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    return _core.one_hot(tensor, num_classes)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    return _core.pad(input, pad, mode, value)


def embedding(input: Tensor, weight: Tensor) -> Tensor:
    """Rows of weight (V, C) at the ids of input (...) -> (..., C)."""
    return _core.embedding(weight, input)
