"""Conversions between reprise's types and NumPy's and PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._core import DType, Tensor, as_device, as_dtype, from_dlpack

_NUMPY = {
    DType.f32: np.float32,
    DType.f64: np.float64,
    DType.f16: np.float16,
    DType.i32: np.int32,
    DType.i64: np.int64,
    DType.boolean: np.bool_,
}


def numpy_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of a reprise dtype (bf16 has none)."""
    d = as_dtype(dtype)
    if d not in _NUMPY:
        raise TypeError(f"NumPy has no dtype for {d.name}")
    return np.dtype(_NUMPY[d])


def torch_dtype(dtype: Any) -> Any:
    """The torch.dtype of a reprise dtype."""
    import torch

    return getattr(torch, {"f32": "float32", "f64": "float64", "bf16": "bfloat16",
                           "f16": "float16", "i32": "int32", "i64": "int64",
                           "boolean": "bool"}[as_dtype(dtype).name])


def torch_device(device: Any) -> Any:
    """The torch.device of a reprise device."""
    import torch

    return torch.device(str(as_device(device)))


def tensor(
    data: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A new tensor holding a copy of `data`: a NumPy or PyTorch array, any
    DLPack array, or nested lists of numbers. Python floats become f32 and
    ints i64 (as in PyTorch); arrays keep their dtype unless `dtype` says
    otherwise. Use from_dlpack to share memory instead of copying."""
    if hasattr(data, "__dlpack__") and not isinstance(data, np.ndarray):
        t = from_dlpack(data).clone()
    else:
        array = np.asarray(data)
        if not isinstance(data, np.ndarray) and array.dtype == np.float64:
            array = array.astype(np.float32)
        t = from_dlpack(np.ascontiguousarray(array).copy())
    if dtype is not None:
        t = t.cast(dtype)
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad = True
    return t
