// Reductions on the CPU: sums and running sums over the middle of
// (A, R, B), row maxima with their index, and the f64 sum of squares of a
// gradient.
#include <algorithm>

#include "cpu/backend.h"
#include "cpu/rows.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN

namespace {

// Calls body(a, b0, b1) for (A, R, B) seen as blocks of up to 256 columns
// [b0, b1) of each a, the blocks in parallel.
template <class Body>
void for_column_blocks(int64_t A, int64_t R, int64_t B, Body body) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (B + kBlock - 1) / kBlock;
  threads::parallel_for(A * blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(R * kBlock, 1)),
                        [&](int64_t t0, int64_t t1) {
                          for (int64_t t = t0; t < t1; ++t) {
                            const int64_t b0 = (t % blocks) * kBlock;
                            body(t / blocks, b0, std::min(B, b0 + kBlock));
                          }
                        });
}

}  // namespace

Tensor CpuBackend::sum_middle(const Tensor& x_in, int64_t A, int64_t R, int64_t B) {
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty({A * B}, x.dtype());
  dispatch_float(x.dtype(), "sum", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (B == 1) {  // each output a contiguous row of R
      threads::parallel_for(
          A, std::max<int64_t>(1, 4096 / std::max<int64_t>(R, 1)), [&](int64_t a0, int64_t a1) {
            for (int64_t a = a0; a < a1; ++a) {
              const T* row = px + a * R;
              po[a] =
                  row_sum<T>(R, [&](int64_t i, int64_t valid) { return row_load(row, i, valid); });
            }
          });
      return;
    }
    // Each output adds its r in order.
    for_column_blocks(A, R, B, [&](int64_t a, int64_t b0, int64_t b1) {
      T* o = po + a * B;
      for (int64_t b = b0; b < b1; ++b) o[b] = 0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = px + (a * R + r) * B;
        for (int64_t b = b0; b < b1; ++b) o[b] += row[b];
      }
    });
  });
  return out;
}

Tensor CpuBackend::cumsum_middle(const Tensor& x_in, int64_t A, int64_t R, int64_t B,
                                 bool reverse) {
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_arith(x.dtype(), "cumsum", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (B == 1 && R > 0) {
      // Rows of R, each one chain of dependent adds: kRows rows at a time,
      // so that their chains overlap.
      constexpr int64_t kRows = 8;
      threads::parallel_for((A + kRows - 1) / kRows, std::max<int64_t>(1, 4096 / (R * kRows)),
                            [&](int64_t g0, int64_t g1) {
                              for (int64_t g = g0; g < g1; ++g) {
                                const int64_t a0 = g * kRows, rows = std::min(kRows, A - a0);
                                const T* in = px + a0 * R;
                                T* o = po + a0 * R;
                                const int64_t first = reverse ? R - 1 : 0, step = reverse ? -1 : 1;
                                T sums[kRows];
                                for (int64_t j = 0; j < rows; ++j)
                                  o[j * R + first] = sums[j] = in[j * R + first];
                                for (int64_t i = 1, r = first + step; i < R; ++i, r += step) {
                                  for (int64_t j = 0; j < rows; ++j)
                                    o[j * R + r] = sums[j] += in[j * R + r];
                                }
                              }
                            });
      return;
    }
    // Each column adds its r in order.
    for_column_blocks(A, R, B, [&](int64_t a, int64_t b0, int64_t b1) {
      for (int64_t i = 0; i < R; ++i) {
        const int64_t r = reverse ? R - 1 - i : i;
        const T* in = px + (a * R + r) * B;
        T* o = po + (a * R + r) * B;
        if (i == 0) {
          for (int64_t b = b0; b < b1; ++b) o[b] = in[b];
        } else {
          const T* prev = o + (reverse ? B : -B);
          for (int64_t b = b0; b < b1; ++b) o[b] = prev[b] + in[b];
        }
      }
    });
  });
  return out;
}

Tensors CpuBackend::max_rows(const Tensor& x_in) {
  const Tensor x = x_in.contiguous();
  const int64_t R = x.size(-1), M = x.numel() / R;
  Tensor values = Tensor::empty({M}, x.dtype());
  Tensor indices = Tensor::empty({M}, DType::i64);
  dispatch_float(x.dtype(), "max", [&]<class T>() {
    const T* p = x.data<T>();
    T* v = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
    threads::parallel_for(M, 64, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* row = p + m * R;
        // The first NaN when there is one (NaN wins, as in torch.max), else
        // the first position of the maximum: found by a vector maximum and
        // a scan, with no branch on the data until the scan's exit.
        bool has_nan = false;
        for (int64_t r = 0; r < R; ++r) has_nan |= row[r] != row[r];
        int64_t best = 0;
        if (has_nan) {
          while (row[best] == row[best]) ++best;
        } else {
          const T top = row_max(row, R);
          while (row[best] != top) ++best;
        }
        v[m] = row[best];
        idx[m] = best;
      }
    });
  });
  return {values, indices};
}

Tensor CpuBackend::chunk_square_sums(const Tensor& x) {
  constexpr int64_t kChunk = kSquareSumChunk;
  const float* p = x.data<float>();
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  Tensor sums = Tensor::empty({chunks}, DType::f64);
  double* part = sums.data<double>();
  threads::parallel_for(chunks, 4, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double s = 0;
      for (int64_t j = c * kChunk; j < std::min(n, (c + 1) * kChunk); ++j) {
        s += double(p[j]) * double(p[j]);
      }
      part[c] = s;
    }
  });
  return sums;
}

REPRISE_CPU_END
