#pragma once
// The mixture-of-experts feed-forward layer of Mixtral and DeepSeek, with
// Hugging Face Mixtral's (legacy, on-disk) parameter names:
//
//   <block>.gate.weight                     (E, C)  the router
//   <block>.experts.{e}.w1.weight           (F, C)  gate projection
//   <block>.experts.{e}.w2.weight           (C, F)  down projection
//   <block>.experts.{e}.w3.weight           (F, C)  up projection
//   <block>.shared_experts.gate_proj.weight (S, C)  only with n_shared_experts > 0
//   <block>.shared_experts.up_proj.weight   (S, C)  (DeepSeek's names; not in
//   <block>.shared_experts.down_proj.weight (C, S)   Mixtral)
//
// where <block> is "model.layers.{i}.block_sparse_moe" in a model.
//
// N = tokens (B T), C = hidden_size, F = intermediate_size (per expert),
// E = num_local_experts, k = num_experts_per_tok, M = kept (token, expert)
// assignments (N k without a capacity limit), S = n_shared_experts F.
//
// The layer computes, for each token x (a row of (N, C)):
//   logits = gate(x)                                  (E)   in f32 (x's dtype)
//   s      = softmax(logits) or sigmoid(logits)       (E)   scoring_func
//   top    = the k largest s, ties by lower expert    (k)   indices and values
//   g      = top / sum(top) when norm_topk_prob, else top
//   out    = sum_j g_j expert_{top_j}(x) + shared_experts(x)
//   expert_e(x) = w2(silu(w1(x)) * w3(x))
// With the defaults (softmax, top-2, renormalized, no capacity limit, no
// shared expert) this is transformers' MixtralSparseMoeBlock.
//
// Dispatch and combine are deterministic: the kept assignments are sorted
// by expert, stably in token order (a counting sort on one thread), each
// expert runs as one block of a grouped matmul over its contiguous rows
// (ops/grouped_linear.h), and each token's output adds its experts'
// contributions in increasing expert order (ops::index_add), as HF's loop
// over experts does. So the bits do not depend on the thread count.
//
// Capacity (capacity_factor > 0): each expert keeps at most
// ceil(capacity_factor * N k / E) assignments, the earliest tokens first;
// the rest are dropped and counted. A dropped assignment contributes
// nothing (its gate is not redistributed), so a token whose every
// assignment is dropped gets only the shared experts' output (zero without
// them), and the decoder layer's residual carries it unchanged.
//
// Router under recompute: logits, scores and the routing decision (the
// fused op "moe_route", ops/moe_route.h) are recorded under the scope
// "<block>.gate", so a checkpoint policy can force-save them
// (ActivationCheckpointing::save_router: recompute never re-decides
// routing) or recompute them like everything else.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/module.h"

namespace reprise::nn {

enum class RouterScoring {
  softmax,  // Mixtral: softmax over all experts, then top-k
  sigmoid,  // DeepSeek-V3: independent sigmoid per expert, then top-k
};
const char* router_scoring_name(RouterScoring s);  // "softmax", "sigmoid"

// The precision of the router's gate matmul. Scores, top-k and gates are
// always computed in f32.
enum class RouterDType {
  f32,   // default
  bf16,  // the gate's input, weight and logits rounded to bf16 (round to
         // nearest even), the matmul accumulated in f32 from the rounded
         // values: a bf16 router as mixed-precision training runs it.
         // Gradients pass through the roundings unchanged (ops::cast).
};
const char* router_dtype_name(RouterDType d);  // "float32", "bfloat16"

// The MoE fields of a model config. Names follow transformers'
// MixtralConfig where it has the field, else DeepSeek-V3's / Qwen-MoE's.
struct MoeConfig {
  int64_t num_local_experts = 8;        // E
  int64_t num_experts_per_tok = 2;      // k, in [1, E]
  double router_aux_loss_coef = 0.001;  // weight of the load-balancing loss in training
  double router_z_loss_coef = 0.0;      // weight of the router z-loss (ST-MoE)
  double router_jitter_noise = 0.0;     // must be 0 (jitter is not supported)
  RouterScoring scoring_func = RouterScoring::softmax;
  bool norm_topk_prob = true;    // renormalize the k gates to sum to 1
  double capacity_factor = 0.0;  // 0: no limit; else > 0 (see above)
  int64_t n_shared_experts = 0;  // shared SwiGLU of n_shared_experts * F
  RouterDType router_dtype = RouterDType::f32;

  // Raises an Error naming the field and its value when out of range.
  void validate() const;
  // The per-expert capacity for N tokens: ceil(capacity_factor * N k / E),
  // or -1 (no limit) when capacity_factor is 0.
  int64_t capacity(int64_t tokens) const;
  // "4 experts, top-2 softmax, capacity 1.25, 1 shared"
  std::string describe() const;
  friend bool operator==(const MoeConfig&, const MoeConfig&) = default;
};

// Routing statistics of one MoE layer's last forward.
struct MoeLayerStats {
  std::string layer;                        // "model.layers.3.block_sparse_moe"
  int64_t tokens = 0;                       // N
  std::vector<int64_t> tokens_per_expert;   // (E) assignments routed to each expert
  std::vector<int64_t> dropped_per_expert;  // (E) of those, dropped by the capacity limit
  int64_t tokens_dropped = 0;               // sum of dropped_per_expert
  double aux_loss = 0;                      // this layer's load-balancing loss alone
  double z_loss = 0;                        // this layer's router z-loss
};

// The router's differentiable loss terms of one layer's last forward, in
// the sums that combine across layers (see LlamaForCausalLM::router_losses):
//   aux = E * sum_e (routed_e / R) (prob_sum_e / R)   (HF's load_balancing_loss_func)
//   z   = z_sum / R                                   (mean of logsumexp(logits)^2)
// with R the rows summed over the layers combined. A term whose coefficient
// (router_aux_loss_coef, router_z_loss_coef) is 0 is computed without
// recording: its value is right, it carries no gradient.
// They stay on the layer's device: nothing here is read on the host unless
// asked for (MoeRouterTerms::stats).
struct MoeRouterTerms {
  std::string layer;  // the scope the layer ran under
  Tensor prob_sum;    // (E) f32, sum over tokens of the router probabilities
                      // (softmax(logits); for sigmoid scoring s / sum(s))
  Tensor z_sum;       // () f32, sum over tokens of logsumexp(logits)^2
  Tensor routed;      // (E) i64, routed assignments per expert
  Tensor kept;        // (E) i64, of those, the ones the capacity limit kept
  int64_t rows = 0;   // N

  // The layer's routing statistics (read on the host).
  MoeLayerStats stats() const;
};

// One expert: w2(silu(w1(x)) * w3(x)), Mixtral's MixtralBlockSparseTop2MLP names.
class MoeExpert : public Module {
 public:
  MoeExpert(std::string name, int64_t hidden_size, int64_t intermediate_size);

  Linear w1, w2, w3;  // (F, C), (C, F), (F, C)
};

// The layer's weights as plain tensors, one dtype (f32, or f64 for the
// gradient check).
struct MoeWeights {
  Tensor gate;                     // (E, C)
  std::vector<Tensor> w1, w2, w3;  // E each: (F, C), (C, F), (F, C)
  Tensor shared_gate, shared_up;   // (S, C), undefined without shared experts
  Tensor shared_down;              // (C, S)
};

struct MoeResult {
  Tensor out;  // x's shape
  MoeRouterTerms terms;
  // Routing statistics (read on the host).
  MoeLayerStats stats() const { return terms.stats(); }
};

// The MoE layer as a function: what SparseMoeBlock::forward computes, for
// weights of any floating dtype matching x. Records the router under
// Scope("gate"), the experts under Scope("experts") and the shared experts
// under Scope("shared_experts") of the current scope. `layer` names the
// layer in errors and in its statistics. x: (B, T, C) or (N, C).
MoeResult moe_forward(const Tensor& x, const MoeWeights& weights, const MoeConfig& config,
                      const std::string& layer);

// The MoE feed-forward layer ("block_sparse_moe" in a Mixtral model).
class SparseMoeBlock : public Module {
 public:
  // Raises when config.validate() does or a size is not positive.
  SparseMoeBlock(std::string name, int64_t hidden_size, int64_t intermediate_size,
                 const MoeConfig& config);

  // x: (B, T, C) or (N, C) f32 (f64 for gradient checks) -> the output
  // (x's shape) with this call's router loss terms. Runs under
  // Scope(name()) (the caller's scope in front). limit_capacity false
  // ignores the config's capacity_factor: every token goes to its top-k
  // experts (inference, LlamaForCausalLM::forward_cached).
  MoeResult forward(const Tensor& x, bool limit_capacity = true) const;

  const MoeConfig& config() const { return config_; }
  // The parameters as MoeWeights (the leaves themselves).
  MoeWeights weights() const;

  Linear gate;                                // (E, C)
  ModuleList<MoeExpert> experts;              // E of them
  std::unique_ptr<SwiGluMLP> shared_experts;  // every token runs through them; nullptr without

 private:
  MoeConfig config_;
};

}  // namespace reprise::nn
