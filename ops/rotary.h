#pragma once
// Rotary position embedding (RoPE), Llama / HF convention ("rotate_half"):
// element i of a head vector pairs with element i + D/2. B = batch,
// H = heads, T = sequence, D = head dim, half = D / 2.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

// With angle a = pos * inv_freq_i and inv_freq_i = theta^(-2i/D), i < half:
//   y[i]        = x[i] cos a - x[i + half] sin a
//   y[i + half] = x[i + half] cos a + x[i] sin a
// x: (B, H, T, D) f32/f64, D even, any strides; positions: (T) shared by
// every batch row, or (B, T); i64 or i32 -> (B, H, T, D) contiguous.
// For f32, the cos/sin tables follow HF LlamaRotaryEmbedding's f32
// arithmetic (inv_freq, then pos * inv_freq rounded to f32, then cos and sin);
// for f64 they are computed in f64.
Tensor rotary(const Tensor& x, const Tensor& positions, double theta = 10000.0);

// rotary() at positions start, start + 1, ..., start + T - 1.
Tensor rotary(const Tensor& x, int64_t start, double theta = 10000.0);

}  // namespace reprise::ops
