#pragma once
// The mixture-of-experts feed-forward layer of Mixtral, Qwen2-MoE,
// Qwen3-MoE, OLMoE, DeepSeek-V3, GLM-4.5 and GPT-OSS, under each family's names
// (MoeNames, from the family's row in nn/model_config.h). Mixtral's:
//
//   <block>.gate.weight                     (E, C)  the router
//   <block>.experts.{e}.w1.weight           (F, C)  gate projection
//   <block>.experts.{e}.w2.weight           (C, F)  down projection
//   <block>.experts.{e}.w3.weight           (F, C)  up projection
//   <block>.shared_experts.gate_proj.weight (S, C)  only with a shared expert
//   <block>.shared_experts.up_proj.weight   (S, C)
//   <block>.shared_experts.down_proj.weight (C, S)
//
// with <block> = "model.layers.{i}.block_sparse_moe"; the others' are
// "model.layers.{i}.mlp" with experts.{e}.gate_proj / up_proj / down_proj,
// Qwen2-MoE's shared expert "shared_expert" with its (1, C)
// "shared_expert_gate", and DeepSeek-V3's router bias
// "gate.e_score_correction_bias" (E), a buffer. GPT-OSS's router is
// "router" with a bias (E), and its experts' projections have biases;
// its checkpoints fuse each layer's experts (nn/hf_layout.h).
//
// N = tokens (B T), C = hidden_size, F = the experts' intermediate size,
// E = num_local_experts, k = num_experts_per_tok, M = kept (token, expert)
// assignments (N k without a capacity limit), S = the shared expert's width.
//
// The layer computes, for each token x (a row of (N, C)):
//   logits = gate(x) (+ bias)                         (E)   in f32 (x's dtype)
//   s      = softmax(logits) or sigmoid(logits)       (E)   scoring_func
//   top    = the k largest s, ties by lower expert    (k)   indices and values
//            (DeepSeek-V3: the k largest s + bias among the topk_group
//            best of n_group groups, values from s; ops/moe_route.h)
//   g      = top / sum(top) when norm_topk_prob, else top; times routed_scaling_factor
//   out    = sum_j g_j expert_{top_j}(x) + shared(x)
//   expert_e(x) = down(silu(gate_proj(x)) * up(x))    (each with its bias in GPT-OSS,
//                 and its clamped SwiGLU: MoeConfig::clamped_swiglu)
//   shared(x)   = the shared expert's SwiGLU, times sigmoid(shared_expert_gate(x))
//                 with a shared expert gate (Qwen2-MoE)
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
//
// Expert parallelism: with an ExpertDispatch, a process holds only its
// share of each layer's experts (named by their index in the whole layer)
// and every process routes its own tokens; the dispatch sends each kept
// assignment's row to the process holding its expert and brings the
// output back, in the same sorted order. A row's output does not depend on
// which other rows share its block (each GEMM element is one fixed FMA
// chain), and the receiving process runs one block per (sending process,
// expert), so an expert's weight gradient is the sum, in process order, of
// the blocks one process would compute micro-batch by micro-batch.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/model_config.h"
#include "nn/module.h"
#include "rng/generator.h"

namespace reprise::nn {

// What a family's checkpoints call an MoE layer's pieces (from its row,
// FamilyInfo); the default is Mixtral's.
struct MoeNames {
  const char* expert_gate = "w1";
  const char* expert_up = "w3";
  const char* expert_down = "w2";
  const char* shared = "shared_experts";
  const char* router = "gate";
};
MoeNames moe_names(const FamilyInfo& family);

// The margins (ops::MoeRoute::margin) a layer's statistics count tokens
// within: a token within m ulps of another choice may flip when its
// scores move by about m ulps (recompute noise, another kernel, bf16).
inline constexpr std::array<int64_t, 3> kMarginUlps{1, 16, 256};

// Routing statistics of one MoE layer's last forward.
struct MoeLayerStats {
  std::string layer;                        // "model.layers.3.block_sparse_moe"
  int64_t tokens = 0;                       // N
  std::vector<int64_t> tokens_per_expert;   // (E) assignments routed to each expert
  std::vector<int64_t> dropped_per_expert;  // (E) of those, dropped by the capacity limit
  int64_t tokens_dropped = 0;               // sum of dropped_per_expert
  double aux_loss = 0;                      // this layer's load-balancing loss alone
  double z_loss = 0;                        // this layer's router z-loss
  // Tokens whose margin is at most kMarginUlps[i] ulps: [0] counts the
  // near-ties, a top-k boundary within one ulp.
  std::array<int64_t, kMarginUlps.size()> within_ulps{};
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
  Tensor margin;      // (N) i64, each token's routing margin (ops::MoeRoute::margin)
  // (kMarginUlps.size()) i64, the tokens within each margin, where terms
  // of several forwards were combined (and margin is undefined).
  Tensor within_ulps;
  int64_t rows = 0;  // N (combined: summed)

  // The layer's routing statistics (read on the host).
  MoeLayerStats stats() const;
  // The tokens within each of kMarginUlps (read on the host).
  std::array<int64_t, kMarginUlps.size()> count_within_ulps() const;
};

// The experts a process holds of one layer: [first, first + count).
struct ExpertRange {
  int64_t first = 0;
  int64_t count = 0;
};

// Runs a process's own experts on blocks of rows: `rows` (n, C), block j
// being block_rows[j] consecutive rows for expert block_expert[j] (an index
// in the whole layer, one of this process's) -> (n, C), row i through its
// block's expert.
using LocalExperts =
    std::function<Tensor(const Tensor& rows, const std::vector<int64_t>& block_rows,
                         const std::vector<int64_t>& block_expert)>;

// The scope, under the layer's "experts", of the exchanges an
// ExpertDispatch records ("<block>.experts.all_to_all.dispatch", ".combine"):
// checkpointed layers always save their outputs (nn/checkpointing.h), so a
// replay never communicates.
inline constexpr const char* kExpertExchangeScope = "all_to_all";

// How the experts of MoE layers are split over processes (expert
// parallelism); parallel/expert_parallel.h implements it over a
// Communicator. Every process calls run() for every layer, in the same
// order.
class ExpertDispatch {
 public:
  virtual ~ExpertDispatch() = default;
  // This process's experts among `num_experts`; raises when they do not
  // split evenly over the processes.
  virtual ExpertRange local_experts(int64_t num_experts) const = 0;
  // xs: (M, C) this process's kept assignments sorted by expert, counts[e]
  // rows for expert e (E values) -> (M, C): each row through its expert, on
  // the process that holds it (`run_local` there), in xs's order.
  // Differentiable in xs and in what run_local reads.
  virtual Tensor run(const Tensor& xs, const std::vector<int64_t>& counts,
                     const LocalExperts& run_local) const = 0;
};

// One expert: down(silu(gate_proj(x)) * up(x)), under the family's names
// (Mixtral's w1, w3, w2), its projections with biases when `bias`.
class MoeExpert : public Module {
 public:
  MoeExpert(std::string name, int64_t hidden_size, int64_t intermediate_size,
            const MoeNames& names = {}, bool bias = false);

  Linear gate_proj, up_proj, down_proj;  // (F, C), (F, C), (C, F)
};

// The layer's weights as plain tensors, one dtype (f32, or f64 for the
// gradient check).
struct MoeWeights {
  Tensor gate;                     // (E, C) the router
  Tensor gate_bias;                // (E) its bias (GPT-OSS), or undefined
  Tensor score_bias;               // (E) DeepSeek's e_score_correction_bias, or undefined
  std::vector<Tensor> w1, w2, w3;  // one per expert held: gate (F, C), down (C, F), up (F, C)
  std::vector<Tensor> b1, b2, b3;  // their biases (F), (C), (F) with expert_bias, else empty
  int64_t first_expert = 0;        // the index of w1[0]'s expert (expert parallel)
  Tensor shared_gate, shared_up;   // (S, C), undefined without shared experts
  Tensor shared_down;              // (C, S)
  Tensor shared_expert_gate;       // (1, C) Qwen2-MoE's, or undefined
};

struct MoeResult {
  Tensor out;  // x's shape
  MoeRouterTerms terms;
  // Routing statistics (read on the host).
  MoeLayerStats stats() const { return terms.stats(); }
};

// The MoE layer as a function: what SparseMoeBlock::forward computes, for
// weights of any floating dtype matching x. Records the router under
// Scope(names.router), the experts under Scope("experts") (each projection under
// its name in `names`) and the shared expert under Scope(names.shared) of
// the current scope. `layer` names the layer in errors and in its
// statistics. x: (B, T, C) or (N, C). With `dispatch`, `weights` holds
// this process's experts (dispatch's local_experts), else all of them.
MoeResult moe_forward(const Tensor& x, const MoeWeights& weights, const MoeConfig& config,
                      const std::string& layer, const ExpertDispatch* dispatch = nullptr,
                      const MoeNames& names = {});

// The MoE feed-forward layer ("block_sparse_moe" in a Mixtral model, "mlp"
// in the others).
class SparseMoeBlock : public Module {
 public:
  // intermediate_size: the model's (dense) one; the experts' width is
  // config.expert_intermediate_size(intermediate_size). Raises when
  // config.validate() does or a size is not positive. With `dispatch` the
  // block holds only this process's experts.
  SparseMoeBlock(std::string name, int64_t hidden_size, int64_t intermediate_size,
                 const MoeConfig& config, std::shared_ptr<const ExpertDispatch> dispatch = nullptr,
                 const MoeNames& names = {});

  // x: (B, T, C) or (N, C) f32 (f64 for gradient checks) -> the output
  // (x's shape) with this call's router loss terms. Runs under
  // Scope(name()) (the caller's scope in front). limit_capacity false
  // ignores the config's capacity_factor: every token goes to its top-k
  // experts (inference, LlamaForCausalLM::forward_cached).
  MoeResult forward(const Tensor& x, bool limit_capacity = true) const;

  const MoeConfig& config() const { return config_; }
  // The parameters as MoeWeights (the leaves themselves).
  MoeWeights weights() const;
  // The experts this block holds (all of them without a dispatch).
  ExpertRange local_experts() const { return local_; }
  // Reserves from `stream` of `gen` the words that initialising experts
  // [first, end) would draw (their three projections, as Linear::reset_parameters),
  // so that a process holding some experts initialises them to the values
  // one process holding all of them gives.
  void skip_expert_init(int64_t first, int64_t end, rng::Generator& gen,
                        std::string_view stream) const;

  // The router ("gate"; GPT-OSS's "router"): its weight (E, C), with
  // router_bias its bias (E), and for DeepSeek-V3 the buffer
  // e_score_correction_bias (E).
  class Router : public Module {
   public:
    Router(const char* name, int64_t hidden_size, const MoeConfig& config);
    // The weight (and the bias) normal(0, std^2) from `stream` of `gen`,
    // as HF initialises them; the score bias zero.
    void reset_parameters(double std, rng::Generator& gen, std::string_view stream);
    const Tensor& weight() const { return weight_; }
    const Tensor& bias() const { return bias_; }              // undefined without
    const Tensor& score_bias() const { return score_bias_; }  // undefined without

   private:
    Tensor weight_, bias_, score_bias_;
  };

  Router gate;
  ModuleList<MoeExpert> experts;  // E of them
  // Every token runs through it (scaled by shared_expert_gate when set);
  // nullptr without.
  std::unique_ptr<GatedMLP> shared_experts;
  std::unique_ptr<Linear> shared_expert_gate;  // (1, C)

 private:
  MoeConfig config_;
  std::shared_ptr<const ExpertDispatch> dispatch_;
  MoeNames names_;
  ExpertRange local_;
  int64_t hidden_size_, expert_size_;
};

// The module names an MoE layer records under, in a decoder layer: its
// block ("mlp"; Mixtral's "block_sparse_moe") and the block's router
// ("gate"; GPT-OSS's "router"). An empty block: a model without MoE layers.
struct MoeScopes {
  std::string block;
  std::string router = "gate";
  bool empty() const { return block.empty(); }
};
MoeScopes moe_scopes_of(const LlamaConfig& config);
// The scope glob of every MoE layer's router: "*.block_sparse_moe.gate",
// "*.mlp.gate", "*.mlp.router". The router's logits, scores and routing
// decision are recorded under it (and a dense MLP's "mlp.gate_proj" is not
// matched).
std::string router_scopes(const MoeScopes& moe);

// The routed expert a parameter name belongs to, as its module path with a
// final dot ("model.layers.3.block_sparse_moe.experts.5." for
// "model.layers.3.block_sparse_moe.experts.5.w1.weight", "model.layers.1.mlp.experts.0."
// for "model.layers.1.mlp.experts.0.up_proj.weight"; anything may follow, an
// optimizer state's suffix too), or "" for a name of no expert.
std::string expert_of(std::string_view name);
// Whether expert_of(name) is not empty: what expert parallelism splits over
// processes instead of replicating.
bool is_expert_parameter(std::string_view name);

}  // namespace reprise::nn
