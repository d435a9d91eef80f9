#include "nn/model_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "engine/route_choice.h"

namespace reprise::nn {

// ---- MoeConfig ---------------------------------------------------------------

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
  REPRISE_CHECK(moe_intermediate_size >= 0, "MoeConfig: moe_intermediate_size must be >= 0, got ",
                moe_intermediate_size);
  REPRISE_CHECK(shared_expert_intermediate_size >= 0,
                "MoeConfig: shared_expert_intermediate_size must be >= 0, got ",
                shared_expert_intermediate_size);
  REPRISE_CHECK(!shared_expert_gate || n_shared_experts > 0 || shared_expert_intermediate_size > 0,
                "MoeConfig: shared_expert_gate needs a shared expert");
  REPRISE_CHECK(std::isfinite(routed_scaling_factor) && routed_scaling_factor > 0,
                "MoeConfig: routed_scaling_factor must be positive, got ", routed_scaling_factor);
  REPRISE_CHECK(std::isfinite(load_balance_coeff) && load_balance_coeff >= 0,
                "MoeConfig: load_balance_coeff must be finite and >= 0 (0: off), got ",
                load_balance_coeff);
  REPRISE_CHECK(load_balance_coeff == 0 || score_correction_bias, "MoeConfig: load_balance_coeff ",
                load_balance_coeff,
                " needs score_correction_bias (DeepSeek-V3's routing bias, which it trains)");
  REPRISE_CHECK(n_group >= 1 && num_local_experts % n_group == 0, "MoeConfig: n_group ", n_group,
                " must divide num_local_experts ", num_local_experts);
  REPRISE_CHECK(n_group <= route::kMaxGroups, "MoeConfig: n_group ", n_group, " exceeds the ",
                route::kMaxGroups, " expert groups routing supports");
  REPRISE_CHECK(topk_group >= 1 && topk_group <= n_group, "MoeConfig: topk_group must be in [1, ",
                "n_group = ", n_group, "], got ", topk_group);
  REPRISE_CHECK(num_experts_per_tok <= topk_group * (num_local_experts / n_group),
                "MoeConfig: num_experts_per_tok ", num_experts_per_tok, " exceeds the ",
                topk_group * (num_local_experts / n_group), " experts of topk_group = ", topk_group,
                " groups");
  REPRISE_CHECK(n_group == 1 || num_local_experts / n_group >= 2, "MoeConfig: n_group ", n_group,
                " leaves groups of one expert; a group's score is its two best experts' sum");
  REPRISE_CHECK(first_k_dense_replace >= 0, "MoeConfig: first_k_dense_replace must be >= 0, got ",
                first_k_dense_replace);
  REPRISE_CHECK(decoder_sparse_step >= 1, "MoeConfig: decoder_sparse_step must be positive, got ",
                decoder_sparse_step);
  for (int64_t l : mlp_only_layers) {
    REPRISE_CHECK(l >= 0, "MoeConfig: mlp_only_layers holds a negative layer ", l);
  }
  REPRISE_CHECK(!clamped_swiglu || (std::isfinite(swiglu_alpha) && std::isfinite(swiglu_limit) &&
                                    swiglu_limit > 0),
                "MoeConfig: the clamped SwiGLU needs a finite swiglu_alpha and a positive "
                "swiglu_limit, got ",
                swiglu_alpha, " and ", swiglu_limit);
}

int64_t MoeConfig::capacity(int64_t tokens) const {
  if (capacity_factor == 0) return -1;
  return int64_t(std::ceil(capacity_factor * double(tokens * num_experts_per_tok) /
                           double(num_local_experts)));
}

bool MoeConfig::is_moe_layer(int64_t layer) const {
  return layer >= first_k_dense_replace && (layer + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end();
}

int64_t MoeConfig::expert_intermediate_size(int64_t dense) const {
  return moe_intermediate_size > 0 ? moe_intermediate_size : dense;
}

int64_t MoeConfig::shared_intermediate_size(int64_t dense) const {
  if (shared_expert_intermediate_size > 0) return shared_expert_intermediate_size;
  return n_shared_experts * expert_intermediate_size(dense);
}

std::string MoeConfig::describe() const {
  std::ostringstream s;
  s << num_local_experts << " experts, top-" << num_experts_per_tok << " "
    << router_scoring_name(scoring_func);
  if (n_group > 1) s << " in " << topk_group << " of " << n_group << " groups";
  if (score_correction_bias) s << " with bias";
  if (load_balance_coeff > 0) s << " balanced by " << load_balance_coeff << " per step";
  if (!norm_topk_prob) s << " (gates not renormalized)";
  if (routed_scaling_factor != 1) s << " x" << routed_scaling_factor;
  if (moe_intermediate_size > 0) s << ", ffn " << moe_intermediate_size;
  if (capacity_factor > 0) s << ", capacity " << capacity_factor;
  if (n_shared_experts > 0) s << ", " << n_shared_experts << " shared";
  if (shared_expert_intermediate_size > 0) s << ", shared ffn " << shared_expert_intermediate_size;
  if (shared_expert_gate) s << " gated";
  if (first_k_dense_replace > 0) s << ", first " << first_k_dense_replace << " dense";
  if (decoder_sparse_step > 1) s << ", every " << decoder_sparse_step << " layers";
  if (!mlp_only_layers.empty()) s << ", " << mlp_only_layers.size() << " dense by list";
  if (router_dtype == RouterDType::bf16) s << ", bf16 router";
  if (router_bias || expert_bias) s << ", biases";
  if (clamped_swiglu)
    s << ", SwiGLU clamped at " << swiglu_limit << " (alpha " << swiglu_alpha << ")";
  return s.str();
}

// ---- MlaConfig ---------------------------------------------------------------

void MlaConfig::validate() const {
  REPRISE_CHECK(q_lora_rank >= 0, "MlaConfig: q_lora_rank must be >= 0 (0: none), got ",
                q_lora_rank);
  for (const auto& [name, v] : {std::pair{"kv_lora_rank", kv_lora_rank},
                                {"qk_nope_head_dim", qk_nope_head_dim},
                                {"qk_rope_head_dim", qk_rope_head_dim},
                                {"v_head_dim", v_head_dim}}) {
    REPRISE_CHECK(v > 0, "MlaConfig: ", name, " must be positive, got ", v);
  }
  REPRISE_CHECK(qk_rope_head_dim % 2 == 0, "MlaConfig: qk_rope_head_dim ", qk_rope_head_dim,
                " must be even for rotary embeddings");
}

// ---- LinearAttentionConfig ---------------------------------------------------

void LinearAttentionConfig::validate() const {
  for (const auto& [name, v] : {std::pair{"linear_conv_kernel_dim", conv_kernel},
                                {"linear_num_key_heads", key_heads},
                                {"linear_num_value_heads", value_heads},
                                {"linear_key_head_dim", key_head_dim},
                                {"linear_value_head_dim", value_head_dim}}) {
    REPRISE_CHECK(v > 0, "LinearAttentionConfig: ", name, " must be positive, got ", v);
  }
  REPRISE_CHECK(value_heads % key_heads == 0, "LinearAttentionConfig: linear_num_value_heads ",
                value_heads, " is not a multiple of linear_num_key_heads ", key_heads);
  // The projections' widths, 2 (Hk dk + Hv dv), must fit in int64.
  int64_t k = 0, v = 0, sum = 0, both = 0;
  REPRISE_CHECK(!__builtin_mul_overflow(key_heads, key_head_dim, &k) &&
                    !__builtin_mul_overflow(value_heads, value_head_dim, &v) &&
                    !__builtin_add_overflow(k, v, &sum) && !__builtin_mul_overflow(sum, 2, &both),
                "LinearAttentionConfig: the heads' widths overflow int64 (", key_heads, " x ",
                key_head_dim, ", ", value_heads, " x ", value_head_dim, ")");
}

// ---- LlamaConfig -------------------------------------------------------------

int64_t LlamaConfig::resolved_head_dim() const {
  if (head_dim != 0) return head_dim;
  return num_attention_heads > 0 ? hidden_size / num_attention_heads : 0;
}

int64_t LlamaConfig::rope_dim() const {
  if (mla) return mla->qk_rope_head_dim;
  // transformers: int(head_dim * partial_rotary_factor).
  return int64_t(double(resolved_head_dim()) * partial_rotary_factor);
}

LayerRope LlamaConfig::rope_of(int64_t layer) const {
  if (sliding_rope && attention_window(layer) > 0) return *sliding_rope;
  return {.theta = rope_theta, .scaling = rope_scaling};
}

int64_t LlamaConfig::max_sequence_length() const {
  // Dynamic RoPE stretches past max_position_embeddings; the shortest
  // stretch of the two ropes bounds the model.
  auto longest = [&](const RopeScaling& s) {
    if (s.type != RopeType::dynamic) return max_position_embeddings;
    return int64_t(std::floor(s.factor * double(max_position_embeddings)));
  };
  const int64_t full = longest(rope_scaling);
  return sliding_rope ? std::min(full, longest(sliding_rope->scaling)) : full;
}

int64_t LlamaConfig::attention_window(int64_t layer) const {
  if (sliding_window == 0) return 0;
  if (layer_types.empty()) return sliding_window;
  return layer_types.at(size_t(layer)) == LayerAttention::sliding ? sliding_window : 0;
}

namespace {

// The pieces a family's transformers class can build (its row,
// nn/family.h): anything else in a config of that family would be a model
// transformers does not have.
void check_attention_pieces(const LlamaConfig& c) {
  const FamilyInfo& f = c.info();
  auto refuse = [&](bool present, const char* what) {
    REPRISE_CHECK(!present, "LlamaConfig: ", f.model_type, " models have no ", what);
  };
  switch (f.biases) {
    case AttentionBiases::none:
    case AttentionBiases::none_refused:
      refuse(c.qkv_bias || c.o_bias, "attention biases");
      break;
    case AttentionBiases::together:
      REPRISE_CHECK(c.qkv_bias == c.o_bias, "LlamaConfig: ", f.model_type,
                    " models bias q, k, v and o together (attention_bias) or none of them");
      break;
    case AttentionBiases::qkv_always:
      REPRISE_CHECK(c.qkv_bias && !c.o_bias, "LlamaConfig: ", f.model_type,
                    " models have q/k/v biases and none on o_proj");
      break;
    case AttentionBiases::qkv_field:
    case AttentionBiases::qkv_by_attention_bias:
      refuse(c.o_bias, "o_proj bias");
      break;
  }
  refuse(c.mlp_bias && !f.mlp_bias, "MLP biases");
  const bool optional_norm = f.qk_norm_field != nullptr && c.qk_norm == QkNorm::none;
  REPRISE_CHECK(c.qk_norm == f.qk_norm || optional_norm, "LlamaConfig: ", f.model_type,
                " models normalize q and k ",
                f.qk_norm == QkNorm::none       ? "nowhere"
                : f.qk_norm == QkNorm::per_head ? "per head"
                                                : "over the whole projection",
                ", not as this config says");
  REPRISE_CHECK(c.norm_placement == f.norm_placement, "LlamaConfig: ", f.model_type,
                " models place their norms ",
                f.norm_placement == NormPlacement::before  ? "before"
                : f.norm_placement == NormPlacement::after ? "after"
                                                           : "before and after",
                " attention and the MLP, not as this config says");
  REPRISE_CHECK(c.norm_unit_offset == f.unit_offset_norms, "LlamaConfig: ", f.model_type,
                " models scale their RMSNorms by ", f.unit_offset_norms ? "1 + weight" : "weight",
                ", not as this config says (norm_unit_offset)");
  REPRISE_CHECK(c.scale_embeddings == f.scaled_embeddings, "LlamaConfig: ", f.model_type,
                " models ", f.scaled_embeddings ? "scale" : "do not scale",
                " their embeddings by sqrt(hidden_size), not as this config says");
  refuse(c.query_pre_attn_scalar != 0 && !f.query_pre_attn_scalar, "query_pre_attn_scalar");
  refuse(c.final_logit_softcapping != 0 && !f.final_logit_softcapping, "final_logit_softcapping");
  refuse(c.sliding_window != 0 && f.window == Window::none, "sliding-window attention");
  refuse(!c.layer_types.empty() && f.window != Window::per_layer_if_enabled &&
             f.window != Window::per_layer && !f.linear_attention,
         "per-layer attention types (layer_types)");
  REPRISE_CHECK(f.linear_attention == c.linear_attention.has_value(), "LlamaConfig: ", f.model_type,
                f.linear_attention ? " models have gated DeltaNet layers (set linear_attention)"
                                   : " models have no gated DeltaNet layers (linear_attention)");
  const bool linear =
      std::count(c.layer_types.begin(), c.layer_types.end(), LayerAttention::linear) > 0;
  refuse(linear && !c.linear_attention, "linear attention layers without linear_attention");
  REPRISE_CHECK(!c.linear_attention || c.linear_attention->split_projections ==
                                           f.defaults.linear_attention.split_projections,
                "LlamaConfig: ", f.model_type, " models' gated DeltaNet layers project ",
                f.defaults.linear_attention.split_projections ? "q, k, v, z, b and a apart"
                                                              : "qkvz and ba together",
                ", not as this config says (split_projections)");
  REPRISE_CHECK(c.attention_output_gate == f.attention_output_gate, "LlamaConfig: ", f.model_type,
                " models ", f.attention_output_gate ? "gate" : "do not gate",
                " their attention's output, not as this config says (attention_output_gate)");
  refuse(c.sliding_rope.has_value() && !f.rope_per_layer_type, "rope per layer type");
  refuse(!c.nope_layers.empty() && !f.nope_layers, "layers without rotary embeddings (NoPE)");
  refuse(c.partial_rotary_factor != 1 && !f.partial_rotary, "partial rotary embeddings");
  REPRISE_CHECK(c.attention_sinks == f.attention_sinks, "LlamaConfig: ", f.model_type,
                " models have ", f.attention_sinks ? "" : "no ",
                "attention sinks, not as this config says");
  REPRISE_CHECK(f.mla == c.mla.has_value(), "LlamaConfig: ", f.model_type,
                f.mla ? " models have multi-head latent attention (set mla)"
                      : " models have no multi-head latent attention (mla)");
}

void check_expert_pieces(const LlamaConfig& c) {
  const FamilyInfo& f = c.info();
  const ExpertPieces& p = f.experts;
  REPRISE_CHECK(p.moe == c.moe.has_value(), "LlamaConfig: ", f.model_type,
                p.moe ? " models are mixtures of experts (set moe)" : " models have no experts");
  if (!c.moe) return;
  auto refuse = [&](bool present, const char* what) {
    REPRISE_CHECK(!present, "LlamaConfig: ", f.model_type, " models have no ", what);
  };
  const MoeConfig& m = *c.moe;
  const bool deepseek = p.deepseek_routing;
  refuse(m.scoring_func == RouterScoring::sigmoid && !p.sigmoid_scoring && !deepseek,
         "sigmoid routing");
  refuse(m.scoring_func == RouterScoring::softmax && deepseek, "softmax routing");
  refuse((m.score_correction_bias || m.n_group > 1 || m.routed_scaling_factor != 1) && !deepseek,
         "group-limited routing, score correction bias or routed scaling");
  refuse(m.n_shared_experts > 0 && !p.shared_experts && !deepseek, "n_shared_experts");
  refuse((m.shared_expert_intermediate_size > 0 || m.shared_expert_gate) && !p.gated_shared_expert,
         "a gated shared expert");
  refuse(m.moe_intermediate_size > 0 && !p.expert_width, "moe_intermediate_size");
  refuse(m.first_k_dense_replace > 0 && !deepseek, "first_k_dense_replace");
  refuse((m.decoder_sparse_step > 1 || !m.mlp_only_layers.empty()) && !p.sparse_layers,
         "decoder_sparse_step or mlp_only_layers");
  REPRISE_CHECK(m.router_bias == p.biases && m.expert_bias == p.biases,
                "LlamaConfig: ", f.model_type, " models' router and experts have ",
                p.biases ? "" : "no ", "biases, not as this config says");
  REPRISE_CHECK(m.clamped_swiglu == p.clamped_swiglu, "LlamaConfig: ", f.model_type,
                " models' experts use ", p.clamped_swiglu ? "the clamped" : "the plain",
                " SwiGLU, not as this config says");
  refuse(!m.norm_topk_prob && !p.norm_topk_field, "gates left unnormalized (norm_topk_prob)");
}

}  // namespace

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
  REPRISE_CHECK(head_dim != 0 || mla || hidden_size % num_attention_heads == 0,
                "LlamaConfig: hidden_size ", hidden_size,
                " is not a multiple of num_attention_heads ", num_attention_heads,
                " (set head_dim)");
  REPRISE_CHECK(partial_rotary_factor > 0 && partial_rotary_factor <= 1,
                "LlamaConfig: partial_rotary_factor must be in (0, 1], got ",
                partial_rotary_factor);
  REPRISE_CHECK(mla || (rope_dim() > 0 && rope_dim() % 2 == 0), "LlamaConfig: the rotated width ",
                rope_dim(), " (head_dim ", resolved_head_dim(), " x partial_rotary_factor ",
                partial_rotary_factor, ") must be even and positive for rotary embeddings");
  REPRISE_CHECK(mla || num_attention_heads % num_key_value_heads == 0,
                "LlamaConfig: num_attention_heads ", num_attention_heads,
                " is not a multiple of num_key_value_heads ", num_key_value_heads);
  REPRISE_CHECK(rms_norm_eps > 0 && std::isfinite(rms_norm_eps),
                "LlamaConfig: rms_norm_eps must be positive, got ", rms_norm_eps);
  REPRISE_CHECK(rope_theta > 0 && std::isfinite(rope_theta),
                "LlamaConfig: rope_theta must be positive, got ", rope_theta);
  rope_scaling.validate();
  if (sliding_rope) {
    REPRISE_CHECK(sliding_rope->theta > 0 && std::isfinite(sliding_rope->theta),
                  "LlamaConfig: sliding_rope's theta must be positive, got ", sliding_rope->theta);
    sliding_rope->scaling.validate();
    REPRISE_CHECK(sliding_window > 0, "LlamaConfig: sliding_rope is set but no layer slides ",
                  "(sliding_window is 0)");
  }
  REPRISE_CHECK(initializer_range >= 0 && std::isfinite(initializer_range),
                "LlamaConfig: initializer_range must be >= 0, got ", initializer_range);
  REPRISE_CHECK(attention_dropout >= 0 && attention_dropout < 1,
                "LlamaConfig: attention_dropout must be in [0, 1), got ", attention_dropout);
  REPRISE_CHECK(dropout >= 0 && dropout < 1, "LlamaConfig: dropout must be in [0, 1), got ",
                dropout);
  REPRISE_CHECK(!pad_token_id || (*pad_token_id >= 0 && *pad_token_id < vocab_size),
                "LlamaConfig: pad_token_id ", pad_token_id.value_or(0),
                " is not in [0, vocab_size ", vocab_size, ")");
  REPRISE_CHECK(sliding_window >= 0, "LlamaConfig: sliding_window must be >= 0 (0: none), got ",
                sliding_window);
  REPRISE_CHECK(layer_types.empty() || int64_t(layer_types.size()) == num_hidden_layers,
                "LlamaConfig: layer_types has ", layer_types.size(), " entries for ",
                num_hidden_layers, " layers");
  REPRISE_CHECK(sliding_window > 0 || std::count(layer_types.begin(), layer_types.end(),
                                                 LayerAttention::sliding) == 0,
                "LlamaConfig: layer_types marks sliding layers but sliding_window is 0");
  REPRISE_CHECK(nope_layers.empty() || int64_t(nope_layers.size()) == num_hidden_layers,
                "LlamaConfig: nope_layers has ", nope_layers.size(), " entries for ",
                num_hidden_layers, " layers");
  REPRISE_CHECK(query_pre_attn_scalar >= 0 && std::isfinite(query_pre_attn_scalar),
                "LlamaConfig: query_pre_attn_scalar must be positive (or 0 for head_dim), got ",
                query_pre_attn_scalar);
  REPRISE_CHECK(final_logit_softcapping >= 0 && std::isfinite(final_logit_softcapping),
                "LlamaConfig: final_logit_softcapping must be positive (or 0 for none), got ",
                final_logit_softcapping);
  REPRISE_CHECK(!moe || hidden_act == MlpActivation::silu,
                "LlamaConfig: the experts of an MoE layer are SwiGLU; hidden_act must be silu");
  if (mla) mla->validate();
  if (moe) moe->validate();
  if (linear_attention) linear_attention->validate();
  check_attention_pieces(*this);
  check_expert_pieces(*this);
}

std::string LlamaConfig::describe() const {
  std::ostringstream s;
  s << info().model_type << ", hidden " << hidden_size << ", " << num_hidden_layers << " layers, "
    << num_attention_heads << " heads";
  if (mla) {
    s << " of MLA (rank " << mla->kv_lora_rank << ", " << mla->qk_nope_head_dim << "+"
      << mla->qk_rope_head_dim << ", v " << mla->v_head_dim << ")";
  } else {
    s << " (" << num_key_value_heads << " kv) of " << resolved_head_dim();
  }
  s << ", ffn " << intermediate_size << ", vocab " << vocab_size;
  if (tie_word_embeddings) s << ", tied embeddings";
  if (rope_scaling.type != RopeType::standard) s << ", rope " << rope_scaling.describe();
  if (sliding_rope) {
    s << ", sliding layers' rope theta " << sliding_rope->theta;
    if (sliding_rope->scaling.type != RopeType::standard)
      s << " " << sliding_rope->scaling.describe();
  }
  if (partial_rotary_factor != 1) s << ", rope on " << rope_dim() << " of " << resolved_head_dim();
  if (qkv_bias || o_bias || mlp_bias) s << ", biases";
  if (qk_norm != QkNorm::none) s << ", q/k norm";
  if (hidden_act == MlpActivation::gelu_tanh) s << ", GELU-tanh MLP";
  if (final_logit_softcapping > 0) s << ", logits capped at " << final_logit_softcapping;
  if (attention_sinks) s << ", attention sinks";
  if (attention_output_gate) s << ", gated attention";
  if (linear_attention) {
    const LinearAttentionConfig& a = *linear_attention;
    s << ", " << std::count(layer_types.begin(), layer_types.end(), LayerAttention::linear)
      << " gated DeltaNet layers (" << a.key_heads << "/" << a.value_heads << " heads of "
      << a.key_head_dim << "/" << a.value_head_dim << ", conv " << a.conv_kernel << ")";
  }
  if (sliding_window > 0) s << ", window " << sliding_window;
  if (!nope_layers.empty())
    s << ", NoPE on " << std::count(nope_layers.begin(), nope_layers.end(), true) << " layers";
  if (moe) s << ", " << moe->describe();
  return s.str();
}

}  // namespace reprise::nn
