#pragma once
// The shape of a gated DeltaNet layer (Qwen3-Next's linear attention,
// nn/gated_deltanet.h), under transformers' Qwen3NextConfig field names.

#include <cstdint>

namespace reprise::nn {

struct LinearAttentionConfig {
  int64_t conv_kernel = 4;       // linear_conv_kernel_dim: the causal convolution's width
  int64_t key_heads = 16;        // linear_num_key_heads (Hk)
  int64_t value_heads = 32;      // linear_num_value_heads (Hv), a multiple of Hk
  int64_t key_head_dim = 128;    // linear_key_head_dim (dk)
  int64_t value_head_dim = 128;  // linear_value_head_dim (dv)
  // The input projections as Qwen3.5 writes them, in_proj_qkv (q, k, v
  // each contiguous), in_proj_z, in_proj_b and in_proj_a; else Qwen3-Next's
  // in_proj_qkvz and in_proj_ba, grouped by key head. A family's layout,
  // not a config.json field.
  bool split_projections = false;

  // The channels the convolution mixes: q, k (Hk dk each) and v (Hv dv).
  int64_t conv_dim() const { return 2 * key_heads * key_head_dim + value_heads * value_head_dim; }
  // Raises an Error naming the field when out of range.
  void validate() const;
  friend bool operator==(const LinearAttentionConfig&, const LinearAttentionConfig&) = default;
};

}  // namespace reprise::nn
