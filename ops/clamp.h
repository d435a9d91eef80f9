#pragma once
// clamp, as torch's: x limited to [min, max], either bound optional, a
// scalar or a tensor that broadcasts with x.

#include <optional>

#include "engine/tensor.h"

namespace reprise::ops {

// maximum(x, min) then minimum(that, max): max wins where min > max, and a
// NaN in x stays NaN. The gradient reaches x where min <= x <= max, and a
// tensor bound where it was the one taken (x below min, x above max).
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
// Bounds are tensors of x's dtype and device; an undefined one is absent.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);

}  // namespace reprise::ops
