#pragma once
// A gated DeltaNet layer, the linear attention of Qwen3-Next and Qwen3.5
// ("linear_attn"), under transformers' names:
//
//   linear_attn.in_proj_qkvz.weight  (Hk (2 dk + 2 r dv), C)  q, k, v, z grouped by key head
//   linear_attn.in_proj_ba.weight    (2 Hv, C)                b, a grouped by key head
//     (Qwen3.5: in_proj_qkv (2 Hk dk + Hv dv, C), q, k and v each whole,
//     in_proj_z (Hv dv, C), in_proj_b and in_proj_a (Hv, C))
//   linear_attn.conv1d.weight        (Cc, 1, W)               depthwise causal convolution
//   linear_attn.dt_bias              (Hv)
//   linear_attn.A_log                (Hv)
//   linear_attn.norm.weight          (dv)                     the gated RMSNorm
//   linear_attn.out_proj.weight      (C, Hv dv)
//
// Hk/Hv = key/value heads, r = Hv / Hk, dk/dv = their dims, Cc = 2 Hk dk +
// Hv dv (the convolution's channels: q, k, v), W = its width. For x (B, T, C):
//
//   q, k, v, z, b, a   from the two projections (z: (B, T, Hv, dv))
//   [q k v] = silu(causal depthwise conv_W([q k v]))    over positions
//   beta  = sigmoid(b),  decay = exp(-exp(A_log) softplus(a + dt_bias))
//   q, k  = L2-normalised per head (eps 1e-6), q times dk^-1/2, each key
//           head repeated for its r value heads
//   o     = ops::gated_delta_rule(q, k, v, decay, beta)   (B, T, Hv, dv)
//   out   = out_proj(rmsnorm(o) * norm.weight * silu(z))
//
// the arithmetic of transformers' torch path op for op, except that the
// recurrence runs position by position (its decode form) in training too,
// and the convolution sums its W taps in order. Through a KV cache the
// layer keeps the convolution's last W - 1 inputs and the recurrence's
// state (LayerKv::k (B, W - 1, Cc) and v (B, Hv, dk, dv)), so a position's
// bits are the same whether the sequence came in one forward or token by
// token: rollouts equal training.

#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/llama.h"
#include "nn/model_config.h"

namespace reprise::nn {

class GatedDeltaNet final : public Attention {
 public:
  GatedDeltaNet(std::string name, const LlamaConfig& config);
  // x: (B, T, C) -> (B, T, C); with kv, from and into its states (kv->start
  // 0: the sequence starts here, the buffers' contents are ignored).
  Tensor forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv = nullptr) const override;
  // HF's _init_weights: the projections and the convolution normal(0, std)
  // from `stream` of `gen`, dt_bias ones, A_log the log of uniform(0.01,
  // 16) draws, the norm's weight ones.
  void reset_parameters(double std, rng::Generator& gen, std::string_view stream);

  // The convolution's weight (Cc, 1, W), in a module of its own as HF's nn.Conv1d.
  class Conv : public Module {
   public:
    Conv(int64_t channels, int64_t width);
    const Tensor& weight() const { return weight_; }

   private:
    Tensor weight_;
  };

  // Qwen3-Next's grouped projections, or Qwen3.5's apart
  // (LinearAttentionConfig::split_projections); the others are nullptr.
  std::unique_ptr<Linear> in_proj_qkvz, in_proj_ba;
  std::unique_ptr<Linear> in_proj_qkv, in_proj_z, in_proj_b, in_proj_a;
  Conv conv1d;
  RMSNorm norm;
  Linear out_proj;
  const Tensor& dt_bias() const { return dt_bias_; }
  const Tensor& A_log() const { return a_log_; }

 private:
  LinearAttentionConfig shape_;
  Tensor dt_bias_, a_log_;
};

}  // namespace reprise::nn
