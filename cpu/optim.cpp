// Optimizer updates on the CPU, elementwise over contiguous f32 tensors.
#include <cmath>

#include "cpu/backend.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

// Elements per parallel task of an elementwise update.
constexpr int64_t kUpdateGrain = 1 << 14;

}  // namespace

void CpuBackend::adamw_step(const Tensor& w_t, const Tensor& g_t, const Tensor& m_t,
                            const Tensor& v_t, const AdamWStep& s) {
  float* w = w_t.data<float>();
  float* m = m_t.data<float>();
  float* v = v_t.data<float>();
  const float* g = g_t.data<float>();
  threads::parallel_for(w_t.numel(), kUpdateGrain, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      const float x = s.decay ? w[j] * s.shrink : w[j];
      m[j] = m[j] + s.w1 * (g[j] - m[j]);  // lerp(m, g, 1 - b1), weight < 0.5 form
      v[j] = v[j] * s.b2 + s.w2 * g[j] * g[j];
      const float denom = std::sqrt(v[j]) / s.bc2_sqrt + s.eps;
      w[j] = x + s.neg_step * m[j] / denom;
    }
  });
}

void CpuBackend::sgd_step(const Tensor& w_t, const Tensor& g_t, const Tensor& buf_t,
                          const SgdStep& s) {
  float* w = w_t.data<float>();
  float* buf = s.momentum ? buf_t.data<float>() : nullptr;
  const float* g = g_t.data<float>();
  threads::parallel_for(w_t.numel(), kUpdateGrain, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      float d = s.wd != 0 ? g[j] + s.wd * w[j] : g[j];
      if (buf != nullptr) {
        buf[j] = s.first ? d : buf[j] * s.mu + s.keep * d;
        d = s.nesterov ? d + s.mu * buf[j] : buf[j];
      }
      w[j] = w[j] + s.neg_lr * d;
    }
  });
}

void CpuBackend::scale_(const Tensor& t, double s) {
  float* x = t.data<float>();
  const float c = float(s);
  threads::parallel_for(t.numel(), kUpdateGrain, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) x[j] *= c;
  });
}

REPRISE_CPU_END
