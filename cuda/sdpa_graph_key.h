#pragma once
// The host-side logic of bf16/f16 attention on cuDNN (cuda/sdpa_cudnn.h):
// what identifies one cuDNN attention graph (the cache key), whether cuDNN's
// fused flash attention can run a problem, and the Philox key its dropout
// gets from a reservation. Plain C++, unit-tested without a GPU.

#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "engine/backend.h"

namespace reprise::cuda {

// One attention problem as cuDNN's graph sees it. q (B, Hq, T, D),
// k (B, Hkv, S, D), v (B, Hkv, S, Dv) with their strides; out, lse and dout
// are contiguous. A graph is built once per key and reused.
struct SdpaGraphKey {
  DType dtype;
  bool backward;
  int64_t b, hq, hkv, t, s, d, dv;
  std::array<int64_t, 4> q_stride, k_stride, v_stride;
  bool causal;
  int64_t causal_offset;  // query i sees keys j <= i + causal_offset
  int64_t window;         // > 0: also j > i + causal_offset - window; 0 without causal
  double scale;
  double dropout_p;  // 0: none

  auto operator<=>(const SdpaGraphKey&) const = default;
};

// The key of the problem q, k, v with `params`, forward or backward.
SdpaGraphKey sdpa_graph_key(const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionParams& params, bool backward);

// How cuDNN's diagonal band states a causal key's mask: query i keeps key j
// when j <= i + shift + right and, with a left bound, j > i + shift - left,
// where shift is 0 aligned top-left and S - T aligned bottom-right.
struct CudnnBand {
  bool bottom_right;
  int64_t right;
  int64_t left;  // 0: no left bound
};

// The band of a causal key: top-left with right = causal_offset, and left =
// window - causal_offset when there is a window; a window of at most
// causal_offset (cuDNN takes only left > 0) bottom-right with right = 0 and
// left = window, when causal_offset = S - T (the KV cache's alignment).
// Meaningful when cudnn_sdpa_unsupported(key) is "".
CudnnBand cudnn_sdpa_band(const SdpaGraphKey& key);

// Why cuDNN's fused attention cannot run `key`, or "" when it can: q, k, v
// must be bf16 or f16, head sizes multiples of 8 up to 256, the last dim of
// each operand contiguous; a sliding window needs T <= S and a band
// (cudnn_sdpa_band) that states it, and no dropout when that band is
// aligned bottom-right.
std::string cudnn_sdpa_unsupported(const SdpaGraphKey& key);

// cuDNN's dropout is Philox keyed by a 64-bit seed, counting from an offset;
// its mask bits are cuDNN's, not the CPU's. Each reservation gets a key of
// its own, a hash of its (seed, subsequence, offset), with offset 0: a
// replay repeats its forward's mask exactly, and two reservations never
// share a Philox stream (so no two draws overlap, whatever cuDNN's counter
// layout).
struct CudnnDropoutSeed {
  int64_t seed;
  int64_t offset;
};
CudnnDropoutSeed cudnn_dropout_seed(const rng::Reservation& words);

}  // namespace reprise::cuda
