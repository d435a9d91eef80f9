#pragma once
// rotary: each (i, i + half) pair of a head vector is rotated by the angle
// position * inv_freq[i], cos and sin times scaling, with Hugging Face's
// order of operations in T (cpu/rotary.cpp). The CPU builds cos/sin tables
// with the C library; here each thread computes its pair's cos and sin with
// the device's, which may differ from the C library's in the last place (on
// the simulator they are the C library's).
// x (B, H, T, D) with unit stride along D -> y contiguous; sign -1 rotates
// back (the backward). bf16 x (S) rotates in f32 (T), each result rounded
// once.

#include <cmath>

#include "cuda/kernel.h"
#include "cuda/kernels/strided.h"
#include "engine/tensor.h"

namespace reprise::cuda {

template <class S, class I, class T = ComputeType<S>>
struct RotaryKernel {
  static constexpr int kThreads = 256;
  const S* x;
  const I* positions;
  const T* inv_freq;  // (half)
  S* y;
  int64_t B, H, T_, D, sb, sh, st;
  bool per_batch;
  T scaling, sign;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const int64_t half = D / 2, n = B * H * T_ * half;
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t e) {
        const int64_t row = e / half, i = e % half;
        const int64_t b = row / (H * T_), h = (row / T_) % H, s = row % T_;
        const T a = inv_freq[i] * T(positions[per_batch ? b * T_ + s : s]);
        const T c = std::cos(a) * scaling, si = sign * (std::sin(a) * scaling);
        const S* xr = x + b * sb + h * sh + s * st;
        S* yr = y + row * D;
        const T x1 = T(xr[i]), x2 = T(xr[i + half]);
        yr[i] = S(x1 * c - x2 * si);
        yr[i + half] = S(x2 * c + x1 * si);
      });
    });
  }
};

template <class Exec>
Tensor rotary(const Exec& ex, const Tensor& x_in, const Tensor& positions_in,
              const Tensor& inv_freq_in, double scaling, int sign) {
  const Tensor x = x_in.stride(3) == 1 ? x_in : x_in.contiguous();
  const Tensor positions = positions_in.contiguous();
  const Tensor inv_freq = inv_freq_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), ex.device());
  const int64_t n = x.numel() / 2;
  if (n == 0) return y;
  dispatch_float_or_bf16(x.dtype(), "rotary", [&]<class S>() {
    using T = ComputeType<S>;
    dispatch_index(positions.dtype(), "rotary", [&]<class I>() {
      ex.launch(RotaryKernel<S, I>{.x = x.data<S>(),
                                   .positions = static_cast<const I*>(positions.raw_data()),
                                   .inv_freq = inv_freq.data<T>(),
                                   .y = y.data<S>(),
                                   .B = x.size(0),
                                   .H = x.size(1),
                                   .T_ = x.size(2),
                                   .D = x.size(3),
                                   .sb = x.stride(0),
                                   .sh = x.stride(1),
                                   .st = x.stride(2),
                                   .per_batch = positions.dim() == 2,
                                   .scaling = T(scaling),
                                   .sign = T(sign)},
                blocks_for(n, 256));
    });
  });
  return y;
}

}  // namespace reprise::cuda
