#include "rng/fill.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "engine/error.h"
#include "rng/distributions.h"
#include "rng/philox_avx512.h"
#include "rng/words.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, see words.cpp
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace reprise::rng {
namespace {

// Elements per chunk: a multiple of 2 (normal pairs) and of 32 blocks, so
// chunks of a block-aligned reservation start on AVX-512 steps; its words
// (at most 2 per element, 8 KiB) stay in L1 between generation and use.
constexpr int64_t kChunk = 1024;
// Below this many elements the fill runs on the calling thread: starting
// threads costs more than generating them. It is also the least a thread gets.
constexpr int64_t kParallelMin = 1 << 15;

void check_args(const char* op, int64_t n, uint64_t words, const Reservation& r) {
  REPRISE_CHECK(n >= 0, "rng::", op, ": expected n >= 0, got ", n);
  REPRISE_CHECK(r.count >= words, "rng::", op, ": ", n, " elements need ", words, " words but ",
                to_string(r), " holds ", r.count);
}

void check_probability(const char* op, double p) {
  REPRISE_CHECK(p >= 0.0 && p <= 1.0, "rng::", op, ": expected a probability in [0, 1], got ", p);
}

// Output larger than this goes out with non-temporal stores: it would be
// evicted before its consumer reads it anyway, and streaming stores skip
// reading the destination lines first (a third of a dropout's traffic).
constexpr size_t kStreamBytes = size_t{16} << 20;

// Copies a chunk from the L1 staging buffer to dst with non-temporal
// stores where dst is vector-aligned.
void stream_store(void* dst, const void* src, size_t bytes) {
#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
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
#if defined(__AVX512F__)
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
void for_each_chunk(T* out, int64_t n, const Reservation& r, ParallelFor parallel,
                    const Body& body) {
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
#if defined(__AVX512F__) || defined(__AVX2__)
    // Streaming stores are weakly ordered: fence once per range, not per
    // chunk (a fence waits for the write-combining buffers to drain).
    if (stream) _mm_sfence();
#endif
  };
  if (parallel == nullptr || n < kParallelMin) {
    chunks(0, nchunks);
  } else {
    parallel(nchunks, kParallelMin / kChunk, chunks);
  }
}

#if defined(__AVX512F__)
// One word per element for the `len` elements of a chunk whose first word
// `first` starts a Philox block, used in registers as Philox makes them:
// vec(i, words) for each 16 elements [i, i + 16) of the whole 128-element
// steps, then rest(words, i, count) for the last elements from a buffer.
// Philox's arithmetic then overlaps the output's (and dropout's input's)
// memory traffic, which a chunk of words generated ahead of its transform
// leaves to the prefetcher, and the words never go through memory.
template <class Vec, class Rest>
void fused_words_avx512(const Reservation& r, uint64_t first, int64_t len, const Vec& vec,
                        const Rest& rest) {
  const detail::RoundKeys keys(seed_key(r.seed));
  const int64_t done = 4 * int64_t(detail::philox_steps_avx512<4>(keys, r.subsequence, first / 4,
                                                                  size_t(len) / 4, vec));
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

// o[i] = the uniform of element i, for i in [0, len), from its words.
template <class T>
void uniform_from_words(const uint32_t* w, T* o, int64_t len) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) {
    if constexpr (sizeof(T) == 4) {
      o[i] = uniform_float(w[i]);
    } else {
      o[i] = uniform_double(w[2 * i], w[2 * i + 1]);
    }
  }
}

template <class T>
void uniform_impl(T* out, int64_t n, const Reservation& r, ParallelFor parallel) {
  check_args("fill_uniform", n, uniform_words<T>(uint64_t(n)), r);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (r.offset % 4 == 0) {  // chunks start on blocks (kChunk is a multiple of 4)
      for_each_chunk<0, 1>(
          out, n, r, parallel, [&](const uint32_t*, T* o, int64_t begin, int64_t end) {
            fused_words_avx512(
                r, r.offset + uint64_t(begin), end - begin,
                [o](size_t i, __m512i words) { _mm512_storeu_ps(o + i, uniform_float16(words)); },
                [o](const uint32_t* w, int64_t i, int64_t count) {
                  uniform_from_words(w, o + i, count);
                });
          });
      return;
    }
  }
#endif
  for_each_chunk<sizeof(T) / 4, 1>(out, n, r, parallel,
                                   [](const uint32_t* w, T* o, int64_t begin, int64_t end) {
                                     uniform_from_words(w, o, end - begin);
                                   });
}

// Pairs of one chunk: elements 2j, 2j+1 from words 2j, 2j+1 (float) or
// 4j .. 4j+3 (double). Flattened so that the double Box-Muller, too big for
// GCC's default inlining, is inlined and the loop vectorizes.
template <class T>
[[gnu::flatten]] void normal_chunk(const uint32_t* w, T* o, int64_t len) {
  const int64_t pairs = len / 2;
#pragma omp simd
  for (int64_t j = 0; j < pairs; ++j) {
    if constexpr (sizeof(T) == 4) {
      box_muller(w[2 * j], w[2 * j + 1], o[2 * j], o[2 * j + 1]);
    } else {
      box_muller(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3], o[2 * j], o[2 * j + 1]);
    }
  }
  if (len % 2 != 0) {
    T dropped;
    if constexpr (sizeof(T) == 4) {
      box_muller(w[2 * pairs], w[2 * pairs + 1], o[2 * pairs], dropped);
    } else {
      box_muller(w[4 * pairs], w[4 * pairs + 1], w[4 * pairs + 2], w[4 * pairs + 3], o[2 * pairs],
                 dropped);
    }
  }
}

template <class T>
void normal_impl(T* out, int64_t n, const Reservation& r, ParallelFor parallel) {
  check_args("fill_normal", n, normal_words<T>(uint64_t(n)), r);
  for_each_chunk<sizeof(T) / 4, 2>(
      out, n, r, parallel,
      [](const uint32_t* w, T* o, int64_t begin, int64_t end) { normal_chunk(w, o, end - begin); });
}

template <class T>
void bernoulli_impl(T* out, int64_t n, double p, const Reservation& r, ParallelFor parallel) {
  check_probability("fill_bernoulli", p);
  check_args("fill_bernoulli", n, bernoulli_words(uint64_t(n)), r);
  const float threshold = bernoulli_threshold(p);
  for_each_chunk<1, 1>(out, n, r, parallel,
                       [threshold](const uint32_t* w, T* o, int64_t begin, int64_t end) {
                         const int64_t len = end - begin;
#pragma omp simd
                         for (int64_t i = 0; i < len; ++i)
                           o[i] = bernoulli(w[i], threshold) ? T(1) : T(0);
                       });
}

// y[i] = x[i] * scale where word i keeps element i, else 0, for i in [0, len).
template <class T>
void dropout_words(const uint32_t* w, const T* x, T* y, int64_t len, float keep, T scale) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) y[i] = bernoulli(w[i], keep) ? x[i] * scale : T(0);
}

template <class T>
void dropout_impl(const T* x, T* y, int64_t n, double p, const Reservation& r,
                  ParallelFor parallel) {
  check_probability("dropout", p);
  check_args("dropout", n, bernoulli_words(uint64_t(n)), r);
  const float keep = bernoulli_threshold(1.0 - p);
  // p == 1 keeps nothing, so the infinite scale is never used.
  const T scale = p < 1.0 ? T(1.0 / (1.0 - p)) : T(0);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (r.offset % 4 == 0) {  // chunks start on blocks (kChunk is a multiple of 4)
      const __m512 keep_v = _mm512_set1_ps(keep), scale_v = _mm512_set1_ps(scale);
      for_each_chunk<0, 1>(
          y, n, r, parallel, [&](const uint32_t*, T* yi, int64_t begin, int64_t end) {
            const float* xi = x + begin;
            fused_words_avx512(
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
  for_each_chunk<1, 1>(y, n, r, parallel,
                       [&](const uint32_t* w, T* yi, int64_t begin, int64_t end) {
                         dropout_words(w, x + begin, yi, end - begin, keep, scale);
                       });
}

}  // namespace

void fill_uniform(float* out, int64_t n, const Reservation& r, ParallelFor parallel) {
  uniform_impl(out, n, r, parallel);
}
void fill_uniform(double* out, int64_t n, const Reservation& r, ParallelFor parallel) {
  uniform_impl(out, n, r, parallel);
}
void fill_normal(float* out, int64_t n, const Reservation& r, ParallelFor parallel) {
  normal_impl(out, n, r, parallel);
}
void fill_normal(double* out, int64_t n, const Reservation& r, ParallelFor parallel) {
  normal_impl(out, n, r, parallel);
}
void fill_bernoulli(float* out, int64_t n, double p, const Reservation& r, ParallelFor parallel) {
  bernoulli_impl(out, n, p, r, parallel);
}
void fill_bernoulli(double* out, int64_t n, double p, const Reservation& r, ParallelFor parallel) {
  bernoulli_impl(out, n, p, r, parallel);
}
void dropout(const float* x, float* y, int64_t n, double p, const Reservation& r,
             ParallelFor parallel) {
  dropout_impl(x, y, n, p, r, parallel);
}
void dropout(const double* x, double* y, int64_t n, double p, const Reservation& r,
             ParallelFor parallel) {
  dropout_impl(x, y, n, p, r, parallel);
}

}  // namespace reprise::rng
