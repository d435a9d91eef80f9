#include "engine/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

#include "engine/backend.h"
#include "engine/memory_limit.h"

namespace reprise {

// ---- creation ----------------------------------------------------------

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                            int64_t offset) {
  for (int64_t s : shape) {
    REPRISE_CHECK(s >= 0, "Tensor: negative extent in shape ", to_string(shape));
  }
  REPRISE_CHECK(offset >= 0 &&
                    size_t(offset + reprise::numel(shape)) * dtype_size(dtype) <= storage->nbytes(),
                "Tensor::from_storage: shape ", to_string(shape), " of ", dtype_name(dtype),
                " at offset ", offset, " does not fit a storage of ", storage->nbytes(), " bytes");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape) {
    REPRISE_CHECK(s >= 0, "Tensor::empty: negative extent in shape ", to_string(shape));
  }
  size_t bytes = size_t(reprise::numel(shape)) * dtype_size(dtype);
  std::shared_ptr<Storage> storage;
  try {
    storage = Storage::allocate(bytes, device);
  } catch (const OutOfMemoryError& e) {
    throw e.for_tensor(to_string(shape) + " " + dtype_name(dtype));
  }
  return from_storage(std::move(storage), shape, dtype);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  REPRISE_CHECK(n >= 0, "Tensor::arange: expected n >= 0, got ", n);
  Tensor t = empty({n}, dtype);
  dispatch_arith(dtype, "Tensor::arange", [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = T(i);
  });
  return t;
}

// ---- metadata ----------------------------------------------------------

TensorImpl* Tensor::impl() const {
  REPRISE_CHECK(impl_ != nullptr, "Tensor: use of an undefined tensor");
  return impl_.get();
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "Tensor::size")]; }

int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "Tensor::stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype())) + to_string(shape()) + " " + to_string(device());
}

void* Tensor::raw_data() const {
  REPRISE_CHECK(storage()->resident(), "Tensor: the memory of ", describe(),
                " was given back (a parameter split over processes, read outside its "
                "gather?)");
  return static_cast<char*>(storage()->data()) + offset() * int64_t(element_size());
}

// ---- layout views ------------------------------------------------------

void Tensor::check_layout_view(const char* op) const {
  REPRISE_CHECK(!(requires_grad() && GradMode::enabled()), "Tensor::", op, ": ", describe(),
                " requires grad, and a layout view is not recorded on the tape; use ops::", op,
                " to differentiate through it, or run under NoGradGuard");
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  check_layout_view("as_strided");
  REPRISE_CHECK(shape.size() == strides.size(), "Tensor::as_strided: shape ", to_string(shape),
                " and strides ", to_string(strides), " differ in length");
  // The highest element reached must lie inside the storage.
  int64_t last = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    REPRISE_CHECK(shape[d] >= 0 && strides[d] >= 0, "Tensor::as_strided: bad shape ",
                  to_string(shape), " / strides ", to_string(strides));
    if (shape[d] == 0) last = offset - 1;  // no element reached at all
    if (last >= offset) last += (shape[d] - 1) * strides[d];
  }
  REPRISE_CHECK(offset >= 0 && (reprise::numel(shape) == 0 ||
                                size_t(last + 1) * element_size() <= storage()->nbytes()),
                "Tensor::as_strided: view ", to_string(shape), " strides ", to_string(strides),
                " offset ", offset, " reaches past a storage of ", storage()->nbytes(), " bytes");
  auto v = std::make_shared<TensorImpl>();
  v->storage = storage();
  v->shape = shape;
  v->strides = strides;
  v->offset = offset;
  v->dtype = dtype();
  return Tensor(std::move(v));
}

namespace {
// Resolves a -1 extent so that the shape has `n` elements.
Shape infer_shape(Shape shape, int64_t n, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      REPRISE_CHECK(infer < 0, op, ": only one dim may be -1 in ", to_string(shape));
      infer = int64_t(i);
    } else {
      REPRISE_CHECK(shape[i] >= 0, op, ": bad extent in ", to_string(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    REPRISE_CHECK(known != 0 && n % known == 0, op, ": cannot infer the -1 in ", to_string(shape),
                  " for ", n, " elements");
    shape[infer] = n / known;
  }
  REPRISE_CHECK(numel(shape) == n, op, ": shape ", to_string(shape), " does not hold ", n,
                " elements");
  return shape;
}

// Strides for viewing (shape, strides) as new_shape without a copy, or empty
// when the layout does not allow it (the rule PyTorch's view follows).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape& out) {
  out.assign(new_shape.size(), 0);
  // No elements, or one of a 0-d tensor (the loop below walks dims): any
  // strides address it.
  if (numel(shape) == 0 || shape.empty()) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor Tensor::view(Shape new_shape) const {
  check_layout_view("view");
  new_shape = infer_shape(std::move(new_shape), numel(), "Tensor::view");
  Shape new_strides;
  REPRISE_CHECK(view_strides(shape(), strides(), new_shape, new_strides),
                "Tensor::view: ", describe(), " with strides ", to_string(strides()),
                " cannot be viewed as ", to_string(new_shape), " without a copy; use reshape");
  return as_strided(new_shape, new_strides, offset());
}

Tensor Tensor::reshape(Shape new_shape) const {
  check_layout_view("reshape");
  new_shape = infer_shape(std::move(new_shape), numel(), "Tensor::reshape");
  Shape new_strides;
  if (view_strides(shape(), strides(), new_shape, new_strides)) {
    return as_strided(new_shape, new_strides, offset());
  }
  return contiguous().view(new_shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_layout_view("transpose");
  d0 = wrap_dim(d0, dim(), "Tensor::transpose");
  d1 = wrap_dim(d1, dim(), "Tensor::transpose");
  Shape s = shape(), st = strides();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return as_strided(s, st, offset());
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  check_layout_view("permute");
  REPRISE_CHECK(int64_t(dims.size()) == dim(), "Tensor::permute: ", dims.size(), " dims given for ",
                describe());
  Shape s(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "Tensor::permute");
    REPRISE_CHECK(!seen[d], "Tensor::permute: dim ", d, " repeated in ", to_string(dims));
    seen[d] = true;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  return as_strided(s, st, offset());
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_layout_view("slice");
  d = wrap_dim(d, dim(), "Tensor::slice");
  REPRISE_CHECK(step >= 1, "Tensor::slice: step must be >= 1, got ", step);
  int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return as_strided(s, st, offset() + start * strides()[d]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_layout_view("select");
  d = wrap_dim(d, dim(), "Tensor::select");
  int64_t n = shape()[d];
  REPRISE_CHECK(index >= -n && index < n, "Tensor::select: index ", index,
                " is out of range for dim ", d, " of ", describe());
  if (index < 0) index += n;
  Shape s = shape(), st = strides();
  int64_t off = offset() + index * st[d];
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return as_strided(s, st, off);
}

Tensor Tensor::expand(const Shape& target) const {
  check_layout_view("expand");
  REPRISE_CHECK(target.size() >= shape().size(), "Tensor::expand: cannot expand ", describe(),
                " to fewer dims ", to_string(target));
  size_t lead = target.size() - shape().size();
  Shape st(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) continue;
    int64_t have = shape()[i - lead];
    REPRISE_CHECK(have == target[i] || have == 1, "Tensor::expand: cannot expand ", describe(),
                  " to ", to_string(target), " (dim ", i, ")");
    st[i] = have == target[i] ? strides()[i - lead] : 0;
  }
  return as_strided(target, st, offset());
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_layout_view("unsqueeze");
  d = wrap_dim(d, dim() + 1, "Tensor::unsqueeze");
  Shape s = shape(), st = strides();
  int64_t stride = d < dim() ? st[d] * s[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return as_strided(s, st, offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  check_layout_view("squeeze");
  d = wrap_dim(d, dim(), "Tensor::squeeze");
  REPRISE_CHECK(shape()[d] == 1, "Tensor::squeeze: dim ", d, " of ", describe(), " is not 1");
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return as_strided(s, st, offset());
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  check_layout_view("contiguous");
  return clone();
}

// ---- copies --------------------------------------------------------------

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  NoGradGuard no_grad;
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape(), dtype(), target);
  if (src.device().is_cpu()) {
    backend(target).copy_from_host(out.raw_data(), src.raw_data(), nbytes());
  } else if (target.is_cpu()) {
    backend(src.device()).copy_to_host(out.raw_data(), src.raw_data(), nbytes());
  } else {  // between two devices, through the host
    return src.to(Device::cpu()).to(target);
  }
  return out;
}

// ---- in-place writes -----------------------------------------------------

void Tensor::check_writable(const char* op) const {
  REPRISE_CHECK(!(GradMode::enabled() && requires_grad()), "Tensor::", op, ": ", describe(),
                " requires grad; in-place writes to it are not recorded on the tape (run them "
                "under NoGradGuard)");
}

Tensor& Tensor::fill_(double value) {
  check_writable("fill_");
  backend(device()).fill(*this, value);
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_writable("copy_");
  REPRISE_CHECK(src.defined(), "Tensor::copy_: undefined source");
  // A source on another device comes over whole first.
  const Tensor local = src.device() == device() ? src : src.to(device());
  const Tensor s = local.dim() == 0 && dim() == 0 ? local : [&] {
    NoGradGuard no_grad;
    return local.expand(shape());
  }();
  backend(device()).copy(*this, s);
  storage()->bump_version();
  return *this;
}

// ---- autograd fields -----------------------------------------------------

Tensor& Tensor::requires_grad(bool on) {
  REPRISE_CHECK(is_leaf(), "Tensor::requires_grad: ", describe(),
                " is produced by an op; only leaves can be marked (use detach())");
  REPRISE_CHECK(!on || is_floating(dtype()), "Tensor::requires_grad: ", describe(),
                ": only floating tensors can require grad");
  impl()->requires_grad = on;
  // A leaf that requires grad is the user's parameter, and its memory
  // counts as such from now on (memory_stats).
  if (on && storage() && storage()->kind() == MemoryKind::temporary) {
    storage()->set_kind(MemoryKind::parameter);
  }
  return *this;
}

void Tensor::set_grad(const Tensor& g) {
  if (g.defined()) {
    REPRISE_CHECK(g.shape() == shape() && g.dtype() == dtype(), "Tensor::set_grad: gradient ",
                  g.describe(), " does not match ", describe());
  }
  impl()->grad = g.impl_ptr();
}

Tensor Tensor::detach() const {
  auto v = std::make_shared<TensorImpl>();
  v->storage = storage();
  v->shape = shape();
  v->strides = strides();
  v->offset = offset();
  v->dtype = dtype();
  return Tensor(std::move(v));
}

}  // namespace reprise
