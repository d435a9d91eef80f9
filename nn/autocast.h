#pragma once
// Mixed precision for nn's matrix products, the policy of torch.autocast
// with bf16: inside an Autocast scope, every projection (Linear, the tied
// LM head, an MoE layer's routed and shared experts) multiplies 16-bit
// copies of its operands, accumulates in f32, rounds the product once to
// 16 bits and widens it back, exactly, to its weight's dtype. The
// exceptions, where torch leaves a product 16-bit and the ops after it can
// read it (each computes in f32 and rounds once, so the bits are those of
// widening first):
//   - the gate and up products of a bf16 MLP (dense, or the MoE experts
//     and shared expert without biases) stay bf16 for SwiGLU, so SwiGLU
//     and down_proj save bf16;
//   - with 16-bit attention too, q, k and v stay 16-bit through RoPE into
//     attention (in a layer without q/k norms, an output gate or biases,
//     and outside a KV cache);
//   - the LM head's bf16 logits stay bf16 and the loss reads them, so
//     neither the logits nor their gradient has an f32 copy.
// Everything else (embedding, norms, RoPE, attention, softmax, loss, the
// MoE router) computes in the model's dtype, so with f32 parameters:
//   - the parameters stay f32 (the master weights, and the optimizer's
//     state with them); each forward casts them to bf16 as recorded ops, so
//     their gradients come back through the cast as f32;
//   - the activations a projection saves for backward are bf16, half the
//     bytes; its gradients are bf16, rounded where they enter it; a 16-bit
//     input that several projections share (autocast_operand) sums their
//     gradients in f32 (autograd/backward.h), as PyTorch's separate per-op
//     casts do;
//   - the router's scores are f32; its gate follows MoeConfig::router_dtype.
//
// Attention is part of "everything else" by default (our own kernel, in
// f32 on a GPU too). With `attention` bf16 (or f16) it runs on 16-bit
// copies of q, k and v instead: on a GPU that is cuDNN's fused flash
// attention (tensor cores), the fast path; its output is widened back.
//
// The casts are recorded ops like any other, so a checkpointed region
// replays them from the tape bit for bit with no scope open. The scope is
// thread-local, like GradMode; a projection called outside any scope is
// ops::linear unchanged.

#include <vector>

#include "engine/dtype.h"
#include "engine/tensor.h"
#include "ops/attention.h"

namespace reprise::nn {

class Autocast {
 public:
  // dtype (of the projections) and attention: bf16 or f16, or f32 for no
  // casting (so a caller can pass its run's settings either way); anything
  // else raises an Error.
  explicit Autocast(DType dtype, DType attention = DType::f32);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DType previous_, previous_attention_;
};

// The innermost open scope's dtypes; f32 when none is open.
DType autocast_dtype();
DType autocast_attention_dtype();

// t cast to autocast_dtype() (a recorded, differentiable cast) when a
// 16-bit scope is open and t is a wider float; t itself otherwise. A
// projection's input goes through this once when several projections
// share it (q, k and v; gate and up), so they share one 16-bit copy.
Tensor autocast_operand(const Tensor& t);

// t widened to f32 (exactly, a recorded cast) when it is 16-bit; t itself
// otherwise: for the readers of a product autocast left 16-bit (logits for
// the sampler and log-probs).
Tensor widened(const Tensor& t);

// x: (..., K), w: (N, K) -> (..., N) in w's dtype: ops::linear of the
// autocast operands.
Tensor autocast_linear(const Tensor& x, const Tensor& w);

// The same product left in the 16-bit dtype, as torch.autocast leaves a
// product for the ops after it; outside a 16-bit scope, ops::linear.
Tensor autocast_product(const Tensor& x, const Tensor& w);

// The product for an op that reads bf16 (SwiGLU): autocast_product in a
// bf16 scope, autocast_linear otherwise.
Tensor autocast_bf16_product(const Tensor& x, const Tensor& w);

// ops::scaled_dot_product_attention (q: (B, Hq, T, D), k: (B, Hkv, S, D),
// v: (B, Hkv, S, Dv) -> (B, Hq, T, Dv) in q's dtype) on copies of q, k, v in
// autocast_attention_dtype() when that is 16-bit, else on q, k, v.
Tensor autocast_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const ops::AttentionOptions& options);

// ops::grouped_linear (x: (M, K), counts: (E), weights: E x (N, K)) of the
// autocast operands -> (M, N) in the weights' dtype.
Tensor autocast_grouped_linear(const Tensor& x, const Tensor& counts,
                               const std::vector<Tensor>& weights);

// The same product left in the 16-bit dtype (the experts' gate and up
// products for SwiGLU); outside a 16-bit scope, ops::grouped_linear.
Tensor autocast_grouped_product(const Tensor& x, const Tensor& counts,
                                const std::vector<Tensor>& weights);

}  // namespace reprise::nn
