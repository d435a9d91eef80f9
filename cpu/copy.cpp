// Data movement on the CPU: fill, copy with dtype conversion, and the
// representability check of integer casts.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu/backend.h"
#include "engine/strided_loop.h"

REPRISE_CPU_BEGIN
namespace {

// A copy whose innermost run reads across rows, as the contiguous copy of a
// transpose does: the coalesced layout's last two dims are (rows, cols)
// with dst contiguous along cols and src contiguous along rows. Copied in
// kTile x kTile tiles, so that each tile's reads and writes stay within
// kTile cache lines each instead of one line per element read.
constexpr int64_t kTile = 16;

bool is_transposed_copy(const StridedLayout<2>& l) {
  const size_t nd = l.shape.size();
  if (nd < 2) return false;
  const Shape &dst = l.strides[0], &src = l.strides[1];
  return dst[nd - 1] == 1 && src[nd - 2] == 1 && src[nd - 1] != 1 && l.shape[nd - 2] >= kTile &&
         l.shape[nd - 1] >= kTile;
}

template <class To, class From>
void copy_transposed(To* out, const From* in, const StridedLayout<2>& l) {
  const int64_t nd = int64_t(l.shape.size());
  const int64_t rows = l.shape[nd - 2], cols = l.shape[nd - 1];
  const int64_t dst_row = l.strides[0][nd - 2], src_col = l.strides[1][nd - 1];
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t outer = numel(l.shape) / (rows * cols);
  threads::parallel_for(outer * row_tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      // Offsets of matrix t / row_tiles over the outer dims.
      int64_t dst_at = 0, src_at = 0;
      for (int64_t d = nd - 3, rest = t / row_tiles; d >= 0; --d) {
        dst_at += rest % l.shape[d] * l.strides[0][d];
        src_at += rest % l.shape[d] * l.strides[1][d];
        rest /= l.shape[d];
      }
      const int64_t r0 = t % row_tiles * kTile, r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t c = c0; c < c1; ++c) {
          const From* column = in + src_at + c * src_col;
          for (int64_t r = r0; r < r1; ++r) out[dst_at + r * dst_row + c] = convert<To>(column[r]);
        }
      }
    }
  });
}

// Whether this build runs the copies from From to To itself: those among
// the types that activations and weights are stored in (f32, bf16, f16),
// whose loops the level's instructions speed up. The others (f64, the
// integer types, bool) are the same code at every level, so only the
// scalar build compiles them, and the other builds hand them to it: 40 of
// the 49 pairs.
template <class T>
constexpr bool kStorageFloat =
    std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;
template <class To, class From>
constexpr bool kOwnCopy =
#if defined(REPRISE_CPU_LEVEL_SCALAR)
    true;
#else
    (kStorageFloat<To> && kStorageFloat<From>);
#endif

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
      if constexpr (!kOwnCopy<To, From>) {
        scalar_backend().copy(dst, src);
      } else {
        To* out = static_cast<To*>(dst.raw_data());
        const From* in = static_cast<const From*>(src.raw_data());
        if (const StridedLayout<2> l = coalesce<2>(dst.shape(), {dst.strides(), src.strides()});
            is_transposed_copy(l)) {
          copy_transposed(out, in, l);
          return;
        }
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
                            for (int64_t j = 0; j < n; ++j)
                              o[j * st[0]] = convert<To>(i[j * st[1]]);
                          }
                        });
      }
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
