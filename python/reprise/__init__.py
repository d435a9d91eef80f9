"""reprise from Python: tensors that share memory with NumPy and PyTorch,
the tape autograd, activation checkpointing with built-in or Python
policies, the recompute verifier and noise injection, counter-based RNG,
Llama and MoE models with Hugging Face names, optimizers and file formats.

    import reprise
    x = reprise.from_dlpack(numpy_array)          # zero-copy
    y = reprise.checkpoint("block", reprise.policies.full(), lambda: (x @ w).silu())
    reprise.backward(y.mean())
"""

from . import _core
from ._core import *  # noqa: F401,F403
from ._core import DType, Tensor, is_grad_enabled, set_grad_enabled
from ._interop import numpy_dtype, tensor, torch_device, torch_dtype
from ._grad import enable_grad, no_grad

# The * import bound io, nn and policies to _core's submodules, and `from .
# import` would keep those; the package's modules of these names (nn adds
# Python's Module and layers) take their place.
del io, nn, policies  # noqa: F405
from . import io, nn, optim, policies

__version__: str = _core.__version__

float32 = DType.f32
float64 = DType.f64
bfloat16 = DType.bf16
float16 = DType.f16
int32 = DType.i32
int64 = DType.i64
bool_ = DType.boolean
