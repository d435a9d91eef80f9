// Data movement on the CPU: fill, copy with dtype conversion, and the
// representability check of integer casts.
#include <atomic>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu/backend.h"
#include "engine/strided_loop.h"

REPRISE_CPU_BEGIN
namespace {

// Whether v converts to the integer type To without undefined behaviour or
// wrap-around (floats truncate toward zero first).
template <class To, class From>
bool fits(From v) {
  if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, int32_t>) {
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  } else if constexpr (std::is_integral_v<From>) {
    return true;  // bool, i32, or i64 to i64
  } else {
    const double d = convert<double>(v);  // NaN fails both comparisons
    if constexpr (std::is_same_v<To, int32_t>) {
      return d > -0x1p31 - 1 && d < 0x1p31;
    } else {
      return d >= -0x1p63 && d < 0x1p63;
    }
  }
}

}  // namespace

void CpuBackend::fill(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), "fill_", [&]<class T>() {
    const T v = convert<T>(value);
    T* base = static_cast<T*>(dst.raw_data());
    for_each_run<1>(dst.shape(), {dst.strides()}, [&](auto off, int64_t n, auto st) {
      T* p = base + off[0];
      for (int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
    });
  });
}

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  dispatch_all(dst.dtype(), "copy_", [&]<class To>() {
    dispatch_all(src.dtype(), "copy_", [&]<class From>() {
      To* out = static_cast<To*>(dst.raw_data());
      const From* in = static_cast<const From*>(src.raw_data());
      for_each_run<2>(dst.shape(), {dst.strides(), src.strides()},
                      [&](auto off, int64_t n, auto st) {
                        To* o = out + off[0];
                        const From* i = in + off[1];
                        if (st[0] == 1 && st[1] == 1) {
                          if constexpr (std::is_same_v<To, From>) {
                            std::memcpy(o, i, size_t(n) * sizeof(To));
                          } else {
                            for (int64_t j = 0; j < n; ++j) o[j] = convert<To>(i[j]);
                          }
                        } else {
                          for (int64_t j = 0; j < n; ++j) o[j * st[0]] = convert<To>(i[j * st[1]]);
                        }
                      });
    });
  });
}

bool CpuBackend::representable(const Tensor& x, DType to) {
  return dispatch_all(x.dtype(), "cast", [&]<class From>() {
    return dispatch_index(to, "cast", [&]<class To>() {
      const From* p = static_cast<const From*>(x.raw_data());
      std::atomic<bool> bad{false};
      for_each_run<1>(x.shape(), {x.strides()}, [&](auto off, int64_t n, auto st) {
        bool any = false;
        for (int64_t j = 0; j < n; ++j) any = any || !fits<To>(p[off[0] + j * st[0]]);
        if (any) bad.store(true, std::memory_order_relaxed);
      });
      return !bad.load();
    });
  });
}

REPRISE_CPU_END
