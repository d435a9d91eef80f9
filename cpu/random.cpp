// Random fills and dropout on the CPU. Element i is a function of the words
// rng/distributions.h assigns to it (word offset + i for float uniforms and
// Bernoulli draws) and of nothing else: not of the thread count, the
// chunking or the CPU capability. A fill runs in chunks whose words are
// generated into an L1-resident buffer and transformed from there (with
// AVX-512, f32 uniforms and dropout on a block-aligned reservation use
// each 16 words in registers as Philox makes them instead); outputs larger
// than 16 MiB are written with non-temporal stores.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <type_traits>
#include <vector>

#include "cpu/backend.h"
#include "cpu/philox.h"
#include "engine/threads.h"
#include "rng/distributions.h"

REPRISE_CPU_BEGIN
namespace {

// Elements per chunk: a multiple of 2 (normal pairs) and of 32 blocks, so
// chunks of a block-aligned reservation start on AVX-512 steps; its words
// (at most 2 per element, 8 KiB) stay in L1 between generation and use.
constexpr int64_t kChunk = 1024;
// Below this many elements the fill runs on the calling thread: starting
// threads costs more than generating them. It is also the least a thread gets.
constexpr int64_t kParallelMin = 1 << 15;

void check_words(const char* op, int64_t n, uint64_t words, const rng::Reservation& r) {
  REPRISE_CHECK(r.count >= words, op, ": ", n, " elements need ", words, " words but ",
                rng::to_string(r), " holds ", r.count);
}

// Output larger than this goes out with non-temporal stores: it would be
// evicted before its consumer reads it anyway, and streaming stores skip
// reading the destination lines first (a third of a dropout's traffic).
constexpr size_t kStreamBytes = size_t{16} << 20;

// Copies a chunk from the L1 staging buffer to dst with non-temporal
// stores where dst is vector-aligned.
void stream_store(void* dst, const void* src, size_t bytes) {
#if defined(REPRISE_CPU_LEVEL_AVX512) || defined(REPRISE_CPU_LEVEL_AVX2)
#if defined(REPRISE_CPU_LEVEL_AVX512)
  using Vec = __m512i;
#else
  using Vec = __m256i;
#endif
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t head =
      std::min(bytes, (sizeof(Vec) - reinterpret_cast<uintptr_t>(d) % sizeof(Vec)) % sizeof(Vec));
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + sizeof(Vec) <= bytes; i += sizeof(Vec)) {
#if defined(REPRISE_CPU_LEVEL_AVX512)
    _mm512_stream_si512(reinterpret_cast<Vec*>(d + i), _mm512_loadu_si512(s + i));
#else
    _mm256_stream_si256(reinterpret_cast<Vec*>(d + i),
                        _mm256_loadu_si256(reinterpret_cast<const Vec*>(s + i)));
#endif
  }
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

// Calls body(words, dst, begin, end) for chunks [begin, end) of [0, n):
// words[0] is the first word of element `begin`, and the body writes
// elements begin .. end - 1 to dst[0 .. end - begin), which is out + begin or,
// for outputs past kStreamBytes, an L1 buffer streamed to out afterwards.
// Element i reads WordsPerElement words, and elements go in groups of Group
// (Box-Muller pairs) that a chunk never splits, so a ragged last group still
// gets its words.
// WordsPerElement = 0: the body makes its own words (and gets nullptr).
template <int WordsPerElement, int Group, class T, class Body>
void for_each_chunk(T* out, int64_t n, const rng::Reservation& r, const Body& body) {
  static_assert(kChunk % Group == 0);
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  const bool stream = size_t(n) * sizeof(T) > kStreamBytes;
  auto chunks = [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      alignas(64) uint32_t words[std::max(WordsPerElement, 1) * kChunk];
      alignas(64) T staged[kChunk];
      const int64_t begin = c * kChunk;
      const int64_t end = std::min(n, begin + kChunk);
      const int64_t grouped = (end - begin + Group - 1) / Group * Group;
      if constexpr (WordsPerElement > 0) {
        generate_words(r.seed, r.subsequence, r.offset + uint64_t(begin) * WordsPerElement, words,
                       size_t(grouped * WordsPerElement));
      }
      body(WordsPerElement > 0 ? words : nullptr, stream ? staged : out + begin, begin, end);
      if (stream) stream_store(out + begin, staged, size_t(end - begin) * sizeof(T));
    }
#if defined(REPRISE_CPU_LEVEL_AVX512) || defined(REPRISE_CPU_LEVEL_AVX2)
    // Streaming stores are weakly ordered: fence once per range, not per
    // chunk (a fence waits for the write-combining buffers to drain).
    if (stream) _mm_sfence();
#endif
  };
  if (n < kParallelMin) {
    chunks(0, nchunks);
  } else {
    threads::parallel_for(nchunks, kParallelMin / kChunk, chunks);
  }
}

#if defined(REPRISE_CPU_LEVEL_AVX512)
// One word per element for the `len` elements of a chunk whose first word
// `first` starts a Philox block, used in registers as Philox makes them:
// vec(i, words) for each 16 elements [i, i + 16) of the whole 128-element
// steps, then rest(words, i, count) for the last elements from a buffer.
// Philox's arithmetic then overlaps the output's (and dropout's input's)
// memory traffic, which a chunk of words generated ahead of its transform
// leaves to the prefetcher, and the words never go through memory.
template <class Vec, class Rest>
void fused_words(const rng::Reservation& r, uint64_t first, int64_t len, const Vec& vec,
                 const Rest& rest) {
  const RoundKeys keys(rng::seed_key(r.seed));
  const int64_t done =
      4 * int64_t(philox_steps<4>(keys, r.subsequence, first / 4, size_t(len) / 4, vec));
  if (done == len) return;
  alignas(64) uint32_t w[kChunk];
  generate_words(r.seed, r.subsequence, first + uint64_t(done), w, size_t(len - done));
  rest(w, done, len - done);
}

// uniform_float of 16 words.
inline __m512 uniform_float16(__m512i words) {
  return _mm512_fmadd_ps(_mm512_cvtepu32_ps(words), _mm512_set1_ps(0x1p-32f),
                         _mm512_set1_ps(0x1p-33f));
}
#endif

// o[i] = low + (high - low) u_i for i in [0, len), u_i the uniform of
// element i's words, one fma each.
template <class T>
void uniform_from_words(const uint32_t* w, T* o, int64_t len, T scale, T low) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) {
    if constexpr (sizeof(T) == 4) {
      o[i] = std::fma(rng::uniform_float(w[i]), scale, low);
    } else {
      o[i] = std::fma(rng::uniform_double(w[2 * i], w[2 * i + 1]), scale, low);
    }
  }
}

// Pairs of one chunk: elements 2j, 2j+1 from words 2j, 2j+1 (float) or
// 4j .. 4j+3 (double), then mean + std z by one fma each.
template <class T>
void normal_chunk(const uint32_t* w, T* o, int64_t len, T std, T mean) {
  const int64_t pairs = len / 2;
#pragma omp simd
  for (int64_t j = 0; j < pairs; ++j) {
    T z0, z1;
    if constexpr (sizeof(T) == 4) {
      rng::box_muller(w[2 * j], w[2 * j + 1], z0, z1);
    } else {
      rng::box_muller(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3], z0, z1);
    }
    o[2 * j] = std::fma(z0, std, mean);
    o[2 * j + 1] = std::fma(z1, std, mean);
  }
  if (len % 2 != 0) {
    T z0, dropped;
    if constexpr (sizeof(T) == 4) {
      rng::box_muller(w[2 * pairs], w[2 * pairs + 1], z0, dropped);
    } else {
      rng::box_muller(w[4 * pairs], w[4 * pairs + 1], w[4 * pairs + 2], w[4 * pairs + 3], z0,
                      dropped);
    }
    o[2 * pairs] = std::fma(z0, std, mean);
  }
}

// y[i] = x[i] * scale where word i keeps element i, else 0, for i in [0, len).
template <class T>
void dropout_words(const uint32_t* w, const T* x, T* y, int64_t len, float keep, T scale) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) y[i] = rng::bernoulli(w[i], keep) ? x[i] * scale : T(0);
}

// Phi^-1(p) for p in (0, 1): Acklam's rational approximation (relative
// error < 1.2e-9), then one Halley step on Phi(x) - p, which brings it to
// double precision.
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x;
  if (p < kLow || p > 1 - kLow) {
    // Tails: a rational function of sqrt(-2 log q), q the nearer tail mass.
    const double q = std::sqrt(-2 * std::log(p < kLow ? p : 1 - p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    if (p > 1 - kLow) x = -x;
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

void CpuBackend::fill_uniform(const Tensor& t, const rng::Reservation& r, double low, double high) {
  dispatch_float(t.dtype(), "fill_uniform", [&]<class T>() {
    T* out = t.data<T>();
    const int64_t n = t.numel();
    check_words("fill_uniform", n, rng::uniform_words<T>(uint64_t(n)), r);
    const T scale = T(high - low), lo = T(low);
#if defined(REPRISE_CPU_LEVEL_AVX512)
    if constexpr (std::is_same_v<T, float>) {
      if (r.offset % 4 == 0) {  // chunks start on blocks (kChunk is a multiple of 4)
        const __m512 scale_v = _mm512_set1_ps(scale), low_v = _mm512_set1_ps(lo);
        for_each_chunk<0, 1>(out, n, r, [&](const uint32_t*, T* o, int64_t begin, int64_t end) {
          fused_words(
              r, r.offset + uint64_t(begin), end - begin,
              [&](size_t i, __m512i words) {
                _mm512_storeu_ps(o + i, _mm512_fmadd_ps(uniform_float16(words), scale_v, low_v));
              },
              [&](const uint32_t* w, int64_t i, int64_t count) {
                uniform_from_words(w, o + i, count, scale, lo);
              });
        });
        return;
      }
    }
#endif
    for_each_chunk<sizeof(T) / 4, 1>(out, n, r,
                                     [&](const uint32_t* w, T* o, int64_t begin, int64_t end) {
                                       uniform_from_words(w, o, end - begin, scale, lo);
                                     });
  });
}

void CpuBackend::fill_normal(const Tensor& t, const rng::Reservation& r, double mean, double std) {
  dispatch_float(t.dtype(), "fill_normal", [&]<class T>() {
    const int64_t n = t.numel();
    check_words("fill_normal", n, rng::normal_words<T>(uint64_t(n)), r);
    for_each_chunk<sizeof(T) / 4, 2>(t.data<T>(), n, r,
                                     [&](const uint32_t* w, T* o, int64_t begin, int64_t end) {
                                       normal_chunk(w, o, end - begin, T(std), T(mean));
                                     });
  });
}

void CpuBackend::fill_bernoulli(const Tensor& t, const rng::Reservation& r, double p) {
  dispatch_float(t.dtype(), "fill_bernoulli", [&]<class T>() {
    const int64_t n = t.numel();
    check_words("fill_bernoulli", n, rng::bernoulli_words(uint64_t(n)), r);
    const float threshold = rng::bernoulli_threshold(p);
    for_each_chunk<1, 1>(t.data<T>(), n, r,
                         [threshold](const uint32_t* w, T* o, int64_t begin, int64_t end) {
                           const int64_t len = end - begin;
#pragma omp simd
                           for (int64_t i = 0; i < len; ++i)
                             o[i] = rng::bernoulli(w[i], threshold) ? T(1) : T(0);
                         });
  });
}

void CpuBackend::fill_trunc_normal(const Tensor& t, const rng::Reservation& r, double mean,
                                   double std, double a, double b) {
  const int64_t n = t.numel();
  check_words("fill_trunc_normal", n, rng::uniform_words<double>(uint64_t(n)), r);
  std::vector<double> u(static_cast<size_t>(n));
  for_each_chunk<2, 1>(u.data(), n, r,
                       [](const uint32_t* w, double* o, int64_t begin, int64_t end) {
                         uniform_from_words(w, o, end - begin, 1.0, 0.0);
                       });
  const double lo = normal_cdf((a - mean) / std), hi = normal_cdf((b - mean) / std);
  dispatch_float(t.dtype(), "fill_trunc_normal", [&]<class T>() {
    T* out = t.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      // A uniform on (lo, hi], mapped through Phi^-1; the clamp absorbs the
      // rounding at the ends (hi can round to 1).
      const double v = lo + (hi - lo) * u[size_t(i)];
      const double x = v < 1.0 ? mean + std * normal_quantile(v) : b;
      out[i] = T(std::clamp(x, a, b));
    }
  });
}

Tensor CpuBackend::dropout(const Tensor& x_in, double p, const rng::Reservation& r) {
  const Tensor xc = x_in.contiguous();
  Tensor out = Tensor::empty(xc.shape(), xc.dtype());
  dispatch_float(xc.dtype(), "dropout", [&]<class T>() {
    const T* x = xc.data<T>();
    T* y = out.data<T>();
    const int64_t n = xc.numel();
    check_words("dropout", n, rng::bernoulli_words(uint64_t(n)), r);
    const float keep = rng::bernoulli_threshold(1.0 - p);
    // p == 1 keeps nothing, so the infinite scale is never used.
    const T scale = p < 1.0 ? T(1.0 / (1.0 - p)) : T(0);
#if defined(REPRISE_CPU_LEVEL_AVX512)
    if constexpr (std::is_same_v<T, float>) {
      if (r.offset % 4 == 0) {  // chunks start on blocks (kChunk is a multiple of 4)
        const __m512 keep_v = _mm512_set1_ps(keep), scale_v = _mm512_set1_ps(scale);
        for_each_chunk<0, 1>(y, n, r, [&](const uint32_t*, T* yi, int64_t begin, int64_t end) {
          const float* xi = x + begin;
          fused_words(
              r, r.offset + uint64_t(begin), end - begin,
              [&](size_t i, __m512i words) {
                const __mmask16 kept =
                    _mm512_cmp_ps_mask(uniform_float16(words), keep_v, _CMP_LE_OQ);
                _mm512_storeu_ps(yi + i,
                                 _mm512_maskz_mul_ps(kept, _mm512_loadu_ps(xi + i), scale_v));
              },
              [&](const uint32_t* w, int64_t i, int64_t count) {
                dropout_words(w, xi + i, yi + i, count, keep, scale);
              });
        });
        return;
      }
    }
#endif
    for_each_chunk<1, 1>(y, n, r, [&](const uint32_t* w, T* yi, int64_t begin, int64_t end) {
      dropout_words(w, x + begin, yi, end - begin, keep, scale);
    });
  });
  return out;
}

REPRISE_CPU_END
