#pragma once
// Llama for causal language modelling, with Hugging Face's module tree and
// parameter names (transformers' LlamaForCausalLM), so a model folder
// written by PyTorch loads as is (nn/hf.h):
//
//   model.embed_tokens.weight                      (V, C)
//   model.layers.{i}.input_layernorm.weight        (C)
//   model.layers.{i}.self_attn.q_proj.weight       (Hq D, C)
//   model.layers.{i}.self_attn.k_proj.weight       (Hkv D, C)
//   model.layers.{i}.self_attn.v_proj.weight       (Hkv D, C)
//   model.layers.{i}.self_attn.o_proj.weight       (C, Hq D)
//   model.layers.{i}.post_attention_layernorm.weight (C)
//   model.layers.{i}.mlp.gate_proj.weight          (F, C)
//   model.layers.{i}.mlp.up_proj.weight            (F, C)
//   model.layers.{i}.mlp.down_proj.weight          (C, F)
//   model.layers.{i}.block_sparse_moe.*            instead of mlp.* when config.moe is
//                                                  set (Mixtral's names, nn/moe.h)
//   model.norm.weight                              (C)
//   lm_head.weight                                 (V, C), absent when tied
//
// B = batch, T = sequence, C = hidden_size, F = intermediate_size,
// V = vocab_size, Hq = num_attention_heads, Hkv = num_key_value_heads,
// D = head_dim.
//
// A decoder layer is
//   h   = x + dropout(o_proj(sdpa(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))))
//   out = h + dropout(down_proj(silu(gate_proj(n2)) * up_proj(n2)))
// with n1 = input_layernorm(x), n2 = post_attention_layernorm(h), causal
// grouped-query attention with attention_dropout on its weights, and RoPE at
// positions 0..T-1. With both dropouts 0 (Hugging Face's default) it is HF's
// LlamaDecoderLayer; with config.moe set the MLP is a SparseMoeBlock and
// the model is HF's MixtralForCausalLM (without a sliding window). Dropout masks come from the
// stream "dropout" of the model's dropout generator, so a checkpointed layer replays them exactly.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/layers.h"
#include "nn/module.h"
#include "nn/moe.h"
#include "rng/generator.h"

namespace reprise::nn {

class KvCache;

// Hugging Face LlamaConfig's fields (same names, same defaults) plus the
// residual dropout that HF's Llama does not have.
struct LlamaConfig {
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
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  double attention_dropout = 0.0;  // on the attention weights (HF's attention_dropout)
  double dropout = 0.0;            // on each residual branch before the add (reprise's)
  // Set: every decoder layer's MLP is a mixture of experts of
  // intermediate_size each (HF's MixtralConfig); unset: dense (Llama).
  std::optional<MoeConfig> moe;

  // head_dim, or hidden_size / num_attention_heads when head_dim is 0.
  int64_t resolved_head_dim() const;
  // Raises an Error naming the first field that is out of range or
  // inconsistent (heads not dividing, odd head_dim, probabilities outside
  // [0, 1), ...), moe's fields included.
  void validate() const;
  // "hidden 64, 2 layers, 4 heads (2 kv) of 16, ffn 176, vocab 256"
  std::string describe() const;
  friend bool operator==(const LlamaConfig&, const LlamaConfig&) = default;
};

// One decoder layer's share of a KV cache in one forward (nn/kv_cache.h):
// key and value buffers (B, Hkv, P, D) whose positions [0, start) hold
// earlier tokens. The forward puts its T tokens at positions start ..
// start + T - 1, writes their keys and values there and attends over
// [0, start + T).
struct LayerKv {
  Tensor k, v;
  int64_t start = 0;
};

// q/k/v/o projections and causal grouped-query attention with RoPE.
class LlamaAttention : public Module {
 public:
  LlamaAttention(std::string name, const LlamaConfig& config);
  // x: (B, T, C) -> (B, T, C), at positions 0 .. T - 1. Attention dropout
  // is drawn from `gen` when training and attention_dropout > 0.
  // With kv: at positions kv->start .. , through the cache (see LayerKv);
  // no dropout, and grad mode must be off (the cache is written in place).
  Tensor forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv = nullptr) const;

  Linear q_proj, k_proj, v_proj, o_proj;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double rope_theta_, dropout_p_;
};

// SwiGLU feed-forward: down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaDecoderLayer : public Module {
 public:
  // `experts`: where an MoE layer's experts run (nullptr: all here).
  LlamaDecoderLayer(std::string name, const LlamaConfig& config,
                    std::shared_ptr<const ExpertDispatch> experts = nullptr);
  // x: (B, T, C) -> (B, T, C). Does not open Scope(name()) itself: the
  // caller runs it under Scope("model.layers.<i>") or inside a checkpoint
  // region of that name, which is one scope either way. An MoE layer puts
  // its router loss terms in *moe_terms. With kv, inference through a KV
  // cache (LlamaAttention::forward): no dropout, and an MoE layer routes
  // without a capacity limit.
  Tensor forward(const Tensor& x, rng::Generator& gen, MoeRouterTerms* moe_terms,
                 const LayerKv* kv = nullptr) const;

  RMSNorm input_layernorm;
  LlamaAttention self_attn;
  RMSNorm post_attention_layernorm;
  // Exactly one is set: mlp for a dense config, block_sparse_moe with config.moe.
  std::unique_ptr<SwiGluMLP> mlp;
  std::unique_ptr<SparseMoeBlock> block_sparse_moe;

 private:
  double dropout_p_;
};

// The decoder stack without the head ("model" in HF's names).
class LlamaModel : public Module {
 public:
  LlamaModel(std::string name, const LlamaConfig& config,
             std::shared_ptr<const ExpertDispatch> experts = nullptr);

  Embedding embed_tokens;
  ModuleList<LlamaDecoderLayer> layers;
  RMSNorm norm;
};

// The router losses of a forward over all MoE layers, as scalars that
// backpropagate into the routers: aux is HF's load_balancing_loss_func over
// the layers' router logits concatenated (E * sum_e tokens_fraction_e *
// mean_prob_e, the fraction counting the top-k assignments), z the mean over
// layers and tokens of logsumexp(logits)^2.
struct RouterLosses {
  Tensor aux;  // ()
  Tensor z;    // ()
};

// What a forward gives (HF's MoeCausalLMOutput carries aux_loss the same way).
struct CausalLMOutput {
  Tensor logits;                    // (B, T, V)
  std::vector<MoeRouterTerms> moe;  // per MoE layer, in layer order; empty for a dense model

  // The router losses of `moe` (undefined tensors for a dense model).
  RouterLosses router_losses() const;
  // Per MoE layer: tokens per expert, dropped, aux and z (read on the host).
  std::vector<MoeLayerStats> moe_stats() const;
};

class LlamaForCausalLM : public Module {
 public:
  // Builds the model and initialises it as HF does (reset_parameters) from
  // the stream "init" of `init`. Raises when config.validate() does. With
  // `experts` (expert parallelism) each MoE layer holds this process's
  // experts only, initialised as they are in the whole model.
  explicit LlamaForCausalLM(const LlamaConfig& config,
                            rng::Generator& init = rng::default_generator(),
                            std::shared_ptr<const ExpertDispatch> experts = nullptr);

  const LlamaConfig& config() const { return config_; }

  // Runs decoder layer `i` (the call `layer`) under `scope`
  // ("model.layers.<i>"): plainly (the default) or inside a checkpoint
  // region (nn/checkpointing.h's LayerCheckpointing::runner()).
  using LayerRunner = std::function<Tensor(size_t i, const std::string& scope,
                                           const std::function<Tensor()>& layer)>;

  // input_ids: (B, T) i64 in [0, V), T <= max_position_embeddings
  // -> logits (B, T, V) f32, and the MoE layers' router terms.
  CausalLMOutput forward(const Tensor& input_ids, const LayerRunner& run_layer = {}) const;

  // Inference through a KV cache (nn/kv_cache.h), as generation runs it:
  // input_ids (B, T) i64 are the tokens at positions cache.length() ..
  // cache.length() + T - 1. Their keys and values are added to `cache`
  // (which then holds T more positions) and attention reads the earlier
  // ones from it, so a prompt is fed once and each new token alone.
  // -> logits (B, T, V) f32, or (B, 1, V) of the last position with
  // last_only. Runs without grad (nothing is recorded) and without dropout
  // whatever the training mode. MoE layers route every token to its top-k
  // experts with no capacity limit: a limit depends on how many tokens
  // share a forward, so a token would route differently in a prompt than
  // alone. Each row's arithmetic does not depend on the others' (products
  // are one FMA chain per element, attention rows are independent), so the
  // logits are bit for bit those of forward() over the whole sequence at
  // these positions (for an MoE model, one without a capacity limit).
  Tensor forward_cached(const Tensor& input_ids, KvCache& cache, bool last_only = false) const;

  // Hugging Face's causal-LM loss: the mean cross-entropy of logits[:, t]
  // against labels[:, t + 1] over every pair whose label is not -100 (the
  // labels are shifted here, as HF does; the last position has no target).
  // logits: (B, T, V), labels: (B, T) i64 -> () scalar.
  static Tensor loss(const Tensor& logits, const Tensor& labels);

  // The training loss: loss(out.logits, labels), plus for an MoE model in
  // training mode router_aux_loss_coef * aux + router_z_loss_coef * z of
  // out's router losses. HF's MixtralForCausalLM adds the aux term only with
  // output_router_logits; here it is always added in training (set the
  // coefficient to 0 to leave it out), never in eval.
  Tensor causal_lm_loss(const CausalLMOutput& out, const Tensor& labels) const;

  // normal(0, initializer_range^2) for every Linear and Embedding weight,
  // ones for the norms, in parameters() order, from `stream` of `gen`
  // (another process's experts take the words they take in one process).
  void reset_parameters(rng::Generator& gen, std::string_view stream = "init");

  // The generator dropout draws from (rng::default_generator() until set).
  // It must outlive the model's use of it.
  void set_dropout_generator(rng::Generator& gen) { dropout_gen_ = &gen; }
  rng::Generator& dropout_generator() const { return *dropout_gen_; }

  // Matmul flops of one training step (forward + backward, 3x the forward)
  // per token at sequence length T: 6 per weight element of every
  // projection and the head, plus the attention products (causal, so half
  // of 4 T D per head, times 3). The embedding lookup counts nothing; an
  // MoE layer's expert weights count k / E (a token runs through k experts).
  double training_flops_per_token(int64_t T) const;

  LlamaModel model;
  // The untied output head; lm_head() is nullptr when tied.
  Linear* lm_head() { return lm_head_.get(); }
  const Linear* lm_head() const { return lm_head_.get(); }

 private:
  // input_ids (B, T) -> (B, T, C); the embedding checks the ids' range.
  Tensor embed(const Tensor& input_ids) const;
  // The final norm and the head: (B, T, C) -> logits (B, T, V).
  Tensor head(const Tensor& h) const;

  LlamaConfig config_;
  std::unique_ptr<Linear> lm_head_;
  rng::Generator* dropout_gen_;
};

}  // namespace reprise::nn
