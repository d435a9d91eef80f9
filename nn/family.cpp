#include "nn/family.h"

#include "base/error.h"

namespace reprise::nn {

namespace {

constexpr const char* kDeepseekTrainingFields[] = {"aux_loss_alpha", "seq_aux", "ep_size",
                                                   "num_nextn_predict_layers"};
// Multi-token prediction layers, which the HF model does not build.
constexpr const char* kGlmTrainingFields[] = {"num_nextn_predict_layers", "num_mtp_layers"};

// One row per family, in enum order: transformers' config class defaults,
// and its model's pieces.
constexpr FamilyInfo kFamilies[] = {
    {.family = Family::llama,
     .model_type = "llama",
     .architecture = "LlamaForCausalLM",
     .defaults = {},
     .biases = AttentionBiases::together,
     .mlp_bias = true,
     .pretraining_tp = true},
    {.family = Family::mistral,
     .model_type = "mistral",
     .architecture = "MistralForCausalLM",
     .defaults = {.kv_heads = 8, .max_position_embeddings = 131072},
     .window = Window::uniform,
     .window_ignores_layer_types = true},
    {.family = Family::qwen2,
     .model_type = "qwen2",
     .architecture = "Qwen2ForCausalLM",
     .defaults = {.kv_heads = 32, .max_position_embeddings = 32768},
     .biases = AttentionBiases::qkv_always,
     .window = Window::per_layer_if_enabled},
    {.family = Family::qwen3,
     .model_type = "qwen3",
     .architecture = "Qwen3ForCausalLM",
     .defaults = {.kv_heads = 32, .max_position_embeddings = 32768, .head_dim = 128},
     .biases = AttentionBiases::together,
     .qk_norm = QkNorm::per_head,
     .window = Window::per_layer_if_enabled},
    {.family = Family::mixtral,
     .model_type = "mixtral",
     .architecture = "MixtralForCausalLM",
     .defaults = {.kv_heads = 8,
                  .max_position_embeddings = 131072,
                  .rms_norm_eps = 1e-5,
                  .rope_theta = 1e6,
                  .experts = 8,
                  .experts_per_tok = 2,
                  .aux_loss_coef = 0.001,
                  .norm_topk_prob = true},
     .window = Window::uniform,
     // reprise's own Mixtral may also score with sigmoid and add shared
     // experts (as DeepSeek's), written as fields transformers ignores.
     .experts = {.moe = true,
                 .experts_field = "num_local_experts",
                 .jitter_field = true,
                 .sigmoid_scoring = true,
                 .shared_experts = true},
     .names = {.block = "block_sparse_moe", .gate = "w1", .up = "w3", .down = "w2"}},
    {.family = Family::qwen2_moe,
     .model_type = "qwen2_moe",
     .architecture = "Qwen2MoeForCausalLM",
     .defaults = {.kv_heads = 16,
                  .max_position_embeddings = 32768,
                  .experts = 60,
                  .experts_per_tok = 4,
                  .aux_loss_coef = 0.001},
     .biases = AttentionBiases::qkv_field,
     .window = Window::per_layer_if_enabled,
     .experts = {.moe = true,
                 .experts_field = "num_experts",
                 .experts_alias = true,
                 .expert_width = true,
                 .sparse_layers = true,
                 .gated_shared_expert = true},
     .names = {.shared = "shared_expert"}},
    {.family = Family::qwen3_moe,
     .model_type = "qwen3_moe",
     .architecture = "Qwen3MoeForCausalLM",
     .defaults = {.kv_heads = 4,
                  .max_position_embeddings = 32768,
                  .experts = 128,
                  .experts_per_tok = 8,
                  .aux_loss_coef = 0.001},
     .biases = AttentionBiases::together,
     .qk_norm = QkNorm::per_head,
     .window = Window::uniform_if_enabled,
     .experts = {.moe = true,
                 .experts_field = "num_experts",
                 .experts_alias = true,
                 .expert_width = true,
                 .sparse_layers = true}},
    {.family = Family::olmoe,
     .model_type = "olmoe",
     .architecture = "OlmoeForCausalLM",
     .defaults = {.max_position_embeddings = 4096,
                  .rms_norm_eps = 1e-5,
                  .pad_token_id = 1,
                  .experts = 64,
                  .experts_per_tok = 8,
                  .aux_loss_coef = 0.01},
     .biases = AttentionBiases::together,
     .qk_norm = QkNorm::projection,
     .experts = {.moe = true, .experts_field = "num_experts", .experts_alias = true}},
    {.family = Family::deepseek_v3,
     .model_type = "deepseek_v3",
     .architecture = "DeepseekV3ForCausalLM",
     .defaults = {.kv_heads = 128,
                  .max_position_embeddings = 4096,
                  .experts = 256,
                  .experts_per_tok = 8,
                  .aux_loss_coef = 0.0,
                  .norm_topk_prob = true,
                  .n_group = 8,
                  .topk_group = 4,
                  .routed_scaling_factor = 2.5,
                  .first_k_dense_replace = 3},
     .biases = AttentionBiases::none_refused,
     .mla = true,
     .unread_fields = kDeepseekTrainingFields,
     .experts = {.moe = true,
                 .experts_field = "n_routed_experts",
                 .expert_width = true,
                 .deepseek_routing = true,
                 .routing_method_fields = true}},
    {.family = Family::smollm3,
     .model_type = "smollm3",
     .architecture = "SmolLM3ForCausalLM",
     .defaults = {.kv_heads = 4,
                  .max_position_embeddings = 32768,
                  .rope_theta = 2e6,
                  .tie_word_embeddings = true,
                  .pad_token_id = 128004},
     .biases = AttentionBiases::together,
     .mlp_bias = true,
     .window = Window::per_layer_if_enabled,
     .nope_layers = true},
    {.family = Family::olmo2,
     .model_type = "olmo2",
     .architecture = "Olmo2ForCausalLM",
     .defaults = {.rms_norm_eps = 1e-5, .pad_token_id = 1},
     .biases = AttentionBiases::together,
     .qk_norm = QkNorm::projection,
     .norm_placement = NormPlacement::after},
    {.family = Family::glm4_moe,
     .model_type = "glm4_moe",
     .architecture = "Glm4MoeForCausalLM",
     .defaults = {.kv_heads = 8,
                  .max_position_embeddings = 131072,
                  .rms_norm_eps = 1e-5,
                  .experts = 128,
                  .experts_per_tok = 8,
                  .aux_loss_coef = 0.0,
                  .norm_topk_prob = true,
                  .first_k_dense_replace = 1,
                  .partial_rotary_factor = 0.5},
     .biases = AttentionBiases::qkv_by_attention_bias,
     .qk_norm = QkNorm::per_head,
     .qk_norm_field = "use_qk_norm",
     .partial_rotary = true,
     .unread_fields = kGlmTrainingFields,
     .experts = {.moe = true,
                 .experts_field = "n_routed_experts",
                 .expert_width = true,
                 .deepseek_routing = true}},
    {.family = Family::olmo3,
     .model_type = "olmo3",
     .architecture = "Olmo3ForCausalLM",
     .defaults = {.rms_norm_eps = 1e-5,
                  .rope_theta = 5e5,
                  .pad_token_id = 1,
                  .sliding_window = 4096,
                  .full_attention_every = 4},
     .biases = AttentionBiases::together,
     .qk_norm = QkNorm::projection,
     .norm_placement = NormPlacement::after,
     .window = Window::per_layer,
     .rope_per_layer_type = true},
    {.family = Family::gemma3_text,
     .model_type = "gemma3_text",
     .architecture = "Gemma3ForCausalLM",
     .defaults = {.kv_heads = 4,
                  .max_position_embeddings = 131072,
                  .rope_theta = 1e6,
                  .head_dim = 256,
                  .tie_word_embeddings = true,
                  .pad_token_id = 0,
                  .sliding_window = 4096,
                  .full_attention_every = 6,
                  .sliding_rope_theta = 1e4,
                  .activation = MlpActivation::gelu_tanh,
                  .query_pre_attn_scalar = 256},
     .biases = AttentionBiases::together,
     .qk_norm = QkNorm::per_head,
     .norm_placement = NormPlacement::both,
     .window = Window::per_layer,
     .rope_per_layer_type = true,
     .window_pattern_field = true,
     .activation_field = "hidden_activation",
     .unit_offset_norms = true,
     .scaled_embeddings = true,
     .query_pre_attn_scalar = true,
     .final_logit_softcapping = true},
};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kFamilies); ++i) {
    if (kFamilies[i].family != Family(i)) return false;
  }
  return true;
}
static_assert(rows_in_enum_order(), "kFamilies: one row per Family, in enum order");
static_assert(std::size(kFamilies) == kFamilyCount, "kFamilies: a row for every Family");

}  // namespace

std::span<const FamilyInfo> all_families() { return kFamilies; }

const FamilyInfo& family_info(Family f) {
  REPRISE_CHECK(size_t(f) < std::size(kFamilies), "family_info: unknown family ", int(f));
  return kFamilies[size_t(f)];
}

const FamilyInfo* family_named(std::string_view model_type) {
  for (const FamilyInfo& info : kFamilies) {
    if (model_type == info.model_type) return &info;
  }
  return nullptr;
}

std::string supported_model_types() {
  std::string s;
  for (const FamilyInfo& info : kFamilies)
    s += (s.empty() ? "" : ", ") + std::string(info.model_type);
  return s;
}

}  // namespace reprise::nn
