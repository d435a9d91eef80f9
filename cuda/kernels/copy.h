#pragma once
// Data movement: fill, copy with dtype conversion (engine/dtype.h convert,
// the CPU's rounding) between any two layouts, and the check that every
// element converts to an integer dtype (Backend::representable).

#include <cstring>
#include <type_traits>

#include "cuda/kernel.h"
#include "cuda/kernels/strided.h"
#include "engine/dtype.h"
#include "engine/tensor.h"

namespace reprise::cuda {

template <class T>
struct FillKernel {
  static constexpr int kThreads = 256;
  T* out;
  Strided<1> layout;
  int64_t n;
  T value;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        int64_t off[1];
        layout.offsets(i, off);
        out[off[0]] = value;
      });
    });
  }
};

template <class To, class From>
struct CopyKernel {
  static constexpr int kThreads = 256;
  To* out;
  const From* in;
  Strided<2> layout;
  int64_t n;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        int64_t off[2];
        layout.offsets(i, off);
        out[off[0]] = convert<To>(in[off[1]]);
      });
    });
  }
};

// *bad = 1 when some element does not fit (every writer writes the same 1).
template <class To, class From>
struct RepresentableKernel {
  static constexpr int kThreads = 256;
  const From* in;
  Strided<1> layout;
  int64_t n;
  int* bad;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        int64_t off[1];
        layout.offsets(i, off);
        if (!fits<To>(in[off[0]])) *bad = 1;
      });
    });
  }
};

template <class Exec>
void fill(const Exec& ex, const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_all(dst.dtype(), "fill_", [&]<class T>() {
    ex.launch(FillKernel<T>{.out = static_cast<T*>(dst.raw_data()),
                            .layout = strided<1>(dst.shape(), {dst.strides()}),
                            .n = n,
                            .value = convert<T>(value)},
              blocks_for(n, 256));
  });
}

template <class Exec>
void copy(const Exec& ex, const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    ex.copy_bytes(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  const Strided<2> layout = strided<2>(dst.shape(), {dst.strides(), src.strides()});
  dispatch_all(dst.dtype(), "copy_", [&]<class To>() {
    dispatch_all(src.dtype(), "copy_", [&]<class From>() {
      ex.launch(CopyKernel<To, From>{.out = static_cast<To*>(dst.raw_data()),
                                     .in = static_cast<const From*>(src.raw_data()),
                                     .layout = layout,
                                     .n = n},
                blocks_for(n, 256));
    });
  });
}

template <class Exec>
bool representable(const Exec& ex, const Tensor& x, DType to) {
  const int64_t n = x.numel();
  if (n == 0) return true;
  const Tensor bad = Tensor::zeros({}, DType::i32, ex.device());
  dispatch_all(x.dtype(), "cast", [&]<class From>() {
    dispatch_index(to, "cast", [&]<class To>() {
      ex.launch(RepresentableKernel<To, From>{.in = static_cast<const From*>(x.raw_data()),
                                              .layout = strided<1>(x.shape(), {x.strides()}),
                                              .n = n,
                                              .bad = bad.data<int>()},
                blocks_for(n, 256));
    });
  });
  int flag = 0;
  ex.download(&flag, bad.raw_data(), sizeof flag);
  return flag == 0;
}

}  // namespace reprise::cuda
