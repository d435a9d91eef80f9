// reprise.Tensor, DType and Device, and the exchange of tensors with NumPy,
// PyTorch and any DLPack library: from_dlpack() and __dlpack__() share
// memory (the same data pointer), .numpy() and .torch() are views too.

#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/variant.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/backward.h"
#include "autograd/node.h"
#include "engine/grad_mode.h"
#include "engine/storage.h"
#include "ops/cast.h"
#include "ops/indexing.h"
#include "ops/shape.h"
#include "ops/views.h"
#include "python/src/bind.h"

namespace reprise::python {

// ---- dtypes and devices ------------------------------------------------------

namespace {

struct DTypeName {
  const char* name;
  DType dtype;
};
// Every spelling parse_dtype accepts, reprise's own first.
constexpr std::array<DTypeName, 16> kDTypeNames{{
    {"f32", DType::f32},
    {"f64", DType::f64},
    {"bf16", DType::bf16},
    {"f16", DType::f16},
    {"i32", DType::i32},
    {"i64", DType::i64},
    {"boolean", DType::boolean},
    {"float32", DType::f32},
    {"float64", DType::f64},
    {"bfloat16", DType::bf16},
    {"float16", DType::f16},
    {"int32", DType::i32},
    {"int64", DType::i64},
    {"bool", DType::boolean},
    {"float", DType::f32},
    {"double", DType::f64},
}};

}  // namespace

DType parse_dtype(nb::handle h) {
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  // numpy.float32 and other type objects name themselves by __name__;
  // numpy.dtype and torch.dtype by str() ("float32", "torch.float32").
  std::string text = PyType_Check(h.ptr()) ? nb::cast<std::string>(h.attr("__name__"))
                                           : nb::cast<std::string>(nb::str(h));
  if (text.rfind("torch.", 0) == 0) text = text.substr(6);
  // A Python type such as `float` is ambiguous (NumPy reads float64,
  // PyTorch float32): only numpy's scalar types are taken by name.
  const bool builtin_type =
      PyType_Check(h.ptr()) && nb::cast<std::string>(h.attr("__module__")) == "builtins";
  if (!builtin_type) {
    for (const DTypeName& n : kDTypeNames) {
      if (text == n.name) return n.dtype;
    }
  }
  REPRISE_FAIL("not a dtype: ", nb::cast<std::string>(nb::repr(h)),
               " (expected a reprise.DType, or a name such as 'f32', 'float32', 'bf16', "
               "'int64', 'bool', a numpy dtype or a torch dtype)");
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    int index = 0;
    for (char c : text.substr(5)) {
      REPRISE_CHECK(c >= '0' && c <= '9' && index < 100000, "not a device: '", text, "'");
      index = index * 10 + (c - '0');
    }
    return Device::cuda(index);
  }
  REPRISE_FAIL("not a device: '", text, "' (expected 'cpu', 'cuda' or 'cuda:N')");
}

namespace {
bool is_torch_device(nb::handle h) {
  nb::handle type = h.type();
  return nb::cast<std::string>(type.attr("__module__")) == "torch" &&
         nb::cast<std::string>(type.attr("__name__")) == "device";
}
}  // namespace

Device parse_device(nb::handle h) {
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  // str(torch.device("cuda", 1)) is "cuda:1".
  if (nb::isinstance<nb::str>(h) || is_torch_device(h)) {
    return parse_device(nb::cast<std::string>(nb::str(h)));
  }
  REPRISE_FAIL("not a device: ", nb::cast<std::string>(nb::repr(h)),
               " (expected a reprise.Device, 'cpu', 'cuda:N' or a torch.device)");
}

std::string device_string(Device d) { return to_string(d); }

DType DTypeLike::get() const {
  if (!parsed) throw Error(error);
  return *parsed;
}

Device DeviceLike::get() const {
  if (!parsed) throw Error(error);
  return *parsed;
}

Shape shape_arg(nb::handle h) {
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  Shape shape;
  for (nb::handle d : h) shape.push_back(nb::cast<int64_t>(d));
  return shape;
}

// ---- DLPack --------------------------------------------------------------------

namespace {

nb::dlpack::dtype dl_dtype(DType t) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code code, int bits) {
    return nb::dlpack::dtype{uint8_t(code), uint8_t(bits), uint16_t(1)};
  };
  switch (t) {
    case DType::f32:
      return make(Code::Float, 32);
    case DType::f64:
      return make(Code::Float, 64);
    case DType::bf16:
      return make(Code::Bfloat, 16);
    case DType::f16:
      return make(Code::Float, 16);
    case DType::i32:
      return make(Code::Int, 32);
    case DType::i64:
      return make(Code::Int, 64);
    case DType::boolean:
      return make(Code::Bool, 8);
  }
  REPRISE_FAIL("__dlpack__: unknown dtype");
}

DType from_dl_dtype(nb::dlpack::dtype d) {
  using Code = nb::dlpack::dtype_code;
  for (DType t :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::boolean}) {
    if (dl_dtype(t) == d) return t;
  }
  const char* kind = d.code == uint8_t(Code::UInt)      ? "uint"
                     : d.code == uint8_t(Code::Int)     ? "int"
                     : d.code == uint8_t(Code::Float)   ? "float"
                     : d.code == uint8_t(Code::Complex) ? "complex"
                                                        : "code ";
  REPRISE_FAIL("from_dlpack: reprise has no dtype for ", kind,
               d.code > uint8_t(Code::Complex) ? std::to_string(d.code) : "", int(d.bits),
               d.lanes != 1 ? " with lanes" : "",
               " (reprise has f32, f64, bf16, f16, i32, i64 and bool); convert the array first");
}

constexpr int kDLCPU = nb::device::cpu::value;
constexpr int kDLCUDA = nb::device::cuda::value;

// The tensor as an nb::ndarray of `Framework`, sharing its memory. The
// ndarray's owner holds the storage alone, not the tensor, so a NumPy view
// does not keep an autograd graph alive.
template <class Framework>
nb::ndarray<Framework> export_ndarray(const Tensor& t) {
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<Storage>*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return nb::ndarray<Framework>(t.raw_data(), size_t(t.dim()), shape.data(), owner,
                                t.strides().data(), dl_dtype(t.dtype()),
                                t.device().is_cpu() ? kDLCPU : kDLCUDA, t.device().index());
}

// Drops an imported array's reference to its producer, which needs the GIL
// (a storage may die on any thread, with or without it). After the
// interpreter has gone the producer has too, and nothing is left to drop.
void release_imported(nb::ndarray<>* array) noexcept {
  if (!nb::is_alive()) return;
  nb::gil_scoped_acquire gil;
  delete array;
}

}  // namespace

Tensor from_dlpack(nb::handle obj) {
  nb::ndarray<> array;
  if (!nb::try_cast(obj, array, false)) {
    nb::ndarray<nb::ro> readonly;
    REPRISE_CHECK(!nb::try_cast(obj, readonly, false),
                  "from_dlpack: ", nb::cast<std::string>(nb::repr(nb::type_name(obj.type()))),
                  " is read-only, and reprise tensors are writable: pass a writable array or "
                  "a copy");
    REPRISE_FAIL("from_dlpack: cannot import a ", nb::cast<std::string>(nb::type_name(obj.type())),
                 ": it has neither __dlpack__ nor the buffer protocol");
  }
  const DType dtype = from_dl_dtype(array.dtype());
  Device device;
  if (array.device_type() == kDLCPU) {
    device = Device::cpu();
  } else if (array.device_type() == kDLCUDA) {
    REPRISE_CHECK(built_with_cuda(), "from_dlpack: a CUDA array (device cuda:", array.device_id(),
                  "), but this build of reprise has no CUDA backend");
    device = Device::cuda(array.device_id());
  } else {
    REPRISE_FAIL("from_dlpack: DLPack device type ", array.device_type(),
                 " is neither CPU (1) nor CUDA (2)");
  }
  Shape shape(array.ndim()), strides(array.ndim());
  int64_t extent = 1;  // elements from the first to one past the last reached
  for (size_t d = 0; d < array.ndim(); ++d) {
    shape[d] = int64_t(array.shape(d));
    strides[d] = array.stride(d);
    REPRISE_CHECK(strides[d] >= 0, "from_dlpack: stride ", strides[d], " in dim ", d,
                  ": reprise tensors have no negative strides; pass a copy");
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) extent = 0;
  }
  for (size_t d = 0; d < shape.size() && extent > 0; ++d) extent += (shape[d] - 1) * strides[d];
  void* data = array.data();
  auto* held = new nb::ndarray<>(std::move(array));
  std::shared_ptr<Storage> storage = Storage::wrap(data, size_t(extent) * dtype_size(dtype), device,
                                                   [held] { release_imported(held); });
  NoGradGuard layout_only;  // as_strided is plumbing; the new leaf has no history
  return Tensor::from_storage(storage, {extent}, dtype).as_strided(shape, strides, 0);
}

// ---- indexing ----------------------------------------------------------------

namespace {

// The items of an index key: a tuple's, or the key itself.
std::vector<nb::handle> key_items(nb::handle key) {
  std::vector<nb::handle> items;
  if (nb::isinstance<nb::tuple>(key)) {
    for (nb::handle k : key) items.push_back(k);
  } else {
    items.push_back(key);
  }
  return items;
}

// t[key] for keys made of ints, slices with positive steps, None, one
// Ellipsis and integer tensors (torch's advanced indexing by one tensor:
// index_select along that dim, the index's shape in its place), recorded
// through ops:: so that it is differentiable.
Tensor index(const Tensor& t, nb::handle key) {
  const std::vector<nb::handle> items = key_items(key);
  int64_t consumed = 0;  // dims of t the key addresses
  for (nb::handle k : items) {
    if (!k.is_none() && k.ptr() != Py_Ellipsis) ++consumed;
  }
  REPRISE_CHECK(consumed <= t.dim(), "Tensor[]: ", consumed, " indices for ", t.describe());
  Tensor out = t;
  int64_t dim = 0;  // current dim of `out`
  for (nb::handle k : items) {
    if (k.ptr() == Py_Ellipsis) {
      dim += t.dim() - consumed;
    } else if (k.is_none()) {
      out = ops::unsqueeze(out, dim++);
    } else if (PySlice_Check(k.ptr())) {
      Py_ssize_t start, stop, step;
      REPRISE_CHECK(PySlice_Unpack(k.ptr(), &start, &stop, &step) == 0, "Tensor[]: bad slice");
      REPRISE_CHECK(step > 0, "Tensor[]: slice step ", step, " (reprise has positive steps only)");
      PySlice_AdjustIndices(out.size(dim), &start, &stop, step);
      out = ops::slice(out, dim++, start, std::max(start, stop), step);
    } else if (PyIndex_Check(k.ptr())) {
      int64_t i = nb::cast<int64_t>(nb::int_(k));
      const int64_t n = out.size(dim);
      if (i < -n || i >= n) {
        throw nb::index_error(("index " + std::to_string(i) + " is out of range for dim " +
                               std::to_string(dim) + " of " + t.describe())
                                  .c_str());
      }
      if (i < 0) i += n;
      out = ops::squeeze(ops::slice(out, dim, i, i + 1), dim);
    } else if (nb::isinstance<Tensor>(k)) {
      const Tensor ids = nb::cast<Tensor>(k);
      REPRISE_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32, "Tensor[]: index ",
                    ids.describe(), " of ", t.describe(),
                    ": expected integer indices (a bool mask selects a data-dependent number "
                    "of elements: use where or masked_fill)");
      Shape shape(out.shape().begin(), out.shape().begin() + dim);
      shape.insert(shape.end(), ids.shape().begin(), ids.shape().end());
      shape.insert(shape.end(), out.shape().begin() + dim + 1, out.shape().end());
      out = ops::reshape(ops::index_select(out, dim, ops::reshape(ids, {-1})), shape);
      dim += ids.dim();
    } else {
      REPRISE_FAIL("Tensor[]: index of type ", nb::cast<std::string>(nb::type_name(k.type())),
                   " (reprise indexes by int, slice, None, ... and integer tensors)");
    }
  }
  return out;
}

// t[key] = value, in place and not recorded (as torch's on a tensor that
// needs no gradient): a bool mask of t's shape (or one that broadcasts to
// it) writes value where it is true; any key of ints, slices, None and
// ... writes value (a scalar or a tensor that broadcasts) into that view.
void assign(Tensor& t, nb::handle key, const std::variant<Tensor, double>& value) {
  REPRISE_CHECK(!(t.requires_grad() && GradMode::enabled()), "Tensor[]=: ", t.describe(),
                " requires grad, and an assignment is not recorded; assign under "
                "reprise.no_grad(), or build the value with where or masked_fill");
  const std::vector<nb::handle> items = key_items(key);
  NoGradGuard no_grad;
  if (items.size() == 1 && nb::isinstance<Tensor>(items[0]) &&
      nb::cast<Tensor>(items[0]).dtype() == DType::boolean) {
    const Tensor mask = nb::cast<Tensor>(items[0]);
    const Tensor filled = std::holds_alternative<double>(value)
                              ? ops::masked_fill(t, mask, std::get<double>(value))
                              : ops::where(mask, std::get<Tensor>(value), t);
    t.copy_(filled);
    return;
  }
  for (nb::handle k : items) {
    REPRISE_CHECK(!nb::isinstance<Tensor>(k), "Tensor[]=: assignment through a tensor index ",
                  nb::cast<Tensor>(k).describe(), " into ", t.describe(),
                  " is not supported (a bool mask is; for integer indices use index_add or "
                  "scatter_add)");
  }
  Tensor view = index(t, key);
  if (const double* v = std::get_if<double>(&value)) {
    view.fill_(*v);
  } else {
    view.copy_(std::get<Tensor>(value));
  }
}

nb::object item(const Tensor& t) {
  REPRISE_CHECK(t.numel() == 1, "Tensor.item: expected one element, got ", t.describe());
  if (is_floating(t.dtype())) return nb::float_(t.item<double>());
  if (t.dtype() == DType::boolean) return nb::bool_(t.item<bool>());
  return nb::int_(t.item<int64_t>());
}

// A host tensor NumPy can read: bf16 has no NumPy dtype and goes through f32.
Tensor host_readable(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return h.dtype() == DType::bf16 ? h.to(DType::f32) : h;
}

nb::object numpy_view(const Tensor& t) {
  REPRISE_CHECK(t.device().is_cpu(), "Tensor.numpy: ", t.describe(),
                " is not on the CPU; copy it with .to('cpu') first");
  REPRISE_CHECK(t.dtype() != DType::bf16, "Tensor.numpy: NumPy has no bfloat16 (", t.describe(),
                "); cast to f32 first, or use .torch()");
  return export_ndarray<nb::numpy>(t).cast();
}

std::string repr(const Tensor& t) {
  std::string out = "reprise.Tensor(" + t.describe();
  if (t.requires_grad())
    out += t.is_leaf() ? ", requires_grad" : ", grad_fn=" + std::string(t.grad_fn()->name());
  out += ")";
  if (t.numel() <= 1000) {
    nb::object np = nb::module_::import_("numpy");
    out += "\n" + nb::cast<std::string>(np.attr("array2string")(numpy_view(host_readable(t)),
                                                                nb::arg("separator") = ", "));
  }
  return out;
}

}  // namespace

// ---- bindings ----------------------------------------------------------------

namespace {
void bind_tensor_class(nb::module_& m, nb::class_<Tensor>& cls);
}  // namespace

void bind_tensor(nb::module_& m) {
  nb::enum_<DType>(m, "DType", "Element types; reprise.float32 and friends name them too.")
      .value("f32", DType::f32)
      .value("f64", DType::f64)
      .value("bf16", DType::bf16)
      .value("f16", DType::f16)
      .value("i32", DType::i32)
      .value("i64", DType::i64)
      .value("boolean", DType::boolean);
  m.def(
      "as_dtype", [](DTypeLike d) { return d.get(); }, nb::arg("dtype"),
      "The reprise.DType of any spelling: 'float32', numpy.float32, torch.float32, ...");
  m.def("dtype_size", &dtype_size, nb::arg("dtype"), "Bytes per element.");
  m.def("is_floating", &is_floating, nb::arg("dtype"), "True for f32, f64, bf16 and f16.");

  nb::class_<Device>(m, "Device", "Where a tensor lives: 'cpu' or 'cuda:N'.")
      .def(
          "__init__", [](Device* d, DeviceLike spec) { new (d) Device(spec.get()); },
          nb::arg("spec"), "Device('cpu'), Device('cuda:1'), Device(torch.device('cuda'))")
      .def_static("cpu", &Device::cpu)
      .def_static("cuda", &Device::cuda, nb::arg("index") = 0)
      .def_prop_ro(
          "type", [](Device d) { return d.is_cpu() ? "cpu" : "cuda"; },
          "'cpu' or 'cuda', as torch.device.type")
      .def_prop_ro("index", &Device::index)
      .def("__eq__", [](Device a, Device b) { return a == b; })
      .def("__hash__", [](Device d) { return int(d.kind()) * 65536 + d.index(); })
      .def("__str__", &device_string)
      .def("__repr__", [](Device d) { return "reprise.Device('" + device_string(d) + "')"; });
  m.def(
      "as_device", [](DeviceLike d) { return d.get(); }, nb::arg("device"),
      "The reprise.Device of 'cpu', 'cuda:1', a torch.device, ...");
  m.def("built_with_cuda", &built_with_cuda, "Whether this build carries the CUDA backend.");

  nb::class_<autograd::Node>(m, "Node",
                             "A recorded op on the tape (a tensor's grad_fn): its op, scope, "
                             "and the nodes its gradients flow to.")
      .def_prop_ro("name", [](const autograd::Node& n) { return std::string(n.name()); })
      .def_prop_ro("scope", &autograd::Node::scope)
      .def_prop_ro("sequence_nr", &autograd::Node::sequence_nr)
      .def_prop_ro("is_random", [](const autograd::Node& n) { return n.rng.has_value(); })
      .def_prop_ro("flops", [](const autograd::Node& n) { return n.flops; })
      .def_prop_ro(
          "saved_tensors", [](const autograd::Node& n) { return n.saved.size(); },
          "How many tensors it keeps for backward.")
      .def_prop_ro(
          "next_functions",
          [](const autograd::Node& n) {
            std::vector<std::pair<std::shared_ptr<autograd::Node>, uint32_t>> out;
            for (const autograd::Edge& e : n.next_edges) out.emplace_back(e.node, e.input_nr);
            return out;
          },
          "(node or None, input number) per input, as torch's grad_fn.next_functions.")
      .def("__repr__", [](const autograd::Node& n) { return "<reprise.Node " + n.where() + ">"; });

  nb::class_<Tensor> cls(m, "Tensor",
                         "An n-dimensional array on a device, with autograd fields. Create "
                         "one with reprise.tensor, zeros, from_dlpack, ...; ops are methods "
                         "and module functions.");
  bind_tensor_class(m, cls);
  bind_ops(m, cls);
}

namespace {

using nb::arg;

// Shape, layout and elements, and the Python protocols that read them.
void bind_tensor_properties(nb::class_<Tensor>& cls) {
  cls.def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def_prop_ro(
          "strides", [](const Tensor& t) { return nb::tuple(nb::cast(t.strides())); },
          "In elements, as DLPack's.")
      .def_prop_ro("ndim", &Tensor::dim)
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", &Tensor::device)
      .def_prop_ro("offset", &Tensor::offset, "Of the first element in its storage, in elements.")
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def_prop_ro("version", &Tensor::version,
                   "The storage's version counter; in-place writes bump it.")
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
            if (d) return nb::int_(t.size(*d));
            return nb::tuple(nb::cast(t.shape()));
          },
          arg("dim") = nb::none())
      .def("stride", &Tensor::stride, arg("dim"))
      .def("element_size", &Tensor::element_size)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def(
          "data_ptr", [](const Tensor& t) { return uintptr_t(t.raw_data()); },
          "Address of the first element (the DLPack data pointer plus offset).")
      .def("describe", &Tensor::describe, "'f32[3, 5] cpu'")
      .def("__repr__", &repr)
      .def("__len__",
           [](const Tensor& t) {
             REPRISE_CHECK(t.dim() > 0, "len() of a 0-d tensor ", t.describe());
             return t.size(0);
           })
      .def("__bool__", [](const Tensor& t) { return nb::cast<bool>(item(t)); })
      .def("__float__", [](const Tensor& t) { return nb::cast<double>(nb::float_(item(t))); })
      .def("__int__", [](const Tensor& t) { return nb::cast<int64_t>(nb::int_(item(t))); })
      .def("__getitem__", &index, arg("key"))
      .def("__setitem__", &assign, arg("key"), arg("value"),
           "t[key] = value in place, not recorded: a view by ints, slices, None and ..., or a "
           "bool mask.")
      .def("item", &item, "The one element as a Python float, int or bool.")
      .def("tolist", [](const Tensor& t) { return numpy_view(host_readable(t)).attr("tolist")(); });
}

// Views of the tensor's memory for NumPy, PyTorch and DLPack consumers.
void bind_tensor_exchange(nb::class_<Tensor>& cls) {
  cls.def("numpy", &numpy_view,
          "A NumPy array sharing this tensor's memory (CPU tensors; bf16 has no NumPy dtype). "
          "Writes through it are not seen by the version counter.")
      .def(
          "torch", [](const Tensor& t) { return export_ndarray<nb::pytorch>(t).cast(); },
          "A torch.Tensor sharing this tensor's memory (through DLPack).")
      .def(
          "__dlpack__",
          [](const Tensor& t, nb::kwargs kwargs) {
            return export_ndarray<nb::array_api>(t).cast().attr("__dlpack__")(**kwargs);
          },
          "DLPack capsule sharing this tensor's memory. stream, max_version, dl_device and "
          "copy=False are accepted; stream is not used (reprise does not order its CUDA work "
          "after a consumer's stream)")
      .def("__dlpack_device__",
           [](const Tensor& t) {
             return nb::make_tuple(t.device().is_cpu() ? kDLCPU : kDLCUDA, t.device().index());
           })
      .def(
          "__array__",
          [](const Tensor& t, nb::object dtype, nb::object copy) {
            nb::object a = numpy_view(host_readable(t));
            if (!dtype.is_none()) a = a.attr("astype")(dtype);
            if (!copy.is_none() && nb::cast<bool>(copy)) a = a.attr("copy")();
            return a;
          },
          arg("dtype") = nb::none(), arg("copy") = nb::none());
}

// Copies, conversions and in-place writes.
void bind_tensor_copies(nb::class_<Tensor>& cls) {
  cls.def("detach", &Tensor::detach, "The same data without history; requires_grad False.")
      .def("clone", &Tensor::clone, "A contiguous copy (not recorded).")
      .def(
          "cpu", [](const Tensor& t) { return t.to(Device::cpu()); },
          "This tensor when on the CPU, else a copy there (not recorded).")
      .def(
          "to",
          [](const Tensor& t, nb::handle target) {
            const bool device_name = nb::isinstance<nb::str>(target) &&
                                     (nb::cast<std::string>(target).rfind("cpu", 0) == 0 ||
                                      nb::cast<std::string>(target).rfind("cuda", 0) == 0);
            if (device_name || nb::isinstance<Device>(target) || is_torch_device(target)) {
              return t.to(parse_device(target));
            }
            return ops::cast(t, parse_dtype(target));
          },
          arg("target"),
          "to(dtype) is ops.cast (differentiable between floating dtypes); to(device) copies "
          "to another device (not recorded).")
      // Conversions under torch's names.
      .def("float", [](const Tensor& t) { return ops::cast(t, DType::f32); })
      .def("double", [](const Tensor& t) { return ops::cast(t, DType::f64); })
      .def("half", [](const Tensor& t) { return ops::cast(t, DType::f16); })
      .def("bfloat16", [](const Tensor& t) { return ops::cast(t, DType::bf16); })
      .def("int", [](const Tensor& t) { return ops::cast(t, DType::i32); })
      .def("long", [](const Tensor& t) { return ops::cast(t, DType::i64); })
      .def("bool", [](const Tensor& t) { return ops::cast(t, DType::boolean); })
      // In-place writes.
      .def(
          "fill_", [](Tensor& t, double v) -> Tensor& { return t.fill_(v); }, arg("value"),
          nb::rv_policy::reference)
      .def(
          "zero_", [](Tensor& t) -> Tensor& { return t.zero_(); }, nb::rv_policy::reference)
      .def(
          "copy_", [](Tensor& t, const Tensor& src) -> Tensor& { return t.copy_(src); }, arg("src"),
          nb::rv_policy::reference, "Copies src (broadcast, converted) into this tensor.");
}

void bind_tensor_autograd(nb::class_<Tensor>& cls) {
  cls.def_prop_rw(
         "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
         [](Tensor& t, bool on) { t.requires_grad(on); })
      .def(
          "requires_grad_", [](Tensor& t, bool on) -> Tensor& { return t.requires_grad(on); },
          arg("requires_grad") = true, nb::rv_policy::reference)
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro(
          "grad_fn", [](const Tensor& t) -> std::shared_ptr<autograd::Node> { return t.grad_fn(); },
          "The node that produced this tensor, or None for a leaf.")
      .def_prop_rw(
          "grad", [](const Tensor& t) { return tensor_or_none(t.grad()); },
          [](Tensor& t, std::optional<Tensor> g) { t.set_grad(tensor_or_undefined(g)); },
          nb::arg("grad").none(), "The accumulated gradient, or None.")
      .def(
          "backward",
          [](const Tensor& t, std::optional<Tensor> grad, bool retain_graph) {
            {
              nb::gil_scoped_release released;
              autograd::backward(t, tensor_or_undefined(grad), {.retain_graph = retain_graph});
            }
          },
          arg("grad") = nb::none(), arg("retain_graph") = false,
          "reprise.backward(self, grad, retain_graph).");
}

// Tensors from DLPack arrays, and the factories: empty, zeros, full, ...
void bind_tensor_creation(nb::module_& m) {
  m.def("from_dlpack", &from_dlpack, arg("array"),
        "A tensor sharing the memory of any DLPack or buffer-protocol array (NumPy, PyTorch, "
        "JAX, CuPy, ...): same data pointer, shape and strides, the array kept alive as long as "
        "the tensor. Raises reprise.Error for dtypes reprise lacks (uint8, complex, ...), "
        "negative strides, read-only arrays and devices other than CPU and (in CUDA builds) "
        "CUDA.");

  // zeros(2, 3) or zeros((2, 3)), as torch takes a shape.
  auto creation = [&](const char* name, auto make, const char* doc) {
    m.def(
        name,
        [make](nb::args shape, DTypeLike dtype, DeviceLike device, bool requires_grad) {
          const bool one = shape.size() == 1 && !PyLong_Check(shape[0].ptr());
          Tensor t = make(one ? shape_arg(shape[0]) : shape_arg(shape), dtype.get(), device.get());
          if (requires_grad) t.requires_grad(true);
          return t;
        },
        arg("shape"), arg("dtype") = DType::f32, arg("device") = Device::cpu(),
        arg("requires_grad") = false, doc);
    // zeros_like(x): x's shape, and its dtype and device unless given.
    m.def((std::string(name) + "_like").c_str(),
          [make](const Tensor& x, std::optional<DTypeLike> dtype, std::optional<DeviceLike> device,
                 bool requires_grad) {
            Tensor t = make(x.shape(), dtype ? dtype->get() : x.dtype(),
                            device ? device->get() : x.device());
            if (requires_grad) t.requires_grad(true);
            return t;
          },
          arg("x"), nb::kw_only(), arg("dtype") = nb::none(), arg("device") = nb::none(),
          arg("requires_grad") = false);
  };
  creation(
      "empty", [](const Shape& s, DType d, Device v) { return Tensor::empty(s, d, v); },
      "Uninitialised.");
  creation(
      "zeros", [](const Shape& s, DType d, Device v) { return Tensor::zeros(s, d, v); }, "");
  creation(
      "ones", [](const Shape& s, DType d, Device v) { return Tensor::ones(s, d, v); }, "");
  m.def(
      "full",
      [](ShapeLike shape, double value, DTypeLike dtype, DeviceLike device, bool requires_grad) {
        Tensor t = Tensor::full(shape.value, value, dtype.get(), device.get());
        if (requires_grad) t.requires_grad(true);
        return t;
      },
      arg("shape"), arg("value"), nb::kw_only(), arg("dtype") = DType::f32,
      arg("device") = Device::cpu(), arg("requires_grad") = false);
  m.def(
      "scalar", [](double v, DTypeLike dtype) { return Tensor::scalar(v, dtype.get()); },
      arg("value"), arg("dtype") = DType::f32, "A 0-d CPU tensor.");
  m.def(
      "full_like",
      [](const Tensor& x, double value, std::optional<DTypeLike> dtype,
         std::optional<DeviceLike> device, bool requires_grad) {
        Tensor t = Tensor::full(x.shape(), value, dtype ? dtype->get() : x.dtype(),
                                device ? device->get() : x.device());
        if (requires_grad) t.requires_grad(true);
        return t;
      },
      arg("x"), arg("value"), nb::kw_only(), arg("dtype") = nb::none(), arg("device") = nb::none(),
      arg("requires_grad") = false);
  m.def(
      "arange",
      [](double start, std::optional<double> end, double step, std::optional<DTypeLike> dtype,
         DeviceLike device) {
        if (!end) std::swap(start, end.emplace(0.0));  // arange(n): 0 .. n - 1
        REPRISE_CHECK(
            step != 0 && std::isfinite(start) && std::isfinite(*end) && std::isfinite(step),
            "arange: start ", start, ", end ", *end, ", step ", step,
            ": expected finite values and a nonzero step");
        const double count = std::ceil((*end - start) / step);
        REPRISE_CHECK(count < double(int64_t(1) << 40), "arange: ", count, " elements is too many");
        std::vector<double> values(size_t(std::max(count, 0.0)));
        for (size_t i = 0; i < values.size(); ++i) values[i] = start + double(i) * step;
        // Integers when every argument is one, as torch.
        const bool integral =
            start == std::trunc(start) && *end == std::trunc(*end) && step == std::trunc(step);
        const DType type = dtype ? dtype->get() : integral ? DType::i64 : DType::f32;
        const Tensor t = Tensor::from_vector(values, {int64_t(values.size())});
        return ops::cast(t, type).to(device.get());
      },
      arg("start"), arg("end") = nb::none(), arg("step") = 1.0, nb::kw_only(),
      arg("dtype") = nb::none(), arg("device") = Device::cpu(),
      "start, start + step, ... below end (arange(n): 0 .. n - 1); i64 when every argument "
      "is an integer, else f32, unless dtype says.");
}

void bind_tensor_class(nb::module_& m, nb::class_<Tensor>& cls) {
  bind_tensor_properties(cls);
  bind_tensor_exchange(cls);
  bind_tensor_copies(cls);
  bind_tensor_autograd(cls);
  bind_tensor_creation(m);
}

}  // namespace

}  // namespace reprise::python
