#pragma once
// What a model is made of: the family it comes from and the pieces of its
// decoder layers, as transformers' config classes describe them (the same
// field names and defaults). A family is data, not a class: LlamaConfig
// names the attention (grouped-query with optional biases, q/k norm and a
// sliding window, or DeepSeek's multi-head latent attention), the rope
// type, and per layer a dense SwiGLU MLP or a mixture of experts with its
// router's scoring, grouping and shared experts. One forward
// (nn/llama.h) composes the pieces, so checkpoint policies, autocast, the
// CUDA kernels, generation and the parallel layers serve every family.
// Which pieces a family may use, and how its config.json and checkpoints
// name them, is its row (FamilyInfo, nn/family.h); nn/hf_config.h reads
// and writes config.json from the rows.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/family.h"
#include "nn/rope.h"

namespace reprise::nn {

// ---- mixture of experts ------------------------------------------------------

enum class RouterScoring {
  softmax,  // Mixtral, Qwen-MoE, OLMoE: softmax over all experts, then top-k
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
  double capacity_factor = 0.0;  // 0: no limit; else > 0 (nn/moe.h)
  int64_t n_shared_experts = 0;  // shared SwiGLU of n_shared_experts * F (DeepSeek)
  RouterDType router_dtype = RouterDType::f32;
  // Each routed expert's hidden width F; 0: the model's intermediate_size
  // (Mixtral). Dense layers of a model that has both use intermediate_size.
  int64_t moe_intermediate_size = 0;
  // The shared expert's width when not n_shared_experts * F (Qwen2-MoE's
  // shared_expert_intermediate_size); 0: n_shared_experts * F.
  int64_t shared_expert_intermediate_size = 0;
  // Qwen2-MoE: the shared expert's output times sigmoid(x . g), g the
  // (1, C) weight "shared_expert_gate".
  bool shared_expert_gate = false;
  // DeepSeek-V3's routing: the k experts are chosen on scores plus a
  // per-expert bias (e_score_correction_bias, a buffer: no gradient) among
  // the topk_group of n_group expert groups whose two best biased scores
  // sum highest; the gates are the unbiased scores of the chosen experts,
  // renormalized when norm_topk_prob, times routed_scaling_factor.
  bool score_correction_bias = false;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  // DeepSeek-V3's auxiliary-loss-free balancing (torchtitan's
  // load_balance_coeff), a training setting: after each optimizer step every
  // expert's e_score_correction_bias moves by this much toward balance
  // (nn::balance_score_bias); 0: off. Only with score_correction_bias.
  double load_balance_coeff = 0.0;
  // Which decoder layers are MoE: layer i is when i >= first_k_dense_replace
  // (DeepSeek), i is not in mlp_only_layers and (i + 1) % decoder_sparse_step
  // == 0 (Qwen-MoE); the rest are dense SwiGLU MLPs.
  int64_t first_k_dense_replace = 0;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // GPT-OSS: the router's logits and every routed expert's three
  // projections have biases (router.bias (E); gate_proj.bias, up_proj.bias
  // (F), down_proj.bias (C)).
  bool router_bias = false;
  bool expert_bias = false;
  // GPT-OSS's expert activation instead of silu(gate) * up:
  //   g = min(gate, swiglu_limit), u = clamp(up, -swiglu_limit, swiglu_limit)
  //   act = (u + 1) * g * sigmoid(swiglu_alpha * g)
  bool clamped_swiglu = false;
  double swiglu_alpha = 1.702;
  double swiglu_limit = 7.0;

  // Raises an Error naming the field and its value when out of range.
  void validate() const;
  // The per-expert capacity for N tokens: ceil(capacity_factor * N k / E),
  // or -1 (no limit) when capacity_factor is 0.
  int64_t capacity(int64_t tokens) const;
  // Whether decoder layer `layer` is an MoE layer (see above).
  bool is_moe_layer(int64_t layer) const;
  // F of an expert for a model whose intermediate_size is `dense`.
  int64_t expert_intermediate_size(int64_t dense) const;
  // The shared expert's width, 0 without one.
  int64_t shared_intermediate_size(int64_t dense) const;
  // "4 experts, top-2 softmax, capacity 1.25, 1 shared"
  std::string describe() const;
  friend bool operator==(const MoeConfig&, const MoeConfig&) = default;
};

// ---- attention ---------------------------------------------------------------

// A decoder layer's token mixer (HF's layer_types): attention over every
// earlier position, over a sliding window, or a gated DeltaNet layer
// (linear attention, LlamaConfig::linear_attention).
enum class LayerAttention : uint8_t { full, sliding, linear };

// DeepSeek's multi-head latent attention: q through a low-rank bottleneck
// (or q_proj), keys and values from one compressed latent per position:
//   q       = q_b_proj(q_a_layernorm(q_a_proj(x)))    (B, T, H (dn + dr))
//   [c, kr] = kv_a_proj_with_mqa(x)                    c: (B, T, R), kr: (B, T, dr)
//   [kn, v] = kv_b_proj(kv_a_layernorm(c))             (B, T, H (dn + dv))
//   keys    = [kn, rope(kr) shared by all heads], queries = [qn, rope(qr)]
// dn = qk_nope_head_dim, dr = qk_rope_head_dim, dv = v_head_dim,
// R = kv_lora_rank. With rope_interleave the rotated dims are stored as
// interleaved pairs (x0, x1), (x2, x3), ... and de-interleaved before the
// rotate-half rotation, as HF does.
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: q = q_proj(x)
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  bool rope_interleave = true;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  void validate() const;
  friend bool operator==(const MlaConfig&, const MlaConfig&) = default;
};

// ---- the model ---------------------------------------------------------------

// Hugging Face's config fields (same names, same defaults as LlamaConfig's;
// each family's config.json defaults come from nn/hf_config.h) plus the
// residual dropout that HF's models do not have.
struct LlamaConfig {
  Family family = Family::llama;
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads (HF's default)
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // the rope type and its parameters (default: none)
  // RoPE on the first partial_rotary_factor x head_dim dims of each head
  // (GLM-4.5); the rest pass through.
  double partial_rotary_factor = 1.0;
  // The rope of the sliding-window layers where it differs from the
  // others' (rope_parameters per layer type: OLMo 3); unset: the same.
  std::optional<LayerRope> sliding_rope;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  // The embedding row that gets no gradient and starts at 0 (HF's
  // pad_token_id, nn.Embedding's padding_idx); unset: none.
  std::optional<int64_t> pad_token_id;
  double attention_dropout = 0.0;  // on the attention weights (HF's attention_dropout)
  double dropout = 0.0;            // on each residual branch before the add (reprise's)
  // Biases of the attention projections: q, k, v (Qwen2's, Llama's
  // attention_bias) and o (Llama's attention_bias); of the MLP (mlp_bias).
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  QkNorm qk_norm = QkNorm::none;
  NormPlacement norm_placement = NormPlacement::before;
  // The MLP's activation: down(act(gate(x)) * up(x)).
  MlpActivation hidden_act = MlpActivation::silu;
  // Gemma's pieces (FamilyInfo): RMSNorm by 1 + weight, embeddings times
  // sqrt(hidden_size), the softmax scale query_pre_attn_scalar^-1/2 (0:
  // head_dim^-1/2), and logits capped at +-final_logit_softcapping by
  // cap tanh(logits / cap) (0: none).
  bool norm_unit_offset = false;
  bool scale_embeddings = false;
  double query_pre_attn_scalar = 0;
  double final_logit_softcapping = 0;
  // GPT-OSS: each head's learned sink logit (self_attn.sinks (Hq)) joins
  // its softmax's denominator (ops::AttentionOptions::sinks).
  bool attention_sinks = false;
  // Qwen3-Next: q_proj gives 2 D per head, the query and a gate; the
  // attention's output is multiplied by sigmoid(gate) before o_proj.
  bool attention_output_gate = false;
  // Set: the layers layer_types marks linear are gated DeltaNet layers of
  // this shape (Qwen3-Next).
  std::optional<LinearAttentionConfig> linear_attention;
  // Sliding-window attention: each query sees at most sliding_window keys,
  // itself included (0: none), on the layers layer_types marks sliding
  // (every layer when layer_types is empty).
  int64_t sliding_window = 0;
  std::vector<LayerAttention> layer_types;
  // Layers whose attention has no rotary embedding (NoPE: SmolLM3), one
  // entry per layer (true: no rope); empty: rope on every layer.
  std::vector<bool> nope_layers;
  // Set: multi-head latent attention (DeepSeek-V3); num_key_value_heads
  // and head_dim are then unused.
  std::optional<MlaConfig> mla;
  // Set: the layers MoeConfig::is_moe_layer names are mixtures of experts
  // of moe_intermediate_size each (or intermediate_size); unset: dense.
  std::optional<MoeConfig> moe;

  const FamilyInfo& info() const { return family_info(family); }
  // head_dim, or hidden_size / num_attention_heads when head_dim is 0.
  int64_t resolved_head_dim() const;
  // The width RoPE rotates: head_dim times partial_rotary_factor, or MLA's
  // qk_rope_head_dim.
  int64_t rope_dim() const;
  // The keys a query of decoder layer `layer` sees at most: sliding_window
  // on a sliding layer, 0 (no limit) otherwise.
  int64_t attention_window(int64_t layer) const;
  // The rope of decoder layer `layer`: sliding_rope on a sliding layer when
  // set, else rope_theta and rope_scaling.
  LayerRope rope_of(int64_t layer) const;
  // Whether decoder layer `layer` is a gated DeltaNet layer.
  bool is_linear_layer(int64_t layer) const {
    return !layer_types.empty() && layer_types.at(size_t(layer)) == LayerAttention::linear;
  }
  // Whether decoder layer `layer` rotates q and k.
  bool uses_rope(int64_t layer) const {
    return nope_layers.empty() || !nope_layers.at(size_t(layer));
  }
  // Whether decoder layer `layer` is an MoE layer.
  bool is_moe_layer(int64_t layer) const { return moe && moe->is_moe_layer(layer); }
  // The longest sequence a forward takes: max_position_embeddings, or with
  // dynamic RoPE (whose frequencies stretch past it) factor times that.
  int64_t max_sequence_length() const;
  // Raises an Error naming the first field that is out of range or
  // inconsistent (heads not dividing, odd head_dim, probabilities outside
  // [0, 1), a piece the family does not have, ...), moe's fields included.
  void validate() const;
  // "llama, hidden 64, 2 layers, 4 heads (2 kv) of 16, ffn 176, vocab 256"
  std::string describe() const;
  friend bool operator==(const LlamaConfig&, const LlamaConfig&) = default;
};

}  // namespace reprise::nn
