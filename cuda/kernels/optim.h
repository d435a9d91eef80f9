#pragma once
// Optimizer updates, elementwise over contiguous f32 tensors, with
// cpu/optim.cpp's formulas and order of roundings.

#include <cmath>

#include "cuda/kernel.h"
#include "engine/backend.h"
#include "engine/tensor.h"

namespace reprise::cuda {

struct AdamWKernel {
  static constexpr int kThreads = 256;
  float *w, *m, *v;
  const float* g;
  int64_t n;
  AdamWStep s;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t j = ctx.block() * kThreads + t; j < n; j += ctx.blocks() * kThreads) {
        const float x = s.decay ? w[j] * s.shrink : w[j];
        const float mj = m[j] + s.w1 * (g[j] - m[j]);
        const float vj = v[j] * s.b2 + s.w2 * g[j] * g[j];
        m[j] = mj;
        v[j] = vj;
        const float denom = std::sqrt(vj) / s.bc2_sqrt + s.eps;
        w[j] = x + s.neg_step * mj / denom;
      }
    });
  }
};

struct SgdKernel {
  static constexpr int kThreads = 256;
  float* w;
  float* buf;  // null without momentum
  const float* g;
  int64_t n;
  SgdStep s;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t j = ctx.block() * kThreads + t; j < n; j += ctx.blocks() * kThreads) {
        float d = s.wd != 0 ? g[j] + s.wd * w[j] : g[j];
        if (buf != nullptr) {
          buf[j] = s.first ? d : buf[j] * s.mu + s.keep * d;
          d = s.nesterov ? d + s.mu * buf[j] : buf[j];
        }
        w[j] = w[j] + s.neg_lr * d;
      }
    });
  }
};

struct ScaleKernel {
  static constexpr int kThreads = 256;
  float* x;
  int64_t n;
  float c;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t j = ctx.block() * kThreads + t; j < n; j += ctx.blocks() * kThreads) x[j] *= c;
    });
  }
};

template <class Exec>
void adamw_step(const Exec& ex, const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamWStep& step) {
  ex.launch(AdamWKernel{w.data<float>(), m.data<float>(), v.data<float>(), g.data<float>(),
                        w.numel(), step},
            blocks_for(w.numel(), 256));
}

template <class Exec>
void sgd_step(const Exec& ex, const Tensor& w, const Tensor& g, const Tensor& buf,
              const SgdStep& step) {
  ex.launch(SgdKernel{w.data<float>(), step.momentum ? buf.data<float>() : nullptr, g.data<float>(),
                      w.numel(), step},
            blocks_for(w.numel(), 256));
}

template <class Exec>
void scale_(const Exec& ex, const Tensor& t, double s) {
  ex.launch(ScaleKernel{t.data<float>(), t.numel(), float(s)}, blocks_for(t.numel(), 256));
}

}  // namespace reprise::cuda
