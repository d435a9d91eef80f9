"""Tensors from Python: creation, dtypes and devices both ways, zero-copy
exchange through DLPack with NumPy and PyTorch, indexing, and errors."""

from __future__ import annotations

import numpy as np
import pytest

import reprise
from conftest import needs_torch


def test_dtype_spellings_map_both_ways():
    for spelling in ("f32", "float32", np.float32, np.dtype("float32"), reprise.float32):
        assert reprise.as_dtype(spelling) == reprise.DType.f32
    assert reprise.as_dtype("bf16") == reprise.DType.bf16
    assert reprise.as_dtype(np.int64) == reprise.DType.i64
    assert reprise.as_dtype(np.bool_) == reprise.DType.boolean
    for d in (reprise.float32, reprise.float64, reprise.float16, reprise.int32, reprise.int64,
              reprise.bool_):
        assert reprise.as_dtype(reprise.numpy_dtype(d)) == d
    with pytest.raises(reprise.Error, match="not a dtype"):
        reprise.as_dtype("float8")
    with pytest.raises(reprise.Error, match="not a dtype"):
        reprise.as_dtype(float)  # ambiguous: NumPy reads float64, PyTorch float32


def test_device_spellings():
    assert reprise.Device("cpu") == reprise.Device.cpu()
    assert reprise.Device("cuda:2") == reprise.Device.cuda(2)
    assert str(reprise.Device("cuda")) == "cuda:0"
    assert reprise.Device("cuda:1").type == "cuda" and reprise.Device("cuda:1").index == 1
    with pytest.raises(reprise.Error, match="not a device"):
        reprise.Device("tpu")


def test_creation_and_metadata():
    t = reprise.zeros((2, 3), dtype="f64")
    assert t.shape == (2, 3) and t.dtype == reprise.float64 and t.device == reprise.Device("cpu")
    assert t.strides == (3, 1) and t.numel() == 6 and t.ndim == 2 and len(t) == 2
    assert reprise.full([4], 2.5).tolist() == [2.5] * 4
    assert reprise.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert reprise.tensor([1.5, 2.0]).dtype == reprise.float32  # Python floats: f32, as torch
    assert reprise.tensor(np.array([1.5])).dtype == reprise.float64  # arrays keep theirs
    assert reprise.tensor([[1, 2]]).dtype == reprise.int64
    assert reprise.scalar(3.0).item() == 3.0
    assert "f32[2, 2] cpu" in repr(reprise.ones((2, 2)))


def test_numpy_to_reprise_shares_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = reprise.from_dlpack(a)
    assert t.data_ptr() == a.ctypes.data
    assert t.shape == (3, 4) and t.dtype == reprise.float32
    a[1, 2] = -7.0  # a write on either side shows on the other
    assert t[1, 2].item() == -7.0
    t.fill_(1.0)
    assert a.sum() == 12.0


def test_reprise_to_numpy_shares_memory_and_outlives_the_tensor():
    t = reprise.arange(6, dtype="f64").reshape(2, 3)
    a = t.numpy()
    assert a.ctypes.data == t.data_ptr()
    b = np.from_dlpack(t)  # through __dlpack__
    assert b.ctypes.data == t.data_ptr()
    del t  # the arrays keep the storage alive
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.asarray(b).sum() == 15


def test_strided_views_round_trip_without_copies():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]  # strides (12, 2) elements
    t = reprise.from_dlpack(a)
    assert t.strides == (12, 2) and t.data_ptr() == a.ctypes.data
    back = np.from_dlpack(t)
    assert back.ctypes.data == a.ctypes.data and back.strides == a.strides
    np.testing.assert_array_equal(back, a)
    broadcast = reprise.from_dlpack(np.broadcast_to(np.float32(3), (2, 5)).copy())
    assert broadcast.tolist() == [[3.0] * 5] * 2


def test_dlpack_round_trip_is_the_same_pointer_for_every_dtype():
    for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_):
        a = np.ones((3, 2), dtype=dtype)
        t = reprise.from_dlpack(a)
        assert np.from_dlpack(t).ctypes.data == a.ctypes.data
        assert t.__dlpack_device__() == (1, 0)


def test_bad_arrays_raise_reprise_errors():
    with pytest.raises(reprise.Error, match="uint8"):
        reprise.from_dlpack(np.zeros(3, dtype=np.uint8))
    with pytest.raises(reprise.Error, match="negative strides"):
        reprise.from_dlpack(np.arange(4.0)[::-1])
    readonly = np.zeros(3)
    readonly.flags.writeable = False
    with pytest.raises(reprise.Error, match="read-only"):
        reprise.from_dlpack(readonly)
    with pytest.raises(reprise.Error, match="__dlpack__"):
        reprise.from_dlpack(object())
    with pytest.raises(reprise.Error, match="bfloat16"):
        reprise.zeros(2, dtype="bf16").numpy()


def test_op_errors_carry_reprise_messages():
    a, b = reprise.ones((2, 3)), reprise.ones((2, 3), dtype="f64")
    with pytest.raises(reprise.Error, match=r"f32.*f64|f64.*f32"):
        a + b
    with pytest.raises(reprise.Error, match=r"\[2, 3\].*\[4, 5\]|\[4, 5\].*\[2, 3\]"):
        a @ reprise.ones((4, 5))
    with pytest.raises(reprise.Error, match="cuda"):
        a.to("cuda:0") if not reprise.built_with_cuda() else a.to("cuda:99")
    with pytest.raises(reprise.Error):
        reprise.ones((2,), dtype="i64").exp()
    assert issubclass(reprise.Error, RuntimeError)


def test_indexing_is_differentiable():
    x = reprise.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    y = x[1, :, 1::2]
    assert y.shape == (3, 2)
    assert y.tolist() == [[13.0, 15.0], [17.0, 19.0], [21.0, 23.0]]
    assert x[..., 0].shape == (2, 3) and x[None, 0].shape == (1, 3, 4)
    y.sum().backward()
    g = x.grad.numpy()
    assert g.sum() == 6 and g[1, 0, 1] == 1 and g[0].sum() == 0
    with pytest.raises(IndexError):
        x[2]
    assert [row.shape for row in x] == [(3, 4), (3, 4)]


def test_operators_and_scalars():
    x = reprise.tensor([1.0, 2.0, 4.0])
    np.testing.assert_array_equal((x + 1).numpy(), [2, 3, 5])
    np.testing.assert_array_equal((1 - x).numpy(), [0, -1, -3])
    np.testing.assert_array_equal((x * x / 2).numpy(), [0.5, 2, 8])
    np.testing.assert_array_equal((2 / x).numpy(), [2, 1, 0.5])
    np.testing.assert_array_equal((x**2).numpy(), [1, 4, 16])
    assert float(x.sum()) == 7.0 and int(x.max(0)[1]) == 2


@needs_torch
def test_torch_round_trip_shares_memory():
    import torch

    t = torch.arange(10, dtype=torch.float32).reshape(2, 5)
    r = reprise.from_dlpack(t)
    assert r.data_ptr() == t.data_ptr() and r.shape == (2, 5)
    back = r.torch()
    assert back.data_ptr() == t.data_ptr() and back.dtype == torch.float32
    bf = torch.ones(3, dtype=torch.bfloat16)
    rb = reprise.from_dlpack(bf)
    assert rb.dtype == reprise.bfloat16 and rb.data_ptr() == bf.data_ptr()
    assert torch.from_dlpack(rb).data_ptr() == bf.data_ptr()
    assert reprise.torch_dtype(rb.dtype) == torch.bfloat16
    assert reprise.as_dtype(torch.int32) == reprise.int32
    assert reprise.as_device(torch.device("cpu")) == reprise.Device("cpu")
    assert reprise.torch_device("cuda:1") == torch.device("cuda", 1)
