#pragma once
// Tensor: a shape, strides and an offset into a shared Storage, plus the
// autograd fields the tape reads (requires_grad, producer node, gradient).
//
// The layout methods here (view, transpose, slice, ...) make views without
// copying and record nothing on the tape: they are the engine's plumbing.
// Differentiable versions live in ops/ (ops::transpose, ops::reshape, ...).
// Calling a layout method on a tensor that requires grad while grad mode is
// on raises an Error instead of silently cutting the graph.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/grad_mode.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace reprise {

namespace autograd {
class Node;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements, from storage->data()
  DType dtype = DType::f32;

  // Autograd. A leaf has no grad_fn; a tensor produced by a recorded op has
  // grad_fn = its node and output_nr = which of the node's outputs it is.
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> grad;
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves only; the graph owns it
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Creation -------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32);
  static Tensor arange(int64_t n, DType dtype = DType::i64);
  // Copies `values` (row-major) into a new CPU tensor of `shape`.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // A tensor over existing storage.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                             int64_t offset = 0);

  // Metadata -------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl()->shape; }
  const Shape& strides() const { return impl()->strides; }
  int64_t dim() const { return int64_t(impl()->shape.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return reprise::numel(impl()->shape); }
  int64_t offset() const { return impl()->offset; }
  DType dtype() const { return impl()->dtype; }
  Device device() const { return impl()->storage->device(); }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl()->storage; }
  uint64_t version() const { return impl()->storage->version(); }
  // "f32[3, 5] cpu"
  std::string describe() const;

  // Element pointer of index (0, ..., 0). data<T>() checks that T matches.
  void* raw_data() const;
  template <class T>
  T* data() const;

  // Layout views (no copy, not recorded) -----------------------------------
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  Tensor view(Shape shape) const;     // needs compatible strides; one dim may be -1
  Tensor reshape(Shape shape) const;  // a view when possible, else a contiguous copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes dim
  Tensor expand(const Shape& shape) const;          // size-1 dims to any size (stride 0)
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor contiguous() const;  // *this when already contiguous

  // Copies (not recorded) ------------------------------------------------
  Tensor clone() const;  // contiguous copy, same dtype
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;  // a contiguous copy on `device`

  // In-place writes; they bump the storage's version counter --------------
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  // Broadcasts src to this shape and converts its dtype; a src on another
  // device is copied over first.
  Tensor& copy_(const Tensor& src);

  // Values ---------------------------------------------------------------
  template <class T>
  T item() const;
  template <class T>
  std::vector<T> to_vector() const;  // row-major copy of every element (on the host)

  // Autograd -------------------------------------------------------------
  bool requires_grad() const { return impl()->requires_grad || impl()->grad_fn != nullptr; }
  Tensor& requires_grad(bool on);  // leaves only
  bool is_leaf() const { return impl()->grad_fn == nullptr; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl()->grad_fn; }
  uint32_t output_nr() const { return impl()->output_nr; }
  Tensor grad() const { return Tensor(impl()->grad); }
  void set_grad(const Tensor& g);
  Tensor detach() const;  // same data, no history, requires_grad false

  TensorImpl* impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  void check_layout_view(const char* op) const;
  void check_writable(const char* op) const;

  std::shared_ptr<TensorImpl> impl_;
};

// ---- template definitions ----

template <class T>
T* Tensor::data() const {
  REPRISE_CHECK(dtype_of<T>() == dtype(), "Tensor::data: tensor has dtype ", dtype_name(dtype()),
                ", accessed as ", dtype_name(dtype_of<T>()));
  return static_cast<T*>(raw_data());
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  REPRISE_CHECK(int64_t(values.size()) == reprise::numel(shape),
                "Tensor::from_vector: ", values.size(), " values do not fill shape ",
                to_string(shape));
  Tensor t = empty(shape, dtype_of<T>());
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(Device::cpu()).to(dtype_of<T>()).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

template <class T>
T Tensor::item() const {
  REPRISE_CHECK(numel() == 1, "Tensor::item: expected one element, got shape ", to_string(shape()));
  return to_vector<T>()[0];
}

}  // namespace reprise
