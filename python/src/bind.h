#pragma once
// What the binding files (python/src/*.cpp) share: the argument types that
// accept Python's many spellings of a dtype, a device and a policy, the
// conversion of optional tensors, and one function per file that adds its
// part of reprise._core.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "autograd/policy.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/tensor.h"

namespace reprise::python {

namespace nb = nanobind;

// A dtype as Python code names it: reprise.DType.f32, "float32", "f32",
// numpy.float32, numpy.dtype("float32"), torch.float32. Any object converts;
// get() raises reprise.Error naming it when it names no dtype, so that a bad
// name reads as reprise's message rather than as a signature mismatch.
struct DTypeLike {
  std::optional<DType> parsed;
  std::string error;
  DType get() const;
};
// A device: reprise.Device, "cpu", "cuda", "cuda:1", torch.device("cuda:1").
struct DeviceLike {
  std::optional<Device> parsed;
  std::string error;
  Device get() const;
};
// A shape, or a list of dims: a sequence of ints, or one int.
struct ShapeLike {
  Shape value;
};
// A recompute policy: a reprise.Policy, or a Python callable taking a
// ValueInfo and returning a Decision or None (abstain).
struct PolicyLike {
  std::optional<autograd::Policy> value;  // set by the type caster
  const autograd::Policy& get() const { return *value; }
};

DType parse_dtype(nb::handle h);
Device parse_device(nb::handle h);
Device parse_device(std::string_view text);
std::string device_string(Device d);  // "cpu", "cuda:0"

// A Policy that asks the Python callable `fn`. Python errors raised by `fn`
// (or a return value that is not a Decision or None) never unwind through
// the tape: the value is saved instead, the callable is not asked again on
// this thread, and raise_pending_policy_error() raises the error once the
// C++ call that recorded the region has returned.
autograd::Policy python_policy(std::string name, nb::callable fn);
// Raises the error a Python policy deferred on this thread, if any.
void raise_pending_policy_error();
// Forgets a deferred error.
void clear_pending_policy_error();

// Runs `call`, C++ code that may record checkpoint regions, and returns its
// result; then raises the error a Python policy deferred meanwhile. An
// error of the call's own takes precedence (the deferred one is dropped).
template <class Call>
auto recording(Call&& call) {
  try {
    auto result = call();
    raise_pending_policy_error();
    return result;
  } catch (...) {
    clear_pending_policy_error();
    throw;
  }
}

// Undefined tensors are None in Python.
inline nb::object tensor_or_none(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }
inline Tensor tensor_or_undefined(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

Shape shape_arg(nb::handle h);  // a sequence of ints, or one int

// T(**kwargs) for config structs: a default T with the named fields set,
// through the same attribute setters Python code uses (an unknown name is
// an AttributeError).
template <class T>
void init_from_kwargs(T* self, const nb::kwargs& kwargs) {
  T value{};
  {
    nb::object view = nb::cast(&value, nb::rv_policy::reference);
    for (auto [key, v] : kwargs) nb::setattr(view, key, v);
  }
  new (self) T(std::move(value));
}

void bind_tensor(nb::module_& m);
// Module functions and their Tensor methods.
void bind_ops(nb::module_& m, nb::class_<Tensor>& cls);
void bind_autograd(nb::module_& m);
void bind_runtime(nb::module_& m);
void bind_nn(nb::module_& m);
void bind_training(nb::module_& m);  // the rest of reprise.nn
void bind_rollout(nb::module_& m);   // its rollouts and routing records
void bind_io(nb::module_& m);

}  // namespace reprise::python

namespace nanobind::detail {

// Parses with `parse`, keeping the error for Like::get().
template <class Like, class Parse>
bool parse_like(handle src, Like& value, Parse parse) noexcept {
  value.parsed.reset();
  try {
    value.parsed = parse(src);
  } catch (const std::exception& e) {
    value.error = e.what();
  } catch (...) {
    value.error = "unreadable argument";
  }
  return true;
}

template <>
struct type_caster<reprise::python::DTypeLike> {
  NB_TYPE_CASTER(reprise::python::DTypeLike,
                 const_name("reprise._core.DType | str | numpy.dtype | type | torch.dtype"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    return parse_like(src, value, [](handle h) { return reprise::python::parse_dtype(h); });
  }
  static handle from_cpp(const reprise::python::DTypeLike& v, rv_policy p,
                         cleanup_list* c) noexcept {
    return make_caster<reprise::DType>::from_cpp(*v.parsed, p, c);
  }
};

template <>
struct type_caster<reprise::python::DeviceLike> {
  NB_TYPE_CASTER(reprise::python::DeviceLike,
                 const_name("reprise._core.Device | str | torch.device"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    return parse_like(src, value, [](handle h) { return reprise::python::parse_device(h); });
  }
  static handle from_cpp(const reprise::python::DeviceLike& v, rv_policy p,
                         cleanup_list* c) noexcept {
    return make_caster<reprise::Device>::from_cpp(*v.parsed, p, c);
  }
};

template <>
struct type_caster<reprise::python::ShapeLike> {
  NB_TYPE_CASTER(reprise::python::ShapeLike, const_name("Sequence[int] | int"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (PyUnicode_Check(src.ptr())) return false;
    try {
      value.value = reprise::python::shape_arg(src);
      return true;
    } catch (...) {
      PyErr_Clear();
      return false;
    }
  }
  static handle from_cpp(const reprise::python::ShapeLike& v, rv_policy p,
                         cleanup_list* c) noexcept {
    return make_caster<reprise::Shape>::from_cpp(v.value, p, c);
  }
};

template <>
struct type_caster<reprise::python::PolicyLike> {
  NB_TYPE_CASTER(reprise::python::PolicyLike,
                 const_name("reprise._core.Policy | Callable[[reprise._core.ValueInfo], "
                            "reprise._core.Decision | None]"))
  bool from_python(handle src, uint8_t flags, cleanup_list* cleanup) noexcept;
  static handle from_cpp(const reprise::python::PolicyLike& v, rv_policy p,
                         cleanup_list* c) noexcept {
    return make_caster<reprise::autograd::Policy>::from_cpp(v.get(), p, c);
  }
};

}  // namespace nanobind::detail
