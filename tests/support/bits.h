#pragma once
// Exact values as bits and bytes, for the tests that compare results bit
// for bit.

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace reprise::testing {

// Each value's IEEE bits, in order.
std::vector<uint32_t> f32_bits(const std::vector<float>& values);
// The values of a floating tensor of any layout, widened to f32 (exactly
// for bf16 and f16), as bits.
std::vector<uint32_t> f32_bits(const Tensor& t);

// One dtype, one shape and the same bytes (a NaN's payload included).
bool same_bytes(const Tensor& a, const Tensor& b);

}  // namespace reprise::testing
