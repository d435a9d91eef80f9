#include "nn/moe.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/indexing.h"
#include "ops/matmul.h"
#include "ops/moe_route.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "rng/distributions.h"

namespace reprise::nn {

// ---- MoeConfig --------------------------------------------------------------

const char* router_scoring_name(RouterScoring s) {
  return s == RouterScoring::softmax ? "softmax" : "sigmoid";
}

const char* router_dtype_name(RouterDType d) {
  return d == RouterDType::f32 ? "float32" : "bfloat16";
}

void MoeConfig::validate() const {
  REPRISE_CHECK(num_local_experts >= 1, "MoeConfig: num_local_experts must be positive, got ",
                num_local_experts);
  REPRISE_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_local_experts,
                "MoeConfig: num_experts_per_tok must be in [1, num_local_experts = ",
                num_local_experts, "], got ", num_experts_per_tok);
  REPRISE_CHECK(router_aux_loss_coef >= 0 && std::isfinite(router_aux_loss_coef),
                "MoeConfig: router_aux_loss_coef must be >= 0, got ", router_aux_loss_coef);
  REPRISE_CHECK(router_z_loss_coef >= 0 && std::isfinite(router_z_loss_coef),
                "MoeConfig: router_z_loss_coef must be >= 0, got ", router_z_loss_coef);
  REPRISE_CHECK(router_jitter_noise == 0, "MoeConfig: router_jitter_noise ", router_jitter_noise,
                " is not supported (only 0)");
  REPRISE_CHECK(capacity_factor >= 0 && std::isfinite(capacity_factor),
                "MoeConfig: capacity_factor must be 0 (no limit) or positive, got ",
                capacity_factor);
  REPRISE_CHECK(n_shared_experts >= 0, "MoeConfig: n_shared_experts must be >= 0, got ",
                n_shared_experts);
}

int64_t MoeConfig::capacity(int64_t tokens) const {
  if (capacity_factor == 0) return -1;
  return int64_t(std::ceil(capacity_factor * double(tokens * num_experts_per_tok) /
                           double(num_local_experts)));
}

std::string MoeConfig::describe() const {
  std::ostringstream s;
  s << num_local_experts << " experts, top-" << num_experts_per_tok << " "
    << router_scoring_name(scoring_func);
  if (!norm_topk_prob) s << " (gates not renormalized)";
  if (capacity_factor > 0) s << ", capacity " << capacity_factor;
  if (n_shared_experts > 0) s << ", " << n_shared_experts << " shared";
  if (router_dtype == RouterDType::bf16) s << ", bf16 router";
  return s.str();
}

// ---- moe_forward ------------------------------------------------------------

namespace {

// t rounded to bf16 (nearest even) and back to its dtype.
Tensor round_bf16(const Tensor& t) { return ops::cast(ops::cast(t, DType::bf16), t.dtype()); }

void check_weights(const Tensor& x, const MoeWeights& w, const MoeConfig& c,
                   const std::string& layer, const ExpertRange& held) {
  const int64_t E = c.num_local_experts, C = x.size(-1);
  auto check = [&](const Tensor& t, const Shape& shape, const std::string& what) {
    REPRISE_CHECK(t.defined() && t.shape() == shape && t.dtype() == x.dtype(), "MoE layer '", layer,
                  "': expected ", what, " of shape ", to_string(shape), " and dtype ",
                  dtype_name(x.dtype()), ", got ", t.defined() ? t.describe() : "undefined");
  };
  check(w.gate, {E, C}, "gate");
  const int64_t n = held.count;
  REPRISE_CHECK(w.first_expert == held.first && int64_t(w.w1.size()) == n &&
                    int64_t(w.w2.size()) == n && int64_t(w.w3.size()) == n,
                "MoE layer '", layer, "': expected ", n, " experts' w1, w2, w3 (experts ",
                held.first, "..", held.first + n - 1, " of ", E, "), got ", w.w1.size(), ", ",
                w.w2.size(), ", ", w.w3.size(), " from expert ", w.first_expert);
  const int64_t F = w.w1[0].defined() ? w.w1[0].size(0) : 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::string ex = "experts." + std::to_string(held.first + i);
    check(w.w1[size_t(i)], {F, C}, ex + ".w1");
    check(w.w2[size_t(i)], {C, F}, ex + ".w2");
    check(w.w3[size_t(i)], {F, C}, ex + ".w3");
  }
  if (c.n_shared_experts > 0) {
    const int64_t S = c.n_shared_experts * F;
    check(w.shared_gate, {S, C}, "shared_experts.gate_proj");
    check(w.shared_up, {S, C}, "shared_experts.up_proj");
    check(w.shared_down, {C, S}, "shared_experts.down_proj");
  }
}

}  // namespace

MoeResult moe_forward(const Tensor& x, const MoeWeights& w, const MoeConfig& c,
                      const std::string& layer, const ExpertDispatch* dispatch) {
  c.validate();
  REPRISE_CHECK(
      (x.dim() == 2 || x.dim() == 3) && (x.dtype() == DType::f32 || x.dtype() == DType::f64),
      "MoE layer '", layer, "': expected x of shape (B, T, C) or (N, C), f32 or f64, got ",
      x.describe());
  REPRISE_CHECK(w.gate.defined() && w.gate.dim() == 2 && x.size(-1) == w.gate.size(1),
                "MoE layer '", layer, "': x ", x.describe(), " has C = ", x.size(-1),
                " features, but the gate ",
                w.gate.defined() ? w.gate.describe() : std::string("undefined"),
                " expects C = ", w.gate.defined() && w.gate.dim() == 2 ? w.gate.size(1) : 0);
  const ExpertRange held =
      dispatch ? dispatch->local_experts(c.num_local_experts) : ExpertRange{0, c.num_local_experts};
  check_weights(x, w, c, layer, held);
  const int64_t k = c.num_experts_per_tok, C = x.size(-1);
  const Tensor x2 = ops::reshape(x, {-1, C});  // (N, C)
  const int64_t N = x2.size(0);

  // Router: logits, scores and the routing decision, all under "gate".
  Tensor logits, scores;
  ops::MoeRoute route;
  {
    autograd::Scope scope("gate");
    if (c.router_dtype == RouterDType::bf16) {
      logits = round_bf16(ops::linear(round_bf16(x2), round_bf16(w.gate)));  // (N, E)
    } else {
      logits = ops::linear(x2, w.gate);  // (N, E)
    }
    scores =
        c.scoring_func == RouterScoring::softmax ? ops::softmax(logits, -1) : ops::sigmoid(logits);
    route = ops::moe_route(scores, k, c.norm_topk_prob, c.capacity(N));
  }

  // Experts: SwiGLU over contiguous blocks of the sorted rows, block j
  // (block_counts[j] rows) through expert block_expert[j].
  Tensor out;
  {
    autograd::Scope scope("experts");
    const Tensor xs = ops::index_select(x2, 0, route.token);  // (M, C)
    auto experts_on = [&](const Tensor& rows, const Tensor& block_counts,
                          const std::vector<int64_t>& block_expert) {
      std::vector<Tensor> w1, w2, w3;
      for (const int64_t e : block_expert) {
        const size_t i = size_t(e - w.first_expert);
        w1.push_back(w.w1.at(i));
        w2.push_back(w.w2.at(i));
        w3.push_back(w.w3.at(i));
      }
      auto grouped = [&](const Tensor& in, const std::vector<Tensor>& weights) {
        return autocast_grouped_linear(in, block_counts, weights);
      };
      return swiglu_ffn(autocast_operand(rows), w1, w3, w2, {"w1", "w3", "w2"},
                        grouped);  // (rows, C)
    };
    Tensor ys;
    if (dispatch) {
      ys = dispatch->run(xs, route.counts.to_vector<int64_t>(),
                         [&](const Tensor& rows, const std::vector<int64_t>& block_rows,
                             const std::vector<int64_t>& block_expert) {
                           const Tensor counts = Tensor::from_vector(
                               block_rows, {int64_t(block_rows.size())});  // (blocks)
                           return experts_on(rows, counts, block_expert);
                         });  // (M, C)
    } else {
      std::vector<int64_t> all(size_t(c.num_local_experts));
      for (size_t e = 0; e < all.size(); ++e) all[e] = int64_t(e);
      ys = experts_on(xs, route.counts, all);  // (M, C)
    }
    ys = ops::mul(ys, ops::unsqueeze(route.weights, 1));  // (M, C)
    out = ops::index_add(Tensor::zeros({N, C}, x.dtype(), x.device()), 0, route.token,
                         ys);  // (N, C)
  }
  if (c.n_shared_experts > 0) {
    autograd::Scope scope("shared_experts");
    out = ops::add(out,
                   swiglu_ffn(autocast_operand(x2), w.shared_gate, w.shared_up, w.shared_down,
                              {"gate_proj", "up_proj", "down_proj"}, autocast_linear));  // (N, C)
  }

  // Router loss terms: probability mass per expert, and logsumexp^2. A
  // term whose coefficient is 0 is computed without recording, so no graph
  // that no loss reads keeps activations (or checkpoint regions) alive.
  MoeResult r;
  {
    std::optional<NoGradGuard> off;
    if (c.router_aux_loss_coef == 0) off.emplace();
    Tensor probs = c.scoring_func == RouterScoring::softmax
                       ? scores
                       : ops::div(scores, ops::sum(scores, {1}, true));  // (N, E)
    r.terms.prob_sum = ops::sum(probs, {0});                             // (E)
  }
  {
    std::optional<NoGradGuard> off;
    if (c.router_z_loss_coef == 0) off.emplace();
    Tensor m = ops::max(logits, 1, true).values.detach();  // (N, 1)
    Tensor lse = ops::add(ops::log(ops::sum(ops::exp(ops::sub(logits, m)), {1}, true)), m);
    r.terms.z_sum = ops::sum(ops::mul(lse, lse));  // ()
  }
  r.terms.routed = route.routed;
  r.terms.kept = route.counts;
  r.terms.rows = N;
  r.terms.layer = layer;
  r.out = ops::reshape(out, x.shape());
  return r;
}

MoeLayerStats MoeRouterTerms::stats() const {
  MoeLayerStats s;
  s.layer = layer;
  s.tokens = rows;
  s.tokens_per_expert = routed.to_vector<int64_t>();
  const std::vector<int64_t> kept_per_expert = kept.to_vector<int64_t>();
  const std::vector<double> probs = prob_sum.to_vector<double>();
  const size_t E = s.tokens_per_expert.size();
  s.dropped_per_expert.resize(E);
  double aux = 0;
  for (size_t e = 0; e < E; ++e) {
    s.dropped_per_expert[e] = s.tokens_per_expert[e] - kept_per_expert[e];
    s.tokens_dropped += s.dropped_per_expert[e];
    aux += double(s.tokens_per_expert[e]) / double(rows) * probs[e] / double(rows);
  }
  s.aux_loss = double(E) * aux;
  s.z_loss = z_sum.item<double>() / double(rows);
  return s;
}

// ---- modules ----------------------------------------------------------------

MoeExpert::MoeExpert(std::string name, int64_t hidden_size, int64_t intermediate_size)
    : Module(std::move(name)),
      w1("w1", hidden_size, intermediate_size),
      w2("w2", intermediate_size, hidden_size),
      w3("w3", hidden_size, intermediate_size) {
  register_module(w1);
  register_module(w2);
  register_module(w3);
}

namespace {
const MoeConfig& validated(const MoeConfig& c) {
  c.validate();
  return c;
}

ExpertRange held_experts(const MoeConfig& c, const ExpertDispatch* dispatch) {
  return dispatch ? dispatch->local_experts(c.num_local_experts)
                  : ExpertRange{0, c.num_local_experts};
}
}  // namespace

SparseMoeBlock::SparseMoeBlock(std::string name, int64_t hidden_size, int64_t intermediate_size,
                               const MoeConfig& config,
                               std::shared_ptr<const ExpertDispatch> dispatch)
    : Module(std::move(name)),
      gate("gate", hidden_size, validated(config).num_local_experts),
      experts("experts", size_t(held_experts(config, dispatch.get()).first)),
      config_(config),
      dispatch_(std::move(dispatch)),
      local_(held_experts(config, dispatch_.get())),
      hidden_size_(hidden_size),
      intermediate_size_(intermediate_size) {
  register_module(gate);
  register_module(experts);
  for (int64_t e = local_.first; e < local_.first + local_.count; ++e) {
    experts.append(std::make_unique<MoeExpert>(std::to_string(e), hidden_size, intermediate_size));
  }
  if (config.n_shared_experts > 0) {
    shared_experts = std::make_unique<SwiGluMLP>("shared_experts", hidden_size,
                                                 config.n_shared_experts * intermediate_size);
    register_module(*shared_experts);
  }
}

MoeWeights SparseMoeBlock::weights() const {
  MoeWeights w;
  w.gate = gate.weight();
  w.first_expert = local_.first;
  for (size_t e = 0; e < experts.size(); ++e) {
    w.w1.push_back(experts[e].w1.weight());
    w.w2.push_back(experts[e].w2.weight());
    w.w3.push_back(experts[e].w3.weight());
  }
  if (shared_experts) {
    w.shared_gate = shared_experts->gate_proj.weight();
    w.shared_up = shared_experts->up_proj.weight();
    w.shared_down = shared_experts->down_proj.weight();
  }
  return w;
}

MoeResult SparseMoeBlock::forward(const Tensor& x, bool limit_capacity) const {
  autograd::Scope scope(name());
  MoeConfig config = config_;
  if (!limit_capacity) config.capacity_factor = 0;
  return moe_forward(x, weights(), config, *autograd::current_scope(), dispatch_.get());
}

void SparseMoeBlock::skip_expert_init(int64_t first, int64_t end, rng::Generator& gen,
                                      std::string_view stream) const {
  // w1, w2 and w3 have F C elements each, all f32.
  const uint64_t words = rng::normal_words<float>(uint64_t(hidden_size_ * intermediate_size_));
  for (int64_t e = first; e < end; ++e) {
    for (int i = 0; i < 3; ++i) gen.reserve(stream, words);
  }
}

std::string expert_of(std::string_view name) {
  constexpr std::string_view marker = ".block_sparse_moe.experts.";
  const size_t at = name.find(marker);
  if (at == std::string_view::npos) return "";
  const size_t end = name.find('.', at + marker.size());
  return end == std::string_view::npos ? "" : std::string(name.substr(0, end + 1));
}

bool is_expert_parameter(std::string_view name) { return !expert_of(name).empty(); }

}  // namespace reprise::nn
