// reprise._core: the extension module behind the `reprise` package. The
// package's __init__.py re-exports it; python/reprise/*.py add what is
// simpler in Python (no_grad as a decorator, conversions to NumPy and
// PyTorch types).

#include "base/error.h"
#include "python/src/bind.h"

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  using namespace reprise::python;
  m.doc() =
      "reprise's C++ engine: tensors, ops, the tape autograd with activation checkpointing, "
      "counter-based RNG, Llama and MoE modules, optimizers and file formats.";

  // reprise::Error carries the op, the shapes, dtypes and devices involved
  // and what was expected; Python sees it as reprise.Error with that text.
  m.attr("__version__") = REPRISE_VERSION;

  nb::exception<reprise::Error>(m, "Error", PyExc_RuntimeError);

  bind_tensor(m);  // with the ops: tensor methods
  bind_runtime(m);
  bind_autograd(m);
  nb::module_ nn = m.def_submodule("nn",
                                   "Modules with Hugging Face names, Llama and MoE, "
                                   "optimizers, data and training state.");
  bind_nn(nn);
  nb::module_ io = m.def_submodule("io", "safetensors files and tokenizers.");
  bind_io(io);
}
