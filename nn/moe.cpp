#include "nn/moe.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "nn/routing.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/clamp.h"
#include "ops/indexing.h"
#include "ops/matmul.h"
#include "ops/moe_route.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "rng/distributions.h"

namespace reprise::nn {

MoeNames moe_names(const FamilyInfo& f) {
  return {.expert_gate = f.names.gate,
          .expert_up = f.names.up,
          .expert_down = f.names.down,
          .shared = f.names.shared,
          .router = f.names.router};
}

// ---- moe_forward ------------------------------------------------------------

namespace {

// t rounded to bf16 (nearest even) and back to its dtype.
Tensor round_bf16(const Tensor& t) { return ops::cast(ops::cast(t, DType::bf16), t.dtype()); }

void check_weights(const Tensor& x, const MoeWeights& w, const MoeConfig& c,
                   const std::string& layer, const ExpertRange& held, const MoeNames& names) {
  const int64_t E = c.num_local_experts, C = x.size(-1);
  auto check = [&](const Tensor& t, const Shape& shape, const std::string& what) {
    REPRISE_CHECK(t.defined() && t.shape() == shape && t.dtype() == x.dtype(), "MoE layer '", layer,
                  "': expected ", what, " of shape ", to_string(shape), " and dtype ",
                  dtype_name(x.dtype()), ", got ", t.defined() ? t.describe() : "undefined");
  };
  const std::string router = names.router;
  check(w.gate, {E, C}, router);
  REPRISE_CHECK(c.router_bias == w.gate_bias.defined(), "MoE layer '", layer,
                "': ", c.router_bias ? "expected" : "unexpected", " a router bias");
  if (w.gate_bias.defined()) check(w.gate_bias, {E}, router + ".bias");
  REPRISE_CHECK(c.score_correction_bias == w.score_bias.defined(), "MoE layer '", layer,
                "': ", c.score_correction_bias ? "expected" : "unexpected",
                " a router score bias (e_score_correction_bias)");
  if (w.score_bias.defined()) check(w.score_bias, {E}, router + ".e_score_correction_bias");
  const int64_t n = held.count;
  REPRISE_CHECK(w.first_expert == held.first && int64_t(w.w1.size()) == n &&
                    int64_t(w.w2.size()) == n && int64_t(w.w3.size()) == n,
                "MoE layer '", layer, "': expected ", n, " experts' w1, w2, w3 (experts ",
                held.first, "..", held.first + n - 1, " of ", E, "), got ", w.w1.size(), ", ",
                w.w2.size(), ", ", w.w3.size(), " from expert ", w.first_expert);
  const int64_t F = w.w1[0].defined() ? w.w1[0].size(0) : 0;
  const size_t biases = c.expert_bias ? size_t(n) : 0;
  REPRISE_CHECK(w.b1.size() == biases && w.b2.size() == biases && w.b3.size() == biases,
                "MoE layer '", layer, "': expected ", biases, " experts' biases, got ", w.b1.size(),
                ", ", w.b2.size(), ", ", w.b3.size());
  for (int64_t i = 0; i < n; ++i) {
    const std::string ex = "experts." + std::to_string(held.first + i) + ".";
    check(w.w1[size_t(i)], {F, C}, ex + names.expert_gate);
    check(w.w2[size_t(i)], {C, F}, ex + names.expert_down);
    check(w.w3[size_t(i)], {F, C}, ex + names.expert_up);
    if (biases == 0) continue;
    check(w.b1[size_t(i)], {F}, ex + names.expert_gate + ".bias");
    check(w.b2[size_t(i)], {C}, ex + names.expert_down + ".bias");
    check(w.b3[size_t(i)], {F}, ex + names.expert_up + ".bias");
  }
  const int64_t S = c.shared_expert_intermediate_size > 0 ? c.shared_expert_intermediate_size
                                                          : c.n_shared_experts * F;
  if (S > 0) {
    const std::string sh = std::string(names.shared) + ".";
    check(w.shared_gate, {S, C}, sh + "gate_proj");
    check(w.shared_up, {S, C}, sh + "up_proj");
    check(w.shared_down, {C, S}, sh + "down_proj");
  }
  REPRISE_CHECK(c.shared_expert_gate == w.shared_expert_gate.defined(), "MoE layer '", layer,
                "': ", c.shared_expert_gate ? "expected" : "unexpected", " a shared_expert_gate");
  if (w.shared_expert_gate.defined()) check(w.shared_expert_gate, {1, C}, "shared_expert_gate");
}

// GPT-OSS's expert activation (MoeConfig::clamped_swiglu), op by op as
// transformers' GptOssExperts computes it. gate, up: (M, F) -> (M, F).
Tensor clamped_swiglu(const Tensor& gate, const Tensor& up, const MoeConfig& c) {
  const Tensor g = ops::clamp(gate, std::nullopt, c.swiglu_limit);
  const Tensor u = ops::clamp(up, -c.swiglu_limit, c.swiglu_limit);
  const Tensor glu = ops::mul(g, ops::sigmoid(ops::mul(g, c.swiglu_alpha)));
  return ops::mul(ops::add(u, 1.0), glu);
}

// The router's logits (N, E), scores (N, E) and routing decision, all
// recorded under the router's scope.
struct Routing {
  Tensor logits, scores;
  ops::MoeRoute route;
};

// The dispatch order of assignments a = n k + j with experts ids[a]: by
// expert, then token, then rank (moe_route's). order[slot] = a; counts (E).
void dispatch_order(const std::vector<int64_t>& ids, int64_t E, std::vector<int64_t>& order,
                    std::vector<int64_t>& counts) {
  counts.assign(size_t(E), 0);
  for (int64_t e : ids) ++counts[size_t(e)];
  std::vector<int64_t> next(size_t(E), 0);  // where expert e's next assignment goes
  for (int64_t e = 1; e < E; ++e) next[size_t(e)] = next[size_t(e - 1)] + counts[size_t(e - 1)];
  order.resize(ids.size());
  for (size_t a = 0; a < ids.size(); ++a) order[size_t(next[size_t(ids[a])]++)] = int64_t(a);
}

// The route that a routing replay's record gives the layer's tokens: the
// record's experts (a token past its record keeps its own choice), with no
// capacity limit, in moe_route's dispatch order. A token whose experts are
// its own keeps its gates bit for bit; the others' gates come from the
// current scores of the record's experts, renormalized and scaled as
// moe_route's. The plain route itself where nothing differs.
ops::MoeRoute replayed(const Routing& r, RoutingReplay& replay, const MoeConfig& c,
                       const std::string& layer) {
  const int64_t N = r.scores.size(0), E = c.num_local_experts, k = c.num_experts_per_tok;
  std::vector<int64_t> ids = replay.experts(layer, N, E, k);
  const std::vector<int64_t> own = r.route.indices.to_vector<int64_t>();
  const bool all_kept = r.route.token.numel() == N * k;  // no capacity limit dropped any
  std::vector<uint8_t> changed(size_t(N * k));  // per assignment: its token's experts changed
  int64_t flips = 0;
  for (int64_t n = 0; n < N; ++n) {
    const auto row = ids.begin() + n * k;
    const auto mine = own.begin() + n * k;
    if (row[0] < 0) std::copy(mine, mine + k, row);
    flips += !std::is_permutation(row, row + k, mine);
    std::fill_n(changed.begin() + n * k, k, uint8_t(!std::equal(row, row + k, mine)));
  }
  replay.count_overridden(flips);
  if (ids == own && all_kept) return r.route;

  const Device device = r.scores.device();
  auto on_device = [&](const std::vector<int64_t>& v, const Shape& shape) {
    return Tensor::from_vector(v, shape).to(device);
  };
  const Tensor indices = on_device(ids, {N, k});
  Tensor gates = ops::gather(r.scores, 1, indices);  // (N, k)
  if (c.norm_topk_prob) gates = ops::div(gates, ops::sum(gates, {-1}, true));
  if (c.routed_scaling_factor != 1.0) gates = ops::mul(gates, c.routed_scaling_factor);
  gates = ops::reshape(gates, {N * k});
  std::vector<int64_t> order, counts;
  if (all_kept) {  // the unchanged tokens' own gates, from the plain route's dispatch order
    dispatch_order(own, E, order, counts);
    std::vector<int64_t> slot(size_t(N * k));
    for (size_t s = 0; s < order.size(); ++s) slot[size_t(order[s])] = int64_t(s);
    Tensor mask = Tensor::empty({N * k}, DType::boolean);
    std::copy(changed.begin(), changed.end(), mask.data<bool>());
    gates = ops::where(mask.to(device), gates,
                       ops::index_select(r.route.weights, 0, on_device(slot, {N * k})));
  }
  dispatch_order(ids, E, order, counts);
  std::vector<int64_t> token(order.size());
  for (size_t s = 0; s < order.size(); ++s) token[s] = order[s] / k;
  ops::MoeRoute route = r.route;
  route.indices = indices;
  route.weights = ops::index_select(gates, 0, on_device(order, {N * k}));  // (M)
  route.token = on_device(token, {N * k});
  route.counts = on_device(counts, {E});
  route.routed = route.counts;
  return route;
}

Routing route_tokens(const Tensor& x2, const MoeWeights& w, const MoeConfig& c,
                     const std::string& layer, const MoeNames& names) {
  autograd::Scope scope(names.router);
  Routing r;
  const bool bf16 = c.router_dtype == RouterDType::bf16;
  auto rounded = [&](const Tensor& t) { return bf16 ? round_bf16(t) : t; };
  r.logits = ops::linear(rounded(x2), rounded(w.gate));  // (N, E)
  if (w.gate_bias.defined()) r.logits = ops::add(r.logits, rounded(w.gate_bias));
  r.logits = rounded(r.logits);
  r.scores = c.scoring_func == RouterScoring::softmax ? ops::softmax(r.logits, -1)
                                                      : ops::sigmoid(r.logits);
  r.route = ops::moe_route(r.scores, c.num_experts_per_tok,
                           {.renormalize = c.norm_topk_prob,
                            .capacity = c.capacity(x2.size(0)),
                            .bias = w.score_bias,
                            .n_group = c.n_group,
                            .topk_group = c.topk_group,
                            .scale = c.routed_scaling_factor});
  if (RoutingReplay* replay = current_routing_replay()) r.route = replayed(r, *replay, c, layer);
  return r;
}

// The routed experts' weighted outputs summed per token (N, C), under the
// scope "experts": SwiGLU over contiguous blocks of the sorted rows, block
// j (block_counts[j] rows) through expert block_expert[j].
Tensor run_experts(const Tensor& x2, const ops::MoeRoute& route, const MoeWeights& w,
                   const MoeConfig& c, const ExpertDispatch* dispatch, const MoeNames& names) {
  autograd::Scope scope("experts");
  const Tensor xs = ops::index_select(x2, 0, route.token);  // (M, C)
  // One projection of the blocks' experts: a weight per block, and a bias
  // per block with expert_bias.
  struct Projection {
    std::vector<Tensor> weights, biases;
  };
  auto experts_on = [&](const Tensor& rows, const Tensor& block_counts,
                        const std::vector<int64_t>& block_expert) {
    auto of_blocks = [&](const std::vector<Tensor>& weights, const std::vector<Tensor>& biases) {
      Projection p;
      for (const int64_t e : block_expert) {
        const size_t i = size_t(e - w.first_expert);
        p.weights.push_back(weights.at(i));
        if (!biases.empty()) p.biases.push_back(biases.at(i));
      }
      return p;
    };
    Tensor row_block;  // (rows) i64, each row's block, to add the biases by
    if (c.expert_bias) {
      std::vector<int64_t> blocks;
      const std::vector<int64_t> counts = block_counts.to_vector<int64_t>();
      for (size_t j = 0; j < counts.size(); ++j) blocks.insert(blocks.end(), counts[j], int64_t(j));
      row_block = Tensor::from_vector(blocks, {int64_t(blocks.size())}).to(rows.device());
    }
    // Under bf16 autocast the gate and up products stay bf16 for SwiGLU,
    // as a dense MLP's do; biased experts and the clamped SwiGLU widen them.
    const bool keep_bf16 = autocast_dtype() == DType::bf16 && !c.expert_bias && !c.clamped_swiglu;
    auto grouped = [&](const Tensor& in, const Projection& p) {
      const Tensor y = autocast_grouped_linear(in, block_counts, p.weights);  // (rows, out)
      if (p.biases.empty()) return y;
      return ops::add(y, ops::index_select(ops::stack(p.biases, 0), 0, row_block));
    };
    auto grouped_in = [&](const Tensor& in, const Projection& p) {
      if (!keep_bf16) return grouped(in, p);
      return autocast_grouped_product(in, block_counts, p.weights);  // (rows, out) bf16
    };
    auto act = [&](const Tensor& g, const Tensor& u) {
      return c.clamped_swiglu ? clamped_swiglu(g, u, c) : ops::swiglu(g, u);
    };
    return swiglu_ffn(autocast_operand(rows), of_blocks(w.w1, w.b1), of_blocks(w.w3, w.b3),
                      of_blocks(w.w2, w.b2),
                      {names.expert_gate, names.expert_up, names.expert_down}, grouped_in, grouped,
                      act);  // (rows, C)
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
  return ops::index_add(Tensor::zeros({x2.size(0), x2.size(1)}, x2.dtype(), x2.device()), 0,
                        route.token, ys);  // (N, C)
}

// The shared expert (N, C), behind its sigmoid gate when it has one.
Tensor run_shared_expert(const Tensor& x2, const MoeWeights& w, const MoeNames& names) {
  Tensor shared;
  {
    autograd::Scope scope(names.shared);
    // Its gate and up products stay bf16 for SwiGLU under bf16 autocast.
    shared = swiglu_ffn(autocast_operand(x2), w.shared_gate, w.shared_up, w.shared_down,
                        {"gate_proj", "up_proj", "down_proj"}, autocast_bf16_product,
                        autocast_linear, ops::swiglu);  // (N, C)
  }
  if (w.shared_expert_gate.defined()) {
    autograd::Scope scope("shared_expert_gate");
    shared = ops::mul(ops::sigmoid(autocast_linear(x2, w.shared_expert_gate)), shared);
  }
  return shared;
}

// Router loss terms: probability mass per expert, and logsumexp^2. A term
// whose coefficient is 0 is computed without recording, so no graph that
// no loss reads keeps activations (or checkpoint regions) alive.
MoeRouterTerms router_terms(const Routing& routing, const MoeConfig& c, const std::string& layer,
                            int64_t N) {
  MoeRouterTerms t;
  {
    std::optional<NoGradGuard> off;
    if (c.router_aux_loss_coef == 0) off.emplace();
    const Tensor& scores = routing.scores;
    Tensor probs = c.scoring_func == RouterScoring::softmax
                       ? scores
                       : ops::div(scores, ops::sum(scores, {1}, true));  // (N, E)
    t.prob_sum = ops::sum(probs, {0});                                   // (E)
  }
  {
    std::optional<NoGradGuard> off;
    if (c.router_z_loss_coef == 0) off.emplace();
    const Tensor& logits = routing.logits;
    Tensor m = ops::max(logits, 1, true).values.detach();  // (N, 1)
    Tensor lse = ops::add(ops::log(ops::sum(ops::exp(ops::sub(logits, m)), {1}, true)), m);
    t.z_sum = ops::sum(ops::mul(lse, lse));  // ()
  }
  t.routed = routing.route.routed;
  t.kept = routing.route.counts;
  t.margin = routing.route.margin;
  t.rows = N;
  t.layer = layer;
  return t;
}

}  // namespace

MoeResult moe_forward(const Tensor& x, const MoeWeights& w, const MoeConfig& c,
                      const std::string& layer, const ExpertDispatch* dispatch,
                      const MoeNames& names) {
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
  check_weights(x, w, c, layer, held, names);
  const Tensor x2 = ops::reshape(x, {-1, x.size(-1)});  // (N, C)

  const Routing routing = route_tokens(x2, w, c, layer, names);
  if (RoutingCapture* capture = current_routing_capture())
    capture->routed(layer, routing.route.indices, routing.route.margin, c.num_local_experts);
  Tensor out = run_experts(x2, routing.route, w, c, dispatch, names);  // (N, C)
  if (w.shared_gate.defined()) out = ops::add(out, run_shared_expert(x2, w, names));
  MoeResult r;
  r.terms = router_terms(routing, c, layer, x2.size(0));
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
  s.within_ulps = count_within_ulps();
  return s;
}

std::array<int64_t, kMarginUlps.size()> MoeRouterTerms::count_within_ulps() const {
  std::array<int64_t, kMarginUlps.size()> within{};
  if (within_ulps.defined()) {
    const std::vector<int64_t> v = within_ulps.to_vector<int64_t>();
    std::copy(v.begin(), v.end(), within.begin());
    return within;
  }
  for (const int64_t m : margin.to_vector<int64_t>()) {
    for (size_t i = 0; i < kMarginUlps.size(); ++i) within[i] += m <= kMarginUlps[i];
  }
  return within;
}

// ---- modules ----------------------------------------------------------------

MoeExpert::MoeExpert(std::string name, int64_t hidden_size, int64_t intermediate_size,
                     const MoeNames& names, bool bias)
    : Module(std::move(name)),
      gate_proj(names.expert_gate, hidden_size, intermediate_size, bias),
      up_proj(names.expert_up, hidden_size, intermediate_size, bias),
      down_proj(names.expert_down, intermediate_size, hidden_size, bias) {
  // Mixtral's registration order, w1, w2, w3 (the same order for every
  // family: initialisation draws in it).
  register_module(gate_proj);
  register_module(down_proj);
  register_module(up_proj);
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

SparseMoeBlock::Router::Router(const char* name, int64_t hidden_size, const MoeConfig& config)
    : Module(name) {
  REPRISE_CHECK(hidden_size > 0, "SparseMoeBlock: hidden_size must be positive, got ", hidden_size);
  weight_ = register_parameter("weight", {config.num_local_experts, hidden_size});
  if (config.router_bias) {
    bias_ = register_parameter("bias", {config.num_local_experts}, /*decay=*/false);
  }
  if (config.score_correction_bias) {
    score_bias_ = register_buffer("e_score_correction_bias", {config.num_local_experts});
  }
}

void SparseMoeBlock::Router::reset_parameters(double std, rng::Generator& gen,
                                              std::string_view stream) {
  ops::normal_(weight_, 0.0, std, gen, stream);
  if (bias_.defined()) ops::normal_(bias_, 0.0, std, gen, stream);
  if (score_bias_.defined()) {
    NoGradGuard no_grad;
    score_bias_.fill_(0.0);
  }
}

SparseMoeBlock::SparseMoeBlock(std::string name, int64_t hidden_size, int64_t intermediate_size,
                               const MoeConfig& config,
                               std::shared_ptr<const ExpertDispatch> dispatch,
                               const MoeNames& names)
    : Module(std::move(name)),
      gate(names.router, hidden_size, validated(config)),
      experts("experts", size_t(held_experts(config, dispatch.get()).first)),
      config_(config),
      dispatch_(std::move(dispatch)),
      names_(names),
      local_(held_experts(config, dispatch_.get())),
      hidden_size_(hidden_size),
      expert_size_(config.expert_intermediate_size(intermediate_size)) {
  REPRISE_CHECK(expert_size_ > 0, "SparseMoeBlock '", this->name(),
                "': the experts' intermediate size must be positive, got ", expert_size_);
  register_module(gate);
  register_module(experts);
  for (int64_t e = local_.first; e < local_.first + local_.count; ++e) {
    experts.append(std::make_unique<MoeExpert>(std::to_string(e), hidden_size, expert_size_, names_,
                                               config.expert_bias));
  }
  const int64_t shared = config.shared_intermediate_size(intermediate_size);
  if (shared > 0) {
    shared_experts = std::make_unique<GatedMLP>(names_.shared, hidden_size, shared);
    register_module(*shared_experts);
  }
  if (config.shared_expert_gate) {
    shared_expert_gate = std::make_unique<Linear>("shared_expert_gate", hidden_size, 1);
    register_module(*shared_expert_gate);
  }
}

MoeWeights SparseMoeBlock::weights() const {
  MoeWeights w;
  w.gate = gate.weight();
  w.gate_bias = gate.bias();
  w.score_bias = gate.score_bias();
  w.first_expert = local_.first;
  for (size_t e = 0; e < experts.size(); ++e) {
    const MoeExpert& x = experts[e];
    w.w1.push_back(x.gate_proj.weight());
    w.w2.push_back(x.down_proj.weight());
    w.w3.push_back(x.up_proj.weight());
    if (!config_.expert_bias) continue;
    w.b1.push_back(x.gate_proj.bias());
    w.b2.push_back(x.down_proj.bias());
    w.b3.push_back(x.up_proj.bias());
  }
  if (shared_experts) {
    w.shared_gate = shared_experts->gate_proj.weight();
    w.shared_up = shared_experts->up_proj.weight();
    w.shared_down = shared_experts->down_proj.weight();
  }
  if (shared_expert_gate) w.shared_expert_gate = shared_expert_gate->weight();
  return w;
}

MoeResult SparseMoeBlock::forward(const Tensor& x, bool limit_capacity) const {
  autograd::Scope scope(name());
  MoeConfig config = config_;
  if (!limit_capacity) config.capacity_factor = 0;
  return moe_forward(x, weights(), config, *autograd::current_scope(), dispatch_.get(), names_);
}

void SparseMoeBlock::skip_expert_init(int64_t first, int64_t end, rng::Generator& gen,
                                      std::string_view stream) const {
  // The three projections have F C elements each, all f32.
  const uint64_t words = rng::normal_words<float>(uint64_t(hidden_size_ * expert_size_));
  for (int64_t e = first; e < end; ++e) {
    for (int i = 0; i < 3; ++i) gen.reserve(stream, words);
  }
}

MoeScopes moe_scopes_of(const LlamaConfig& config) {
  if (!config.moe) return {};
  const ExpertNames& names = config.info().names;
  return {.block = names.block, .router = names.router};
}

std::string router_scopes(const MoeScopes& moe) { return "*." + moe.block + "." + moe.router; }

std::string expert_of(std::string_view name) {
  // ".experts.<digits>." after a layer's MoE block; a shared expert's
  // "shared_experts." has no dot before "experts".
  constexpr std::string_view marker = ".experts.";
  for (size_t at = name.find(marker); at != std::string_view::npos;
       at = name.find(marker, at + 1)) {
    const size_t first = at + marker.size();
    size_t end = first;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    if (end > first && end < name.size() && name[end] == '.') {
      return std::string(name.substr(0, end + 1));
    }
  }
  return "";
}

bool is_expert_parameter(std::string_view name) { return !expert_of(name).empty(); }

}  // namespace reprise::nn
