#pragma once
// Softmax and log-softmax over one dim of an f32/f64 tensor. Each row along
// `dim` is reduced by one thread in a fixed order (max, then the sum of
// exponentials), so results do not depend on the thread count.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

// x: any shape -> x's shape; every row along dim sums to 1.
Tensor softmax(const Tensor& x, int64_t dim = -1);
// x: any shape -> x's shape; log(softmax(x, dim)) computed as
// x - max - log(sum(exp(x - max))), never through log of a small number.
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace reprise::ops
