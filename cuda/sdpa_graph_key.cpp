#include "cuda/sdpa_graph_key.h"

#include <sstream>

#include "engine/functors.h"

namespace reprise::cuda {
namespace {

std::array<int64_t, 4> strides4(const Tensor& t) {
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

bool head_size_ok(int64_t d) { return d >= 8 && d <= 256 && d % 8 == 0; }

}  // namespace

SdpaGraphKey sdpa_graph_key(const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionParams& params, bool backward) {
  return SdpaGraphKey{
      .dtype = q.dtype(),
      .backward = backward,
      .b = q.size(0),
      .hq = q.size(1),
      .hkv = k.size(1),
      .t = q.size(2),
      .s = k.size(2),
      .d = q.size(3),
      .dv = v.size(3),
      .q_stride = strides4(q),
      .k_stride = strides4(k),
      .v_stride = strides4(v),
      .causal = params.causal,
      .causal_offset = params.causal ? params.causal_offset : 0,
      .window = params.causal ? params.window : 0,
      .scale = params.scale,
      .dropout_p = params.dropout ? params.dropout->p : 0.0,
  };
}

CudnnBand cudnn_sdpa_band(const SdpaGraphKey& key) {
  if (key.window == 0 || key.window > key.causal_offset) {
    return {.bottom_right = false,
            .right = key.causal_offset,
            .left = key.window > 0 ? key.window - key.causal_offset : 0};
  }
  return {.bottom_right = true, .right = 0, .left = key.window};
}

std::string cudnn_sdpa_unsupported(const SdpaGraphKey& key) {
  std::ostringstream why;
  if (!is_16bit_float(key.dtype)) {
    why << "dtype " << dtype_name(key.dtype) << " (cuDNN's fused attention takes bf16 or f16)";
  } else if (!head_size_ok(key.d) || !head_size_ok(key.dv)) {
    why << "head sizes D = " << key.d << ", Dv = " << key.dv
        << " (cuDNN's fused attention needs multiples of 8 from 8 to 256)";
  } else if (key.q_stride[3] != 1 || key.k_stride[3] != 1 || key.v_stride[3] != 1) {
    why << "a head dimension that is not contiguous";
  } else if (key.window > 0 && key.t > key.s) {
    why << "a sliding window with more queries than keys (T = " << key.t << ", S = " << key.s
        << "; cuDNN's sliding window needs T <= S)";
  } else if (key.window > 0 && cudnn_sdpa_band(key).bottom_right &&
             key.causal_offset != key.s - key.t) {
    why << "a sliding window of " << key.window << " keys with causal_offset " << key.causal_offset
        << " (cuDNN's band needs window > causal_offset, or causal_offset = S - T = "
        << key.s - key.t << ")";
  } else if (key.window > 0 && cudnn_sdpa_band(key).bottom_right && key.dropout_p > 0) {
    why << "dropout with a sliding window of " << key.window << " keys and causal_offset "
        << key.causal_offset << " = S - T (cuDNN's bottom-right band takes no dropout)";
  }
  return why.str();
}

CudnnDropoutSeed cudnn_dropout_seed(const rng::Reservation& words) {
  const uint64_t key =
      fn::splitmix64(words.seed ^ fn::splitmix64(words.subsequence ^ fn::splitmix64(words.offset)));
  return {.seed = int64_t(key >> 1), .offset = 0};
}

}  // namespace reprise::cuda
