#include "engine/shape.h"

#include <algorithm>

#include "base/error.h"

namespace reprise {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    REPRISE_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", to_string(a), " and ",
                  to_string(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ", db,
                  ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

ProductShapes product_shapes(const Shape& a, const Shape& b) {
  ProductShapes s;
  s.batch_a.assign(a.begin(), a.end() - 2);
  s.batch_b.assign(b.begin(), b.end() - 2);
  s.batch = broadcast_shapes(s.batch_a, s.batch_b, "matmul");
  s.out = s.batch;
  s.out.push_back(a[a.size() - 2]);
  s.out.push_back(b.back());
  return s;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = -std::max<int64_t>(ndim, 1), hi = std::max<int64_t>(ndim, 1) - 1;
  REPRISE_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a tensor of ",
                ndim, " dims (expected ", lo, "..", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

}  // namespace reprise
