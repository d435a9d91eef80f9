// rotary on the CPU: each (i, i + half) pair of a head vector is rotated by
// its angle; the backward is the inverse rotation (sign -1). The cos/sin
// tables, P * half sincos pairs for P position rows, cost about as much as
// rotating a few heads, so each thread keeps the last tables it built and
// reuses them while the positions, the frequencies and the scaling match: q
// and k, forward and backward, and every layer of a model rotate by the
// same tables. bf16 x rotates in f32, each result rounded once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/backend.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

// cos(a) * scaling and sin(a) * scaling for a = positions[p] * inv_freq[i]:
// (P, half) each.
template <class T>
struct Tables {
  std::vector<T> cos, sin;
};

template <class T>
Tables<T> make_tables(const std::vector<int64_t>& pos, const std::vector<T>& inv_freq, T scaling) {
  const int64_t half = int64_t(inv_freq.size()), P = int64_t(pos.size());
  Tables<T> tab{std::vector<T>(size_t(P * half)), std::vector<T>(size_t(P * half))};
  threads::parallel_for(P, std::max<int64_t>(1, 2048 / half), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      // HF's freqs = inv_freq @ position_ids.float(): one product rounded to
      // T; then cos() * attention_scaling, rounded again.
      const T fp = T(pos[size_t(p)]);
      for (int64_t i = 0; i < half; ++i) {
        const T a = inv_freq[size_t(i)] * fp;
        tab.cos[size_t(p * half + i)] = std::cos(a) * scaling;
        tab.sin[size_t(p * half + i)] = std::sin(a) * scaling;
      }
    }
  });
  return tab;
}

// The tables for (positions, inv_freq, scaling), from this thread's
// one-entry cache. Reuse gives the same bits as rebuilding.
template <class T>
const Tables<T>& tables_for(const Tensor& positions, const Tensor& inv_freq, double scaling) {
  struct Entry {
    std::vector<int64_t> pos;
    std::vector<T> inv_freq;
    double scaling = 0;
    Tables<T> tab;
  };
  thread_local Entry cache;
  std::vector<int64_t> pos = positions.to_vector<int64_t>();
  std::vector<T> freq = inv_freq.to_vector<T>();
  if (cache.scaling != scaling || cache.inv_freq != freq || cache.pos != pos) {
    cache.tab = make_tables<T>(pos, freq, T(scaling));
    cache.pos = std::move(pos);
    cache.inv_freq = std::move(freq);
    cache.scaling = scaling;
  }
  return cache.tab;
}

}  // namespace

Tensor CpuBackend::rotary(const Tensor& x_in, const Tensor& positions, const Tensor& inv_freq,
                          double scaling, int sign) {
  const Tensor x = x_in.stride(3) == 1 ? x_in : x_in.contiguous();
  const int64_t B = x.size(0), H = x.size(1), T_ = x.size(2), D = x.size(3), half = D / 2;
  const int64_t sb = x.stride(0), sh = x.stride(1), st = x.stride(2);
  const bool per_batch = positions.dim() == 2;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float_or_bf16(x.dtype(), "rotary", [&]<class S>() {
    using T = ComputeType<S>;
    const Tables<T>& tab = tables_for<T>(positions, inv_freq, scaling);
    const S* px = x.data<S>();
    S* py = y.data<S>();
    const T sg = T(sign);
    threads::parallel_for(B * H * T_, std::max<int64_t>(1, 16384 / D), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const int64_t b = row / (H * T_), h = (row / T_) % H, t = row % T_;
        const S* xr = px + b * sb + h * sh + t * st;
        S* yr = py + row * D;
        const int64_t p = per_batch ? b * T_ + t : t;
        const T* c = tab.cos.data() + p * half;
        const T* s = tab.sin.data() + p * half;
        // HF's q * cos + rotate_half(q) * sin, in the same order.
        for (int64_t i = 0; i < half; ++i) {
          const T x1 = T(xr[i]), x2 = T(xr[i + half]), si = sg * s[i];
          yr[i] = S(x1 * c[i] - x2 * si);
          yr[i + half] = S(x2 * c[i] + x1 * si);
        }
      }
    });
  });
  return y;
}

REPRISE_CPU_END
