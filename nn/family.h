#pragma once
// A model family as one row (FamilyInfo, nn/family.cpp): the model_type
// names it answers to, its transformers class, its config class's defaults
// by field name, which pieces its models may use, how its config.json
// spells the fields of those pieces, and the module names its checkpoints
// give an MoE layer's parts. Reading and writing config.json
// (nn/hf_config.cpp), the check of a config's pieces (LlamaConfig::
// validate), the weight names (nn/moe.cpp), the Python enum and the list of
// supported model types all come from the rows; no code branches on a
// family. Adding a family like the others is a row (and an enumerator),
// its golden fixture, and whatever piece none has yet.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "nn/linear_attention_config.h"
#include "nn/rope.h"

namespace reprise::nn {

// The families, each with its row in nn/family.cpp (a build error until it
// has one).
// clang-format off
#define REPRISE_FAMILIES(X)                                                   \
  X(llama) X(mistral) X(qwen2) X(qwen3) X(mixtral) X(qwen2_moe) X(qwen3_moe) \
  X(olmoe) X(deepseek_v3) X(smollm3) X(olmo2) X(glm4_moe) X(olmo3)   \
  X(gemma3_text) X(gpt_oss) X(qwen3_next) X(qwen3_5_text) X(qwen3_5_moe_text)
// clang-format on

enum class Family : uint8_t {
#define REPRISE_FAMILY_ENUMERATOR(name) name,
  REPRISE_FAMILIES(REPRISE_FAMILY_ENUMERATOR)
#undef REPRISE_FAMILY_ENUMERATOR
};

#define REPRISE_FAMILY_ONE(name) +1
inline constexpr size_t kFamilyCount = 0 REPRISE_FAMILIES(REPRISE_FAMILY_ONE);
#undef REPRISE_FAMILY_ONE

// Where q and k are RMS-normalized before RoPE.
enum class QkNorm : uint8_t {
  none,
  per_head,    // Qwen3: over each head's D values (q_norm, k_norm of shape (D))
  projection,  // OLMoE: over the whole projection (q_norm (Hq D), k_norm (Hkv D))
};

// Where a decoder layer's RMSNorms sit.
enum class NormPlacement : uint8_t {
  // Llama: input_layernorm before attention, post_attention_layernorm
  // before the MLP: h = x + attn(n1(x)), out = h + mlp(n2(h)).
  before,
  // OLMo 2: post_attention_layernorm on attention's output and
  // post_feedforward_layernorm on the MLP's, before each residual add:
  // h = x + n1(attn(x)), out = h + n2(mlp(h)).
  after,
  // Gemma 3: both around each block, input_layernorm and
  // post_attention_layernorm around attention, pre_feedforward_layernorm
  // and post_feedforward_layernorm around the MLP:
  // h = x + n2(attn(n1(x))), out = h + n4(mlp(n3(h))).
  both,
};

// The activation of the gated MLP, down(act(gate(x)) * up(x)), by its
// config.json name.
enum class MlpActivation : uint8_t {
  silu,       // "silu": SwiGLU
  gelu_tanh,  // "gelu_pytorch_tanh": GELU with the tanh approximation (Gemma)
};

// The biases of the attention projections, and how config.json says so.
enum class AttentionBiases : uint8_t {
  none,                   // none, and no field (a stray attention_bias is ignored, as HF does)
  none_refused,           // none: attention_bias must be false (it is written, false)
  together,               // q, k, v and o together, or none: attention_bias
  qkv_always,             // q, k and v always, o never; no field
  qkv_field,              // q, k and v by qkv_bias (default true), o never
  qkv_by_attention_bias,  // q, k and v by attention_bias, o never (GLM-4.5)
};

// Sliding-window attention, and how config.json says so.
enum class Window : uint8_t {
  none,                  // no window: sliding_window and its kin are ignored
  uniform,               // sliding_window, on every layer
  uniform_if_enabled,    // sliding_window on every layer when use_sliding_window
  per_layer_if_enabled,  // ... on the layers layer_types marks (or, without it, those
                         // from max_window_layers on; with nope_layers, the NoPE layers)
  per_layer,             // sliding_window on the layers layer_types marks, always (or,
                         // without it, on all but every FamilyDefaults::full_attention_every-th)
};

// The config class's defaults of the fields a config.json may leave out
// (transformers writes them all; other writers may not). 0 in kv_heads or
// head_dim: derived as the class does (num_attention_heads, hidden_size /
// num_attention_heads).
struct FamilyDefaults {
  int64_t kv_heads = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e4;
  // The rope when config.json has neither rope_parameters nor rope_scaling.
  RopeScaling rope_scaling = {};
  int64_t head_dim = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // AttentionBiases::together's field
  std::optional<int64_t> pad_token_id;
  // MoE: experts, per token, aux loss weight, renormalized gates.
  int64_t experts = 0;
  int64_t experts_per_tok = 0;
  double aux_loss_coef = 0;
  bool norm_topk_prob = false;
  // DeepSeek-style routing (ExpertPieces::deepseek_routing).
  int64_t n_shared_experts = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  int64_t first_k_dense_replace = 0;
  // Partial rotary (FamilyInfo::partial_rotary).
  double partial_rotary_factor = 1.0;
  // Window::per_layer: the window, and the period of full-attention
  // layers when layer_types is absent.
  int64_t sliding_window = 0;
  int64_t full_attention_every = 0;
  // FamilyInfo::rope_per_layer_type: the sliding layers' default theta (0:
  // rope_theta's).
  double sliding_rope_theta = 0;
  MlpActivation activation = MlpActivation::silu;
  // FamilyInfo::query_pre_attn_scalar.
  double query_pre_attn_scalar = 0;
  // ExpertPieces::clamped_swiglu.
  double swiglu_alpha = 1.702;
  double swiglu_limit = 7.0;
  // FamilyInfo::linear_attention: the layers' shape, and the period of
  // full-attention layers when layer_types is absent (full_attention_every).
  LinearAttentionConfig linear_attention = {};
};

// The mixture of experts a family's layers may hold, and how config.json
// spells it. Every MoE family has num_experts_per_tok, norm_topk_prob and
// router_aux_loss_coef.
struct ExpertPieces {
  bool moe = false;                  // its layers may be mixtures of experts
  const char* experts_field = "";    // the expert count: "num_local_experts", "n_routed_experts"
  bool experts_alias = false;        // also num_local_experts (Qwen-MoE's attribute map)
  bool jitter_field = false;         // router_jitter_noise (must be 0)
  bool sigmoid_scoring = false;      // scoring_func may be "sigmoid" (reprise's own Mixtral)
  bool shared_experts = false;       // n_shared_experts (default 0)
  bool expert_width = false;         // moe_intermediate_size, required
  bool sparse_layers = false;        // decoder_sparse_step and mlp_only_layers
  bool gated_shared_expert = false;  // shared_expert_intermediate_size, required; gated when > 0
  // DeepSeek-V3's routing: sigmoid scores only, the score correction bias,
  // group-limited top-k, routed scaling, n_shared_experts and
  // first_k_dense_replace (their defaults in FamilyDefaults).
  bool deepseek_routing = false;
  // ... with DeepSeek's own fields naming the method: scoring_func
  // "sigmoid", topk_method "noaux_tc", moe_layer_freq 1.
  bool routing_method_fields = false;
  // norm_topk_prob is a field; without it the gates are always
  // renormalized (GPT-OSS: a softmax over the k chosen logits, which is
  // the softmax over all renormalized over the k).
  bool norm_topk_field = true;
  // GPT-OSS: the router and every expert projection have biases, and the
  // experts' activation is the clamped SwiGLU of swiglu_alpha and
  // swiglu_limit (MoeConfig::clamped_swiglu).
  bool biases = false;
  bool clamped_swiglu = false;
};

// The module names of an MoE layer's parts in a family's checkpoints (the
// dense parts are named alike in every family: self_attn.q_proj, ...).
struct ExpertNames {
  const char* block = "mlp";  // "block_sparse_moe" (Mixtral's)
  // An expert's SwiGLU projections: Mixtral's w1, w3, w2.
  const char* gate = "gate_proj";
  const char* up = "up_proj";
  const char* down = "down_proj";
  const char* shared = "shared_experts";  // "shared_expert" (Qwen2-MoE)
  const char* router = "gate";            // "router" (GPT-OSS)
  // The checkpoints hold each layer's experts fused, as GPT-OSS's
  // (nn/hf_layout.h); reprise's modules keep one Linear per projection.
  bool fused = false;
};

// A family's row.
struct FamilyInfo {
  Family family;
  const char* model_type;    // "qwen2_moe"
  const char* architecture;  // "Qwen2MoeForCausalLM"
  FamilyDefaults defaults;
  AttentionBiases biases = AttentionBiases::none;
  bool mlp_bias = false;        // mlp_bias
  bool pretraining_tp = false;  // Llama's pretraining_tp, which must be 1
  QkNorm qk_norm = QkNorm::none;
  // The field that turns qk_norm on (GLM-4.5's use_qk_norm); nullptr: always on.
  const char* qk_norm_field = nullptr;
  NormPlacement norm_placement = NormPlacement::before;
  Window window = Window::none;
  bool window_ignores_layer_types = false;  // Mistral: HF's model ignores layer_types
  bool mla = false;                         // DeepSeek-V3's multi-head latent attention
  // Layers without rotary embeddings (SmolLM3): no_rope_layers, one 0/1 per
  // layer (0: NoPE), or without it every no_rope_layer_interval-th layer.
  bool nope_layers = false;
  // partial_rotary_factor (in rope_parameters or beside it): rope on the
  // first factor x head_dim dims of each head, the rest passed through.
  bool partial_rotary = false;
  // rope_parameters may hold one rope per layer type, {"full_attention":
  // {...}, "sliding_attention": {...}} (OLMo 3): the sliding layers' is
  // LlamaConfig::sliding_rope.
  bool rope_per_layer_type = false;
  // Window::per_layer: sliding_window_pattern, the period of full layers
  // when layer_types is absent (Gemma 3's older spelling).
  bool window_pattern_field = false;
  // The config.json field naming the MLP's activation.
  const char* activation_field = "hidden_act";
  // Gemma: RMSNorm scales by 1 + weight (its weights start at 0), the
  // embeddings are multiplied by sqrt(hidden_size), the softmax scale is
  // query_pre_attn_scalar^-1/2, and final_logit_softcapping may cap the
  // logits (cap tanh(logits / cap)).
  bool unit_offset_norms = false;
  bool scaled_embeddings = false;
  bool query_pre_attn_scalar = false;
  bool final_logit_softcapping = false;
  // GPT-OSS: a learned logit per head in each softmax's denominator
  // (self_attn.sinks, ops::AttentionOptions::sinks).
  bool attention_sinks = false;
  // Qwen3-Next: q_proj also gives each head a gate, sigmoid(gate) times
  // the attention's output before o_proj.
  bool attention_output_gate = false;
  // Qwen3-Next: gated DeltaNet layers ("linear_attn") where layer_types
  // says "linear_attention" (by default all but every
  // FamilyDefaults::full_attention_every-th), their shape from the
  // linear_* fields.
  bool linear_attention = false;
  // Qwen3.5: rope_parameters may hold M-RoPE's mrope_section and
  // mrope_interleaved, which change nothing for text (its three position
  // streams are equal), so they are read and left alone.
  bool text_mrope = false;
  // The model_type of the vision-language folders that nest this family's
  // config as text_config and its weights under model.language_model.
  // (Qwen3.5's "qwen3_5"): reprise reads their text model; nullptr: none.
  const char* vision_wrapper = nullptr;
  // Fields of the family's config that its transformers model does not
  // read (a training setting of the authors' own code).
  std::span<const char* const> unread_fields = {};
  ExpertPieces experts = {};
  ExpertNames names = {};
};

// Every row, in enum order.
std::span<const FamilyInfo> all_families();
const FamilyInfo& family_info(Family f);
// The family of a config.json model_type; nullptr for one reprise lacks.
const FamilyInfo* family_named(std::string_view model_type);
// The family whose text model a vision-language model_type nests
// (FamilyInfo::vision_wrapper); nullptr for none.
const FamilyInfo* family_nested_in(std::string_view model_type);
// "llama, mistral, qwen2, ..." for error messages.
std::string supported_model_types();

}  // namespace reprise::nn
