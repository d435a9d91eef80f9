"""reprise.nn: the C++ models and their machinery (LlamaForCausalLM,
configs, checkpointing, optimizers, data, training), and for Python code
torch.nn's Module to subclass with its building blocks (_module.py,
_layers.py). These take the names Module, Linear, Embedding and RMSNorm;
the C++ classes of those names stay in reprise._core.nn, and their
instances count as instances of these."""

import sys

from ._core.nn import *  # noqa: F401,F403
from . import _functional as functional
from ._layers import (GELU, Dropout, Embedding, Identity, LayerNorm, Linear,  # noqa: F401
                      ReLU, RMSNorm, Sigmoid, SiLU, Softmax, Tanh)
from ._module import (IncompatibleKeys, Module, ModuleDict, ModuleList,  # noqa: F401
                      Parameter, Sequential, checkpoint)

# `import reprise.nn.functional as F` finds the module here: nn is one file,
# not a package.
sys.modules[__name__ + ".functional"] = functional
