"""Conversions between reprise's types and NumPy's and PyTorch's. NumPy
and PyTorch are imported when first needed: `import reprise` needs neither
(the stub generator imports it in the build's environment)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core import Tensor, as_device, as_dtype, from_dlpack

if TYPE_CHECKING:
    import numpy


def numpy_dtype(dtype: Any) -> numpy.dtype:
    """The NumPy dtype of a reprise dtype (bf16 has none)."""
    import numpy as np

    d = as_dtype(dtype).name
    if d == "bf16":
        raise TypeError("NumPy has no bfloat16")
    return np.dtype({"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
                     "i64": np.int64, "boolean": np.bool_}[d])


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
    import numpy as np

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
