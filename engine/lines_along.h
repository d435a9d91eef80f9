#pragma once
// A tensor seen as (outer, n, inner) around one dim: outer * inner lines
// along dim, each of n elements inner apart in a contiguous layout. The
// kernels that work line by line (topk, sort, running sums) take this view.

#include <cstdint>

#include "engine/shape.h"

namespace reprise {

struct LinesAlong {
  int64_t outer = 1;  // the product of the dims before dim
  int64_t n = 1;      // the extent of dim (1 for a 0-d tensor)
  int64_t inner = 1;  // the product of the dims after dim
};

inline LinesAlong lines_along(const Shape& shape, int64_t dim) {
  LinesAlong l;
  const int64_t ndim = int64_t(shape.size());
  for (int64_t d = 0; d < dim && d < ndim; ++d) l.outer *= shape[size_t(d)];
  if (dim < ndim) l.n = shape[size_t(dim)];
  for (int64_t d = dim + 1; d < ndim; ++d) l.inner *= shape[size_t(d)];
  return l;
}

}  // namespace reprise
