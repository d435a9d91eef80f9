#include "nn/llama.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "nn/gated_deltanet.h"
#include "nn/kv_cache.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/loss.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/views.h"

namespace reprise::nn {

// ---- RoPE --------------------------------------------------------------------

RopeTable rope_table(const LlamaConfig& c, const LayerRope& rope, int64_t length, Device device) {
  const RopeFrequencies f =
      rope_frequencies(rope.scaling, rope.theta, c.rope_dim(), c.max_position_embeddings, length);
  return {.inv_freq = Tensor::from_vector(f.inv_freq, {int64_t(f.inv_freq.size())}).to(device),
          .scaling = double(f.attention_scaling)};
}

namespace {

void check_attention_input(const Tensor& x, const std::string& name) {
  REPRISE_CHECK(x.dim() == 3, "attention '", name, "': expected x of shape (B, T, C), got ",
                x.describe());
}

// The cache buffers a forward of T tokens at kv.start writes and reads:
// checked against the shapes `want` (positions in dimension `pos_dim`,
// from kv.first).
void check_cache(const LayerKv& kv, const Shape& want_k, const Shape& want_v, int64_t pos_dim,
                 int64_t T, DType dtype, const std::string& name) {
  auto fits = [&](const Tensor& t, const Shape& want) {
    return t.defined() && t.shape() == want && t.dtype() == dtype;
  };
  REPRISE_CHECK(fits(kv.k, want_k) && fits(kv.v, want_v), "attention '", name,
                "': expected KV cache buffers of shapes ", to_string(want_k), " and ",
                to_string(want_v), " and dtype ", dtype_name(dtype), ", got ",
                kv.k.defined() ? kv.k.describe() : "undefined", " and ",
                kv.v.defined() ? kv.v.describe() : "undefined");
  REPRISE_CHECK(
      kv.first >= 0 && kv.first <= kv.start && kv.start - kv.first + T <= want_k[size_t(pos_dim)],
      "attention '", name, "': positions ", kv.start, " .. ", kv.start + T - 1,
      " do not fit a KV cache of ", want_k[size_t(pos_dim)], " positions from ", kv.first);
  REPRISE_CHECK(!GradMode::enabled(), "attention '", name,
                "': a forward through a KV cache runs without grad (NoGradGuard)");
}

// Writes `fresh` (T positions along pos_dim) at kv_buffer's [start, start +
// T) and returns the buffer's [0, start + T): the earlier positions and these.
Tensor through_cache(const Tensor& buffer, const Tensor& fresh, int64_t pos_dim, int64_t start) {
  const int64_t T = fresh.size(pos_dim);
  buffer.slice(pos_dim, start, start + T).copy_(fresh);
  return buffer.slice(pos_dim, 0, start + T);
}

}  // namespace

// ---- LlamaAttention ---------------------------------------------------------

LlamaAttention::LlamaAttention(std::string name, const LlamaConfig& c, int64_t layer)
    : Attention(std::move(name)),
      q_proj("q_proj", c.hidden_size,
             c.num_attention_heads * c.resolved_head_dim() * (c.attention_output_gate ? 2 : 1),
             c.qkv_bias),
      k_proj("k_proj", c.hidden_size, c.num_key_value_heads * c.resolved_head_dim(), c.qkv_bias),
      v_proj("v_proj", c.hidden_size, c.num_key_value_heads * c.resolved_head_dim(), c.qkv_bias),
      o_proj("o_proj", c.num_attention_heads * c.resolved_head_dim(), c.hidden_size, c.o_bias),
      config_(c),
      heads_(c.num_attention_heads),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.resolved_head_dim()),
      window_(c.attention_window(layer)),
      rope_(c.uses_rope(layer) ? std::optional(c.rope_of(layer)) : std::nullopt) {
  // HF's registration order: GPT-OSS's sinks first.
  if (c.attention_sinks) sinks_ = register_parameter("sinks", {heads_}, /*decay=*/false);
  register_module(q_proj);
  register_module(k_proj);
  register_module(v_proj);
  register_module(o_proj);
  if (c.qk_norm != QkNorm::none) {
    const bool per_head = c.qk_norm == QkNorm::per_head;
    q_norm = std::make_unique<RMSNorm>("q_norm", per_head ? head_dim_ : heads_ * head_dim_,
                                       c.rms_norm_eps, c.norm_unit_offset);
    k_norm = std::make_unique<RMSNorm>("k_norm", per_head ? head_dim_ : kv_heads_ * head_dim_,
                                       c.rms_norm_eps, c.norm_unit_offset);
    register_module(*q_norm);
    register_module(*k_norm);
  }
}

Tensor LlamaAttention::forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv) const {
  autograd::Scope scope(name());
  check_attention_input(x, name());
  const int64_t B = x.size(0), T = x.size(1), start = kv ? kv->start : 0;
  const bool per_head = config_.qk_norm == QkNorm::per_head;
  const bool whole = config_.qk_norm == QkNorm::projection;
  // (B, T, H D) -> (B, H, T, D): views; sdpa and rotary read any strides.
  // A norm per head runs on (B, T, H, D) before the transpose, as HF's.
  auto split_heads = [&](const Tensor& y, int64_t h, const RMSNorm* norm) {
    Tensor heads = ops::reshape(y, {B, T, h, head_dim_});
    if (norm != nullptr && per_head) heads = norm->forward(heads);
    return ops::transpose(heads, 1, 2);
  };
  // With 16-bit attention under autocast, q, k and v stay 16-bit from their
  // products to attention, as torch.autocast leaves them; RoPE on them
  // computes in f32 and rounds once. Those are the bits of widening them and
  // rounding again before attention, which is what a layer with q/k norms,
  // an output gate, biases or a KV cache still does.
  const DType attention_dtype = autocast_attention_dtype();
  const bool narrow =
      kv == nullptr && is_16bit_float(attention_dtype) && attention_dtype == autocast_dtype() &&
      q_norm == nullptr && k_norm == nullptr && !config_.attention_output_gate &&
      !q_proj.bias().defined() && !k_proj.bias().defined() && !v_proj.bias().defined();
  auto projected = [&](const Linear& proj, const RMSNorm* norm, const Tensor& in) {
    if (narrow) return proj.forward_16bit(in);
    Tensor y = proj.forward(in);  // (B, T, H D)
    return norm != nullptr && whole ? norm->forward(y) : y;
  };
  const Tensor in = autocast_operand(x);  // one 16-bit copy for q, k and v under Autocast
  Tensor q_out = projected(q_proj, q_norm.get(), in), gate;
  if (config_.attention_output_gate) {
    // (B, T, H 2D): each head's query, then its gate (Qwen3-Next's layout).
    const Tensor both = ops::reshape(q_out, {B, T, heads_, 2 * head_dim_});
    gate = ops::reshape(ops::slice(both, 3, head_dim_, 2 * head_dim_), {B, T, heads_ * head_dim_});
    q_out = ops::reshape(ops::slice(both, 3, 0, head_dim_), {B, T, heads_ * head_dim_});
  }
  Tensor q = split_heads(q_out, heads_, q_norm.get());
  Tensor k = split_heads(projected(k_proj, k_norm.get(), in), kv_heads_, k_norm.get());
  if (rope_) {
    const RopeTable rope = rope_table(config_, *rope_, start + T, x.device());
    // (B, H, T, D): RoPE on the first rope_dim of D (all of it but with
    // partial rotary), the rest passed through.
    const int64_t R = config_.rope_dim();
    auto rotate = [&](const Tensor& t) {
      if (R == head_dim_) return ops::rotary(t, start, rope.inv_freq, rope.scaling);
      return ops::cat({ops::rotary(ops::slice(t, 3, 0, R), start, rope.inv_freq, rope.scaling),
                       ops::slice(t, 3, R, head_dim_)},
                      3);
    };
    q = rotate(q);
    k = rotate(k);
  }
  Tensor v = split_heads(projected(v_proj, nullptr, in), kv_heads_, nullptr);
  ops::AttentionOptions options{.causal = true, .window = window_, .sinks = sinks_};
  if (config_.query_pre_attn_scalar > 0) {
    options.scale = std::pow(config_.query_pre_attn_scalar, -0.5);  // Gemma
  }
  if (kv) {
    const Shape want{B, kv_heads_, kv->k.defined() ? kv->k.size(2) : 0, head_dim_};
    check_cache(*kv, want, want, 2, T, q.dtype(), name());
    // Row r of the buffers is position first + r (a sliding window's cache
    // drops whole key blocks, so the kernel tiles keys as without it).
    const int64_t at = start - kv->first;
    k = through_cache(kv->k, k, 2, at);  // (B, Hkv, at + T, D)
    v = through_cache(kv->v, v, 2, at);
    options.causal_offset = at;  // query t is row at + t
  } else if (training() && config_.attention_dropout > 0) {
    options.dropout_p = config_.attention_dropout;
    options.generator = &gen;
  }
  Tensor a = autocast_attention(q, k, v, options);                        // (B, Hq, T, D)
  a = ops::reshape(ops::transpose(a, 1, 2), {B, T, heads_ * head_dim_});  // (B, T, Hq D)
  if (gate.defined()) a = ops::mul(a, ops::sigmoid(gate));
  return o_proj.forward(a);
}

void LlamaAttention::reset_sinks(double std, rng::Generator& gen, std::string_view stream) {
  if (sinks_.defined()) ops::normal_(sinks_, 0.0, std, gen, stream);
}

// ---- MlaAttention -------------------------------------------------------------

namespace {

// DeepSeek-V3's latent norms keep RMSNorm's default eps whatever
// rms_norm_eps says (transformers' DeepseekV3Attention).
constexpr double kMlaNormEps = 1e-6;

const MlaConfig& mla_of(const LlamaConfig& c) {
  REPRISE_CHECK(c.mla.has_value(), "MlaAttention: the config has no mla settings");
  return *c.mla;
}

// HF's apply_rotary_pos_emb_interleave: dims stored as pairs (x0, x1),
// (x2, x3), ... become (x0, x2, ..., x1, x3, ...), the rotate-half layout.
// x: (B, H, T, d) -> (B, H, T, d).
Tensor deinterleave(const Tensor& x) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), d = x.size(3);
  return ops::reshape(ops::transpose(ops::reshape(x, {B, H, T, d / 2, 2}), 3, 4), {B, H, T, d});
}

}  // namespace

MlaAttention::MlaAttention(std::string name, const LlamaConfig& c)
    : Attention(std::move(name)),
      kv_a_proj_with_mqa("kv_a_proj_with_mqa", c.hidden_size,
                         mla_of(c).kv_lora_rank + mla_of(c).qk_rope_head_dim),
      kv_a_layernorm("kv_a_layernorm", mla_of(c).kv_lora_rank, kMlaNormEps),
      kv_b_proj("kv_b_proj", mla_of(c).kv_lora_rank,
                c.num_attention_heads * (mla_of(c).qk_nope_head_dim + mla_of(c).v_head_dim)),
      o_proj("o_proj", c.num_attention_heads * mla_of(c).v_head_dim, c.hidden_size),
      config_(c),
      scale_(1.0 / std::sqrt(double(mla_of(c).qk_head_dim())) *
             rope_softmax_scale_factor(c.rope_scaling)) {
  const MlaConfig& m = *c.mla;
  const int64_t q_width = c.num_attention_heads * m.qk_head_dim();
  // HF's registration order.
  if (m.q_lora_rank > 0) {
    q_a_proj = std::make_unique<Linear>("q_a_proj", c.hidden_size, m.q_lora_rank);
    q_a_layernorm = std::make_unique<RMSNorm>("q_a_layernorm", m.q_lora_rank, kMlaNormEps);
    q_b_proj = std::make_unique<Linear>("q_b_proj", m.q_lora_rank, q_width);
    register_module(*q_a_proj);
    register_module(*q_a_layernorm);
    register_module(*q_b_proj);
  } else {
    q_proj = std::make_unique<Linear>("q_proj", c.hidden_size, q_width);
    register_module(*q_proj);
  }
  register_module(kv_a_proj_with_mqa);
  register_module(kv_a_layernorm);
  register_module(kv_b_proj);
  register_module(o_proj);
}

Tensor MlaAttention::forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv) const {
  autograd::Scope scope(name());
  check_attention_input(x, name());
  const MlaConfig& m = *config_.mla;
  const int64_t B = x.size(0), T = x.size(1), start = kv ? kv->start : 0;
  const int64_t H = config_.num_attention_heads, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim,
                dv = m.v_head_dim, R = m.kv_lora_rank;
  const Tensor in = autocast_operand(x);  // one 16-bit copy for q and the latent
  // Queries: (B, T, H (dn + dr)) -> (B, H, T, dn + dr).
  const Tensor q_flat = q_proj ? q_proj->forward(in)
                               : q_b_proj->forward(q_a_layernorm->forward(q_a_proj->forward(in)));
  const Tensor q = ops::transpose(ops::reshape(q_flat, {B, T, H, dn + dr}), 1, 2);
  // The latent and the shared rotary key: (B, T, R + dr).
  const Tensor ckv = kv_a_proj_with_mqa.forward(in);
  Tensor latent = kv_a_layernorm.forward(ops::slice(ckv, 2, 0, R));  // (B, T, R)
  Tensor k_rot = ops::unsqueeze(ops::slice(ckv, 2, R, R + dr), 1);   // (B, 1, T, dr)
  Tensor q_rot = ops::slice(q, 3, dn, dn + dr);                      // (B, H, T, dr)
  if (m.rope_interleave) {
    q_rot = deinterleave(q_rot);
    k_rot = deinterleave(k_rot);
  }
  const RopeTable rope = rope_table(config_, config_.rope_of(0), start + T, x.device());
  q_rot = ops::rotary(q_rot, start, rope.inv_freq, rope.scaling);
  k_rot = ops::rotary(k_rot, start, rope.inv_freq, rope.scaling);
  ops::AttentionOptions options{.causal = true, .scale = scale_};
  if (kv) {
    // The cache holds the latent and the rotated key of every position;
    // keys and values are expanded from it for all of them again, each
    // position by the same arithmetic as in a forward over the sequence.
    const int64_t P = kv->k.defined() ? kv->k.size(1) : 0;
    check_cache(*kv, {B, P, R}, {B, 1, P, dr}, 1, T, latent.dtype(), name());
    latent = through_cache(kv->k, latent, 1, start);  // (B, start + T, R)
    k_rot = through_cache(kv->v, k_rot, 2, start);    // (B, 1, start + T, dr)
    options.causal_offset = start;
  } else if (training() && config_.attention_dropout > 0) {
    options.dropout_p = config_.attention_dropout;
    options.generator = &gen;
  }
  const int64_t S = latent.size(1);
  // Per-head keys and values from the latent: (B, S, H (dn + dv)) -> (B, H, S, dn + dv).
  const Tensor kv_heads =
      ops::transpose(ops::reshape(kv_b_proj.forward(latent), {B, S, H, dn + dv}), 1, 2);
  const Tensor keys =
      ops::cat({ops::slice(kv_heads, 3, 0, dn), ops::expand(k_rot, {B, H, S, dr})}, 3);
  const Tensor queries = ops::cat({ops::slice(q, 3, 0, dn), q_rot}, 3);  // (B, H, T, dn + dr)
  Tensor a = autocast_attention(queries, keys, ops::slice(kv_heads, 3, dn, dn + dv),
                                options);                     // (B, H, T, dv)
  a = ops::reshape(ops::transpose(a, 1, 2), {B, T, H * dv});  // (B, T, H dv)
  return o_proj.forward(a);
}

// ---- LlamaDecoderLayer ------------------------------------------------------

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c, int64_t index,
                                     std::shared_ptr<const ExpertDispatch> experts)
    : Module(std::to_string(index)),
      post_attention_layernorm("post_attention_layernorm", c.hidden_size, c.rms_norm_eps,
                               c.norm_unit_offset),
      placement_(c.norm_placement),
      dropout_p_(c.dropout) {
  if (c.mla) {
    self_attn = std::make_unique<MlaAttention>("self_attn", c);
  } else if (c.is_linear_layer(index)) {
    self_attn = std::make_unique<GatedDeltaNet>("linear_attn", c);
  } else {
    self_attn = std::make_unique<LlamaAttention>("self_attn", c, index);
  }
  // Hugging Face's registration order, so parameters() lists its state dict order.
  register_module(*self_attn);
  if (c.is_moe_layer(index)) {
    const FamilyInfo& f = c.info();
    moe = std::make_unique<SparseMoeBlock>(f.names.block, c.hidden_size, c.intermediate_size,
                                           *c.moe, std::move(experts), moe_names(f));
    register_module(*moe);
  } else {
    mlp = std::make_unique<GatedMLP>("mlp", c.hidden_size, c.intermediate_size, c.mlp_bias,
                                     c.hidden_act);
    register_module(*mlp);
  }
  auto norm = [&](const char* name) {
    return std::make_unique<RMSNorm>(name, c.hidden_size, c.rms_norm_eps, c.norm_unit_offset);
  };
  if (placement_ != NormPlacement::after) {
    input_layernorm = norm("input_layernorm");
    register_module(*input_layernorm);
  }
  register_module(post_attention_layernorm);
  if (placement_ == NormPlacement::both) {
    pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
    register_module(*pre_feedforward_layernorm);
  }
  if (placement_ != NormPlacement::before) {
    post_feedforward_layernorm = norm("post_feedforward_layernorm");
    register_module(*post_feedforward_layernorm);
  }
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, rng::Generator& gen, MoeRouterTerms* moe_terms,
                                  const LayerKv* kv) const {
  const bool drop = training() && dropout_p_ > 0 && kv == nullptr;
  // The norms around each block (NormPlacement): before attention, after
  // it, before the MLP, after it; post_attention_layernorm is Llama's
  // norm before the MLP and the others' after attention.
  const bool before = placement_ == NormPlacement::before;
  const RMSNorm* attention_out = before ? nullptr : &post_attention_layernorm;
  const RMSNorm* mlp_in = before ? &post_attention_layernorm : pre_feedforward_layernorm.get();
  auto around = [](const RMSNorm* norm, const Tensor& t) { return norm ? norm->forward(t) : t; };
  Tensor a = around(attention_out, self_attn->forward(around(input_layernorm.get(), x), gen, kv));
  if (drop) a = ops::dropout(a, dropout_p_, gen, true, "dropout");
  Tensor h = ops::add(x, a);
  const Tensor n2 = around(mlp_in, h);
  Tensor m;
  if (mlp) {
    m = mlp->forward(n2);
  } else {
    MoeResult r = moe->forward(n2, /*limit_capacity=*/kv == nullptr);
    m = r.out;
    if (moe_terms) *moe_terms = std::move(r.terms);
  }
  m = around(post_feedforward_layernorm.get(), m);
  if (drop) m = ops::dropout(m, dropout_p_, gen, true, "dropout");
  return ops::add(h, m);
}

// ---- LlamaModel -------------------------------------------------------------

LlamaModel::LlamaModel(std::string name, const LlamaConfig& c,
                       std::shared_ptr<const ExpertDispatch> experts)
    : Module(std::move(name)),
      embed_tokens("embed_tokens", c.vocab_size, c.hidden_size, c.pad_token_id),
      layers("layers"),
      norm("norm", c.hidden_size, c.rms_norm_eps, c.norm_unit_offset) {
  register_module(embed_tokens);
  register_module(layers);
  register_module(norm);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers.append(std::make_unique<LlamaDecoderLayer>(c, i, experts));
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
  if (auto* r = dynamic_cast<SparseMoeBlock::Router*>(&m)) r->reset_parameters(std, gen, stream);
  if (auto* a = dynamic_cast<LlamaAttention*>(&m)) a->reset_sinks(std, gen, stream);
  if (auto* d = dynamic_cast<GatedDeltaNet*>(&m)) d->reset_parameters(std, gen, stream);
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
    : LlamaForCausalLM(config, &init, std::move(experts)) {}

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& config, rng::Generator* init,
                                   std::shared_ptr<const ExpertDispatch> experts)
    : Module(""), model("model", validated(config), std::move(experts)), config_(config) {
  register_module(model);
  if (!config.tie_word_embeddings) {
    lm_head_ = std::make_unique<Linear>("lm_head", config.hidden_size, config.vocab_size);
    register_module(*lm_head_);
  }
  if (init) reset_parameters(*init);
}

void LlamaForCausalLM::set_dropout_generator(std::shared_ptr<rng::Generator> gen) {
  REPRISE_CHECK(gen != nullptr, "LlamaForCausalLM::set_dropout_generator: no generator");
  dropout_gen_ = std::move(gen);
}

void LlamaForCausalLM::reset_parameters(rng::Generator& gen, std::string_view stream) {
  init_tree(*this, config_.initializer_range, gen, stream);
}

Tensor LlamaForCausalLM::embed(const Tensor& input_ids) const {
  autograd::Scope scope(model.name());
  const Tensor e = model.embed_tokens.forward(input_ids);  // (B, T, C)
  if (!config_.scale_embeddings) return e;
  // Gemma: times sqrt(hidden_size), rounded to f32 as transformers' buffer.
  autograd::Scope scaled(model.embed_tokens.name());
  return ops::mul(e, double(float(std::sqrt(double(config_.hidden_size)))));
}

Tensor LlamaForCausalLM::head(const Tensor& h) const {
  Tensor n;
  {
    autograd::Scope scope(model.name());
    n = model.norm.forward(h);
  }
  Tensor logits;  // (B, T, V)
  {
    autograd::Scope scope("lm_head");
    // Under bf16 autocast the logits stay bf16 (as torch.autocast leaves
    // them) and the loss reads them so: the bits of widening them first,
    // without an f32 copy of (B, T, V) or of its gradient.
    const Tensor& w = lm_head_ ? lm_head_->weight() : model.embed_tokens.weight();
    const bool narrow =
        autocast_dtype() == DType::bf16 && !(lm_head_ && lm_head_->bias().defined());
    if (narrow) {
      logits = autocast_product(n, w);
    } else {
      logits = lm_head_ ? lm_head_->project(n) : autocast_linear(n, w);
    }
  }
  const double cap = config_.final_logit_softcapping;
  if (cap == 0) return logits;
  // Gemma's soft-cap, cap tanh(logits / cap), in f32.
  autograd::Scope scope("softcap");
  return ops::mul(ops::tanh(ops::mul(ops::cast(logits, DType::f32), 1.0 / cap)), cap);
}

CausalLMOutput LlamaForCausalLM::forward(const Tensor& input_ids,
                                         const LayerRunner& run_layer) const {
  check_input_ids(input_ids);
  REPRISE_CHECK(input_ids.size(1) >= 1 && input_ids.size(1) <= config_.max_sequence_length(),
                "LlamaForCausalLM: sequence length ", input_ids.size(1), " must be in [1, ",
                config_.max_sequence_length(),
                "] (max_position_embeddings = ", config_.max_position_embeddings, ")");
  CausalLMOutput out;
  Tensor h = embed(input_ids);  // (B, T, C)
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LlamaDecoderLayer& layer = model.layers[i];
    const std::string scope = model.name() + "." + model.layers.name() + "." + layer.name();
    MoeRouterTerms* terms = layer.moe ? &out.moe.emplace_back() : nullptr;
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
  cache.reserve(T);
  Tensor h = embed(input_ids);  // (B, T, C)
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LlamaDecoderLayer& layer = model.layers[i];
    autograd::Scope named(model.name() + "." + model.layers.name() + "." + layer.name());
    const LayerKv kv = cache.layer(i);
    h = layer.forward(h, *dropout_gen_, nullptr, &kv);
  }
  cache.advance(T);
  if (last_only) h = h.slice(1, T - 1, T);  // (B, 1, C)
  return widened(head(h));                  // the sampler reads f32
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
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LlamaDecoderLayer& layer = model.layers[i];
    // A token runs through k of an MoE layer's experts; the experts a layer
    // holds (all, or this process's share) stand for the whole layer.
    const double active = layer.moe ? double(config_.moe->num_experts_per_tok) /
                                          double(layer.moe->local_experts().count)
                                    : 1.0;
    for (const NamedParameter& p : layer.parameters()) {
      if (p.value.dim() != 2) continue;
      weights += double(p.value.numel()) * (is_expert_parameter(p.name) ? active : 1.0);
    }
  }
  // The head, tied or not (the embedding lookup counts nothing).
  weights += double(model.embed_tokens.weight().numel());
  // Attention: per head, the scores and the weighted values, 2 (dqk + dv)
  // flops per visible key, a causal query seeing T / 2 keys on average
  // (W - W^2 / 2T within a window W < T); times 3 for forward and backward.
  const int64_t H = config_.num_attention_heads;
  const double dqk = double(config_.mla ? config_.mla->qk_head_dim() : config_.resolved_head_dim());
  const double dv = double(config_.mla ? config_.mla->v_head_dim : config_.resolved_head_dim());
  double attention = 0;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const double W = double(config_.attention_window(i)), t = double(T);
    const double keys = W > 0 && W < t ? W - W * W / (2 * t) : t / 2;
    attention += double(H) * 2 * (dqk + dv) * keys;
  }
  return 6.0 * weights + 3.0 * attention;
}

}  // namespace reprise::nn
