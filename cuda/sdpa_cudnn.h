#pragma once
// bf16 and f16 attention on the GPU: cuDNN's fused flash attention, built
// with the cuDNN frontend's graph API, forward and backward. The fast path
// for 16-bit attention (tensor cores); f32 and f64 attention run our own
// kernel (cuda/kernels/attention.h), which gives the CPU's bits.
//
// - Deterministic: the backward graph asks for cuDNN's deterministic
//   algorithm (set_deterministic_algorithm), and the forward has none other;
//   a graph, with its execution plan, is built once per problem
//   (cuda/sdpa_graph_key.h) and cached, so a recompute runs the plan its
//   forward ran.
// - Dropout is cuDNN's, keyed by the op's recorded reservation
//   (cudnn_dropout_seed): a replay regenerates its forward's mask, but the
//   mask is not the CPU's.
// - The causal mask and a sliding window are cuDNN's diagonal band
//   (cudnn_sdpa_band in cuda/sdpa_graph_key.h); a window the band cannot
//   state is an Error naming it.
// - Not the CPU's bits in general: cuDNN sums in its own order and rounds
//   P to 16 bits before P V.
//
// Built when the frontend's headers are found (scripts/cudnn_frontend.sh);
// otherwise each call raises an Error saying so.

#include "engine/backend.h"

namespace reprise::cuda {

// Whether this build has cuDNN attention.
bool built_with_cudnn_attention();

// Backend::sdpa for 16-bit q, k, v on `device`: {out (B, Hq, T, Dv) in q's
// dtype, lse (B, Hq, T) f32}.
Tensors cudnn_sdpa(Device device, const Tensor& q, const Tensor& k, const Tensor& v,
                   const AttentionParams& params);

// Backend::sdpa_backward for what cudnn_sdpa computed: {dq, dk, dv} in q's
// dtype; dq and dk undefined unless needed.
Tensors cudnn_sdpa_backward(Device device, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse, const Tensor& dout,
                            const AttentionParams& params, bool need_dq, bool need_dk);

}  // namespace reprise::cuda
