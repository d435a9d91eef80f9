#include "nn/llama.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "nn/kv_cache.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/loss.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/views.h"

namespace reprise::nn {

// ---- LlamaConfig ------------------------------------------------------------

int64_t LlamaConfig::resolved_head_dim() const {
  if (head_dim != 0) return head_dim;
  return num_attention_heads > 0 ? hidden_size / num_attention_heads : 0;
}

void LlamaConfig::validate() const {
  auto positive = [](const char* field, int64_t v) {
    REPRISE_CHECK(v > 0, "LlamaConfig: ", field, " must be positive, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("max_position_embeddings", max_position_embeddings);
  REPRISE_CHECK(head_dim >= 0, "LlamaConfig: head_dim must be positive (or 0 for hidden_size / ",
                "num_attention_heads), got ", head_dim);
  REPRISE_CHECK(head_dim != 0 || hidden_size % num_attention_heads == 0,
                "LlamaConfig: hidden_size ", hidden_size,
                " is not a multiple of num_attention_heads ", num_attention_heads,
                " (set head_dim)");
  REPRISE_CHECK(resolved_head_dim() % 2 == 0, "LlamaConfig: head_dim ", resolved_head_dim(),
                " must be even for rotary embeddings");
  REPRISE_CHECK(num_attention_heads % num_key_value_heads == 0, "LlamaConfig: num_attention_heads ",
                num_attention_heads, " is not a multiple of num_key_value_heads ",
                num_key_value_heads);
  REPRISE_CHECK(rms_norm_eps > 0 && std::isfinite(rms_norm_eps),
                "LlamaConfig: rms_norm_eps must be positive, got ", rms_norm_eps);
  REPRISE_CHECK(rope_theta > 0 && std::isfinite(rope_theta),
                "LlamaConfig: rope_theta must be positive, got ", rope_theta);
  REPRISE_CHECK(initializer_range >= 0 && std::isfinite(initializer_range),
                "LlamaConfig: initializer_range must be >= 0, got ", initializer_range);
  REPRISE_CHECK(attention_dropout >= 0 && attention_dropout < 1,
                "LlamaConfig: attention_dropout must be in [0, 1), got ", attention_dropout);
  REPRISE_CHECK(dropout >= 0 && dropout < 1, "LlamaConfig: dropout must be in [0, 1), got ",
                dropout);
  if (moe) moe->validate();
}

std::string LlamaConfig::describe() const {
  std::ostringstream s;
  s << "hidden " << hidden_size << ", " << num_hidden_layers << " layers, " << num_attention_heads
    << " heads (" << num_key_value_heads << " kv) of " << resolved_head_dim() << ", ffn "
    << intermediate_size << ", vocab " << vocab_size;
  if (tie_word_embeddings) s << ", tied embeddings";
  if (moe) s << ", " << moe->describe();
  return s.str();
}

// ---- LlamaAttention ---------------------------------------------------------

LlamaAttention::LlamaAttention(std::string name, const LlamaConfig& c)
    : Module(std::move(name)),
      q_proj("q_proj", c.hidden_size, c.num_attention_heads * c.resolved_head_dim()),
      k_proj("k_proj", c.hidden_size, c.num_key_value_heads * c.resolved_head_dim()),
      v_proj("v_proj", c.hidden_size, c.num_key_value_heads * c.resolved_head_dim()),
      o_proj("o_proj", c.num_attention_heads * c.resolved_head_dim(), c.hidden_size),
      heads_(c.num_attention_heads),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.resolved_head_dim()),
      rope_theta_(c.rope_theta),
      dropout_p_(c.attention_dropout) {
  register_module(q_proj);
  register_module(k_proj);
  register_module(v_proj);
  register_module(o_proj);
}

Tensor LlamaAttention::forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv) const {
  autograd::Scope scope(name());
  REPRISE_CHECK(x.dim() == 3, "LlamaAttention '", name(), "': expected x of shape (B, T, C), got ",
                x.describe());
  const int64_t B = x.size(0), T = x.size(1), start = kv ? kv->start : 0;
  // (B, T, H D) -> (B, H, T, D): views; sdpa and rotary read any strides.
  auto split_heads = [&](const Tensor& y, int64_t h) {
    return ops::transpose(ops::reshape(y, {B, T, h, head_dim_}), 1, 2);
  };
  const Tensor in = autocast_operand(x);  // one 16-bit copy for q, k and v under Autocast
  Tensor q = ops::rotary(split_heads(q_proj.forward(in), heads_), start, rope_theta_);
  Tensor k = ops::rotary(split_heads(k_proj.forward(in), kv_heads_), start, rope_theta_);
  Tensor v = split_heads(v_proj.forward(in), kv_heads_);
  ops::AttentionOptions options{.causal = true};
  if (kv) {
    const Shape want{B, kv_heads_, kv->k.defined() ? kv->k.size(2) : 0, head_dim_};
    REPRISE_CHECK(kv->k.defined() && kv->v.defined() && kv->k.shape() == want &&
                      kv->v.shape() == want && kv->k.dtype() == q.dtype() &&
                      kv->v.dtype() == q.dtype(),
                  "LlamaAttention '", name(), "': expected KV cache buffers of shape ",
                  to_string(want), " and dtype ", dtype_name(q.dtype()), ", got ",
                  kv->k.defined() ? kv->k.describe() : "undefined", " and ",
                  kv->v.defined() ? kv->v.describe() : "undefined");
    REPRISE_CHECK(start >= 0 && start + T <= want[2], "LlamaAttention '", name(), "': positions ",
                  start, " .. ", start + T - 1, " do not fit a KV cache of ", want[2]);
    REPRISE_CHECK(!GradMode::enabled(), "LlamaAttention '", name(),
                  "': a forward through a KV cache runs without grad (NoGradGuard)");
    kv->k.slice(2, start, start + T).copy_(k);
    kv->v.slice(2, start, start + T).copy_(v);
    k = kv->k.slice(2, 0, start + T);  // (B, Hkv, start + T, D)
    v = kv->v.slice(2, 0, start + T);
    options.causal_offset = start;  // query t is position start + t
  } else if (training() && dropout_p_ > 0) {
    options.dropout_p = dropout_p_;
    options.generator = &gen;
  }
  Tensor a = autocast_attention(q, k, v, options);                        // (B, Hq, T, D)
  a = ops::reshape(ops::transpose(a, 1, 2), {B, T, heads_ * head_dim_});  // (B, T, Hq D)
  return o_proj.forward(a);
}

// ---- LlamaDecoderLayer ------------------------------------------------------

LlamaDecoderLayer::LlamaDecoderLayer(std::string name, const LlamaConfig& c,
                                     std::shared_ptr<const ExpertDispatch> experts)
    : Module(std::move(name)),
      input_layernorm("input_layernorm", c.hidden_size, c.rms_norm_eps),
      self_attn("self_attn", c),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps),
      dropout_p_(c.dropout) {
  // Hugging Face's registration order, so parameters() lists its state dict order.
  register_module(self_attn);
  if (c.moe) {
    block_sparse_moe = std::make_unique<SparseMoeBlock>(
        "block_sparse_moe", c.hidden_size, c.intermediate_size, *c.moe, std::move(experts));
    register_module(*block_sparse_moe);
  } else {
    mlp = std::make_unique<SwiGluMLP>("mlp", c.hidden_size, c.intermediate_size);
    register_module(*mlp);
  }
  register_module(input_layernorm);
  register_module(post_attention_layernorm);
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, rng::Generator& gen, MoeRouterTerms* moe_terms,
                                  const LayerKv* kv) const {
  const bool drop = training() && dropout_p_ > 0 && kv == nullptr;
  Tensor a = self_attn.forward(input_layernorm.forward(x), gen, kv);
  if (drop) a = ops::dropout(a, dropout_p_, gen, true, "dropout");
  Tensor h = ops::add(x, a);
  Tensor n2 = post_attention_layernorm.forward(h);
  Tensor m;
  if (mlp) {
    m = mlp->forward(n2);
  } else {
    MoeResult r = block_sparse_moe->forward(n2, /*limit_capacity=*/kv == nullptr);
    m = r.out;
    if (moe_terms) *moe_terms = std::move(r.terms);
  }
  if (drop) m = ops::dropout(m, dropout_p_, gen, true, "dropout");
  return ops::add(h, m);
}

// ---- LlamaModel -------------------------------------------------------------

LlamaModel::LlamaModel(std::string name, const LlamaConfig& c,
                       std::shared_ptr<const ExpertDispatch> experts)
    : Module(std::move(name)),
      embed_tokens("embed_tokens", c.vocab_size, c.hidden_size),
      layers("layers"),
      norm("norm", c.hidden_size, c.rms_norm_eps) {
  register_module(embed_tokens);
  register_module(layers);
  register_module(norm);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers.append(std::make_unique<LlamaDecoderLayer>(std::to_string(i), c, experts));
  }
}

// ---- LlamaForCausalLM -------------------------------------------------------

namespace {

const LlamaConfig& validated(const LlamaConfig& c) {
  c.validate();
  return c;
}

void check_input_ids(const Tensor& input_ids) {
  REPRISE_CHECK(input_ids.dim() == 2 && input_ids.dtype() == DType::i64,
                "LlamaForCausalLM: expected input_ids of shape (B, T) and dtype i64, got ",
                input_ids.describe());
}

// HF's _init_weights: normal(0, std) for Linear and Embedding weights, ones
// for RMSNorm, visiting modules in registration order. The experts an MoE
// layer does not hold (another process's) take their words around the
// ones it holds.
void init_tree(Module& m, double std, rng::Generator& gen, std::string_view stream) {
  if (auto* l = dynamic_cast<Linear*>(&m)) l->reset_parameters(std, gen, stream);
  if (auto* e = dynamic_cast<Embedding*>(&m)) e->reset_parameters(std, gen, stream);
  if (auto* n = dynamic_cast<RMSNorm*>(&m)) n->reset_parameters();
  const auto* moe = dynamic_cast<const SparseMoeBlock*>(&m);
  for (Module* c : m.children()) {
    if (moe && c == &moe->experts) {
      const ExpertRange held = moe->local_experts();
      moe->skip_expert_init(0, held.first, gen, stream);
      init_tree(*c, std, gen, stream);
      moe->skip_expert_init(held.first + held.count, moe->config().num_local_experts, gen, stream);
    } else {
      init_tree(*c, std, gen, stream);
    }
  }
}

}  // namespace

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& config, rng::Generator& init,
                                   std::shared_ptr<const ExpertDispatch> experts)
    : Module(""),
      model("model", validated(config), std::move(experts)),
      config_(config),
      dropout_gen_(&rng::default_generator()) {
  register_module(model);
  if (!config.tie_word_embeddings) {
    lm_head_ = std::make_unique<Linear>("lm_head", config.hidden_size, config.vocab_size);
    register_module(*lm_head_);
  }
  reset_parameters(init);
}

void LlamaForCausalLM::reset_parameters(rng::Generator& gen, std::string_view stream) {
  init_tree(*this, config_.initializer_range, gen, stream);
}

Tensor LlamaForCausalLM::embed(const Tensor& input_ids) const {
  autograd::Scope scope(model.name());
  return model.embed_tokens.forward(input_ids);  // (B, T, C)
}

Tensor LlamaForCausalLM::head(const Tensor& h) const {
  Tensor n;
  {
    autograd::Scope scope(model.name());
    n = model.norm.forward(h);
  }
  if (lm_head_) return lm_head_->forward(n);  // (B, T, V)
  autograd::Scope scope("lm_head");
  return autocast_linear(n, model.embed_tokens.weight());
}

CausalLMOutput LlamaForCausalLM::forward(const Tensor& input_ids,
                                         const LayerRunner& run_layer) const {
  check_input_ids(input_ids);
  REPRISE_CHECK(input_ids.size(1) >= 1 && input_ids.size(1) <= config_.max_position_embeddings,
                "LlamaForCausalLM: sequence length ", input_ids.size(1),
                " must be in [1, max_position_embeddings = ", config_.max_position_embeddings, "]");
  CausalLMOutput out;
  Tensor h = embed(input_ids);  // (B, T, C)
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LlamaDecoderLayer& layer = model.layers[i];
    const std::string scope = model.name() + "." + model.layers.name() + "." + layer.name();
    MoeRouterTerms* terms = config_.moe ? &out.moe.emplace_back() : nullptr;
    const std::function<Tensor()> body = [&] { return layer.forward(h, *dropout_gen_, terms); };
    if (run_layer) {
      h = run_layer(i, scope, body);
    } else {
      autograd::Scope named(scope);
      h = body();
    }
  }
  out.logits = head(h);  // (B, T, V)
  return out;
}

Tensor LlamaForCausalLM::forward_cached(const Tensor& input_ids, KvCache& cache,
                                        bool last_only) const {
  NoGradGuard no_grad;
  check_input_ids(input_ids);
  REPRISE_CHECK(input_ids.size(0) == cache.batch() && input_ids.size(1) >= 1 &&
                    cache.num_layers() == size_t(config_.num_hidden_layers),
                "LlamaForCausalLM::forward_cached: expected input_ids (B = ", cache.batch(),
                ", T >= 1) for a KV cache of ", cache.num_layers(), " layers and a model of ",
                config_.num_hidden_layers, ", got ", input_ids.describe());
  const int64_t T = input_ids.size(1);
  REPRISE_CHECK(cache.length() + T <= cache.capacity(), "LlamaForCausalLM::forward_cached: ", T,
                " tokens after the ", cache.length(), " in the KV cache exceed its capacity of ",
                cache.capacity(), " positions");
  Tensor h = embed(input_ids);  // (B, T, C)
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LlamaDecoderLayer& layer = model.layers[i];
    autograd::Scope named(model.name() + "." + model.layers.name() + "." + layer.name());
    const LayerKv kv = cache.layer(i);
    h = layer.forward(h, *dropout_gen_, nullptr, &kv);
  }
  cache.advance(T);
  if (last_only) h = h.slice(1, T - 1, T);  // (B, 1, C)
  return head(h);
}

Tensor LlamaForCausalLM::loss(const Tensor& logits, const Tensor& labels) {
  REPRISE_CHECK(logits.dim() == 3 && labels.dim() == 2 && labels.dtype() == DType::i64 &&
                    labels.size(0) == logits.size(0) && labels.size(1) == logits.size(1),
                "LlamaForCausalLM::loss: expected logits (B, T, V) and labels (B, T) i64, got ",
                logits.describe(), " and ", labels.describe());
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  // Shift the labels rather than the logits (as HF's ForCausalLMLoss does):
  // target[b, t] = labels[b, t + 1], and -100 at t = T - 1, so the full
  // contiguous logits feed the loss without a copy. The mean is over the
  // same pairs as logits[:, :-1] against labels[:, 1:].
  Tensor target = Tensor::empty({B, T}, DType::i64, labels.device());
  {
    NoGradGuard no_grad;
    target.slice(1, 0, T - 1).copy_(labels.slice(1, 1, T));
    target.slice(1, T - 1, T).fill_(-100);
  }
  return ops::cross_entropy(ops::reshape(logits, {B * T, V}), target.view({B * T}), -100);
}

RouterLosses CausalLMOutput::router_losses() const {
  RouterLosses r;
  if (moe.empty()) return r;
  // HF's load_balancing_loss_func over the layers' rows concatenated:
  // E * sum_e (routed_e / R) (prob_sum_e / R), R = rows over all layers.
  Tensor routed, prob_sum, z_sum;  // routed: (E) i64 assignments, summed over layers
  double rows = 0;
  for (const MoeRouterTerms& t : moe) {
    routed = routed.defined() ? ops::add(routed, t.routed) : t.routed;
    prob_sum = prob_sum.defined() ? ops::add(prob_sum, t.prob_sum) : t.prob_sum;
    z_sum = z_sum.defined() ? ops::add(z_sum, t.z_sum) : t.z_sum;
    rows += double(t.rows);
  }
  autograd::Scope scope("router_loss");
  const double E = double(routed.numel());
  const Tensor fraction = ops::cast(routed, prob_sum.dtype());  // (E)
  r.aux = ops::mul(ops::sum(ops::mul(fraction, prob_sum)), E / (rows * rows));
  r.z = ops::mul(z_sum, 1.0 / rows);
  return r;
}

std::vector<MoeLayerStats> CausalLMOutput::moe_stats() const {
  std::vector<MoeLayerStats> out;
  for (const MoeRouterTerms& t : moe) out.push_back(t.stats());
  return out;
}

Tensor LlamaForCausalLM::causal_lm_loss(const CausalLMOutput& out, const Tensor& labels) const {
  Tensor l = loss(out.logits, labels);
  if (!config_.moe || !training()) return l;
  const RouterLosses r = out.router_losses();
  if (config_.moe->router_aux_loss_coef != 0) {
    l = ops::add(l, ops::mul(r.aux, config_.moe->router_aux_loss_coef));
  }
  if (config_.moe->router_z_loss_coef != 0) {
    l = ops::add(l, ops::mul(r.z, config_.moe->router_z_loss_coef));
  }
  return l;
}

double LlamaForCausalLM::training_flops_per_token(int64_t T) const {
  double weights = 0;
  // A token runs through k of the experts of an MoE layer; the experts a
  // layer holds (all, or this process's share) stand for the whole layer.
  const double active = config_.moe
                            ? double(config_.moe->num_experts_per_tok) /
                                  double(model.layers[0].block_sparse_moe->local_experts().count)
                            : 1.0;
  for (const NamedParameter& p : parameters()) {
    if (p.value.dim() != 2 || p.name == "model.embed_tokens.weight") continue;
    const bool expert = is_expert_parameter(p.name);
    weights += double(p.value.numel()) * (expert ? active : 1.0);
  }
  if (!lm_head_) weights += double(model.embed_tokens.weight().numel());  // the tied head
  const double attention = double(config_.num_hidden_layers) * double(config_.num_attention_heads) *
                           double(config_.resolved_head_dim()) * double(T) * 2.0;  // causal fwd
  return 6.0 * weights + 3.0 * attention;
}

}  // namespace reprise::nn
