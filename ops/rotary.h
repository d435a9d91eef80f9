#pragma once
// Rotary position embedding (RoPE), Llama / HF convention ("rotate_half"):
// element i of a head vector pairs with element i + D/2. B = batch,
// H = heads, T = sequence, D = head dim, half = D / 2.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

// With angle a = pos * inv_freq[i] (one product rounded to x's dtype),
// c = cos(a) * scaling and s = sin(a) * scaling:
//   y[i]        = x[i] c - x[i + half] s
//   y[i + half] = x[i + half] c + x[i] s
// as HF's q * cos + rotate_half(q) * sin, in the same order.
// x: (B, H, T, D) f32/f64, D even, any strides; positions: (T) shared by
// every batch row, or (B, T), i64 or i32; inv_freq: (half) of x's dtype
// and device -> (B, H, T, D) contiguous. inv_freq and scaling are what a
// rope type determines (nn/rope.h computes them as transformers does);
// scaling is YaRN's attention factor (1 for the other types).
Tensor rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
              double scaling = 1.0);

// The default rope type: inv_freq[i] = 1 / theta^(2i / D), in x's dtype's
// arithmetic (HF's f32 steps for f32: 2i / D, the power, the reciprocal).
Tensor rope_inv_freq(int64_t D, double theta, DType dtype = DType::f32);
Tensor rotary(const Tensor& x, const Tensor& positions, double theta = 10000.0);

// rotary() at positions start, start + 1, ..., start + T - 1.
Tensor rotary(const Tensor& x, int64_t start, const Tensor& inv_freq, double scaling = 1.0);
Tensor rotary(const Tensor& x, int64_t start, double theta = 10000.0);

}  // namespace reprise::ops
