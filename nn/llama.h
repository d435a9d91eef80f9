#pragma once
// A decoder-only transformer for causal language modelling, built from the
// pieces its LlamaConfig names (nn/model_config.h), with transformers'
// module tree and parameter names for the config's family, so a model
// folder written by PyTorch loads as is (nn/hf.h). Llama's names:
//
//   model.embed_tokens.weight                      (V, C)
//   model.layers.{i}.input_layernorm.weight        (C)
//   model.layers.{i}.self_attn.q_proj.weight       (Hq D, C)   .bias (Hq D) with qkv_bias
//   model.layers.{i}.self_attn.k_proj.weight       (Hkv D, C)  .bias with qkv_bias
//   model.layers.{i}.self_attn.v_proj.weight       (Hkv D, C)  .bias with qkv_bias
//   model.layers.{i}.self_attn.o_proj.weight       (C, Hq D)   .bias (C) with o_bias
//   model.layers.{i}.self_attn.q_norm.weight       (D) per head (Qwen3), (Hq D) (OLMoE)
//   model.layers.{i}.self_attn.k_norm.weight       (D) per head (Qwen3), (Hkv D) (OLMoE)
//   model.layers.{i}.post_attention_layernorm.weight (C)
//   model.layers.{i}.mlp.gate_proj.weight          (F, C)      .bias with mlp_bias
//   model.layers.{i}.mlp.up_proj.weight            (F, C)
//   model.layers.{i}.mlp.down_proj.weight          (C, F)
//   model.layers.{i}.<moe block>.*                 instead of mlp.* on an MoE layer
//                                                  (nn/moe.h; Mixtral's block_sparse_moe)
//   model.norm.weight                              (C)
//   lm_head.weight                                 (V, C), absent when tied
//
// DeepSeek-V3's attention (MlaAttention) holds q_a_proj, q_a_layernorm,
// q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj and
// o_proj instead.
//
// B = batch, T = sequence, C = hidden_size, F = intermediate_size,
// V = vocab_size, Hq = num_attention_heads, Hkv = num_key_value_heads,
// D = head_dim.
//
// A decoder layer is
//   h   = x + dropout(attention(n1))
//   out = h + dropout(mlp(n2))
// with n1 = input_layernorm(x), n2 = post_attention_layernorm(h) (with
// norms after, OLMo 2's: h = x + dropout(post_attention_layernorm(
// attention(x))), out = h + dropout(post_feedforward_layernorm(mlp(h)));
// with both, Gemma 3's: post_attention_layernorm(attention(n1)) and
// post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))), causal
// attention (grouped-query with RoPE at positions 0..T-1, optional
// sliding window, q/k norm and biases; or MLA) with attention_dropout on
// its weights, and a gated MLP (SwiGLU, or GELU-tanh) or a mixture of
// experts. Gemma's RMSNorms scale by 1 + weight, its embeddings are
// multiplied by sqrt(C), and its logits may be soft-capped. With both
// dropouts 0 (Hugging Face's default) it is the family's decoder layer in
// transformers. Dropout masks come from the stream "dropout" of the
// model's dropout generator, so a checkpointed layer replays them exactly.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/layers.h"
#include "nn/model_config.h"
#include "nn/module.h"
#include "nn/moe.h"
#include "rng/generator.h"

namespace reprise::nn {

class KvCache;

// One decoder layer's share of a KV cache in one forward (nn/kv_cache.h):
// buffers whose rows hold positions first, first + 1, ..., of which
// [first, start) are earlier tokens (first > 0 only where a sliding window
// let the cache drop older ones). The forward puts its T tokens at
// positions start .. start + T - 1, writes what it keeps of them there and
// attends over [first, start + T). Grouped-query attention
// keeps keys (after RoPE) and values, (B, Hkv, P, D) each; MLA keeps its
// compressed latent after kv_a_layernorm in k (B, P, R) and the rotated
// shared key in v (B, 1, P, dr).
struct LayerKv {
  Tensor k, v;
  int64_t start = 0;
  int64_t first = 0;
};

// A decoder layer's attention: x (B, T, C) -> (B, T, C) at positions
// 0 .. T - 1, or with kv at kv->start .. through a KV cache (no dropout,
// and grad mode must be off: the cache is written in place). Attention
// dropout is drawn from `gen` when training and attention_dropout > 0.
class Attention : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& x, rng::Generator& gen,
                         const LayerKv* kv = nullptr) const = 0;
};

// The RoPE frequencies by which a forward over positions below `length`
// rotates with `rope` (nn/rope.h), as an ops::rotary input on `device`.
struct RopeTable {
  Tensor inv_freq;  // (rope_dim / 2) f32
  double scaling = 1;
};
RopeTable rope_table(const LlamaConfig& config, const LayerRope& rope, int64_t length,
                     Device device);

// q/k/v/o projections (with the config's biases), optional q/k RMSNorm,
// RoPE and causal grouped-query attention, within decoder layer `layer`'s
// sliding window when it has one (Llama, Mistral, Qwen2/3, OLMoE, Mixtral).
class LlamaAttention final : public Attention {
 public:
  LlamaAttention(std::string name, const LlamaConfig& config, int64_t layer);
  Tensor forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv = nullptr) const override;

  Linear q_proj, k_proj, v_proj, o_proj;
  std::unique_ptr<RMSNorm> q_norm, k_norm;  // nullptr without q/k norm
  // GPT-OSS's sink logits, one per head: the parameter "sinks" (Hq), or
  // undefined without attention sinks.
  const Tensor& sinks() const { return sinks_; }
  // The sinks normal(0, std^2) from `stream` of `gen`, as HF initialises them.
  void reset_sinks(double std, rng::Generator& gen, std::string_view stream);

 private:
  Tensor sinks_;
  LlamaConfig config_;
  int64_t heads_, kv_heads_, head_dim_, window_;
  std::optional<LayerRope> rope_;  // unset on a NoPE layer
};

// DeepSeek-V3's multi-head latent attention (MlaConfig in
// nn/model_config.h): H = num_attention_heads heads of dn + dr query/key
// dims and dv value dims; keys and values come from one latent of R dims
// per position, so a KV cache holds R + dr numbers per position.
class MlaAttention final : public Attention {
 public:
  MlaAttention(std::string name, const LlamaConfig& config);
  Tensor forward(const Tensor& x, rng::Generator& gen, const LayerKv* kv = nullptr) const override;

  // With q_lora_rank: q_a_proj (r, C), q_a_layernorm (r), q_b_proj
  // (H (dn + dr), r); without: q_proj (H (dn + dr), C).
  std::unique_ptr<Linear> q_a_proj, q_b_proj, q_proj;
  std::unique_ptr<RMSNorm> q_a_layernorm;
  Linear kv_a_proj_with_mqa;  // (R + dr, C)
  RMSNorm kv_a_layernorm;     // (R)
  Linear kv_b_proj;           // (H (dn + dv), R)
  Linear o_proj;              // (C, H dv)

 private:
  LlamaConfig config_;
  double scale_;  // the softmax scale: (dn + dr)^-1/2, times YaRN's mscale^2
};

// One decoder layer: attention and a SwiGLU MLP or a mixture of experts.
class LlamaDecoderLayer : public Module {
 public:
  // Decoder layer `index` of a model of `config`. `experts`: where an MoE
  // layer's experts run (nullptr: all here).
  LlamaDecoderLayer(const LlamaConfig& config, int64_t index,
                    std::shared_ptr<const ExpertDispatch> experts = nullptr);
  // x: (B, T, C) -> (B, T, C). Does not open Scope(name()) itself: the
  // caller runs it under Scope("model.layers.<i>") or inside a checkpoint
  // region of that name, which is one scope either way. An MoE layer puts
  // its router loss terms in *moe_terms. With kv, inference through a KV
  // cache (LlamaAttention::forward): no dropout, and an MoE layer routes
  // without a capacity limit.
  Tensor forward(const Tensor& x, rng::Generator& gen, MoeRouterTerms* moe_terms,
                 const LayerKv* kv = nullptr) const;

  // The norms (LlamaConfig::norm_placement): before attention and the MLP,
  // input_layernorm and post_attention_layernorm (Llama); after each,
  // post_attention_layernorm and post_feedforward_layernorm (OLMo 2); or
  // all four, pre_feedforward_layernorm before the MLP (Gemma 3). The ones
  // a placement lacks are nullptr.
  std::unique_ptr<RMSNorm> input_layernorm;
  // LlamaAttention, MlaAttention, or on a linear layer GatedDeltaNet
  // (named "linear_attn", as HF's).
  std::unique_ptr<Attention> self_attn;
  RMSNorm post_attention_layernorm;
  std::unique_ptr<RMSNorm> pre_feedforward_layernorm;
  std::unique_ptr<RMSNorm> post_feedforward_layernorm;
  // Exactly one is set: mlp for a dense layer, moe for an MoE layer (named
  // as the family names it: "block_sparse_moe" or "mlp").
  std::unique_ptr<GatedMLP> mlp;
  std::unique_ptr<SparseMoeBlock> moe;

 private:
  NormPlacement placement_;
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
  // With `init` null, the parameters stay zero and the norms one: a model
  // whose weights are about to be loaded draws nothing.
  LlamaForCausalLM(const LlamaConfig& config, rng::Generator* init,
                   std::shared_ptr<const ExpertDispatch> experts = nullptr);

  const LlamaConfig& config() const { return config_; }

  // Runs decoder layer `i` (the call `layer`) under `scope`
  // ("model.layers.<i>"): plainly (the default) or inside a checkpoint
  // region (nn/checkpointing.h's LayerCheckpointing::runner()).
  using LayerRunner = std::function<Tensor(size_t i, const std::string& scope,
                                           const std::function<Tensor()>& layer)>;

  // input_ids: (B, T) i64 in [0, V), T <= config().max_sequence_length()
  // -> logits (B, T, V) f32 (bf16 under a bf16 Autocast, as torch.autocast
  // leaves them: loss() reads them so), and the MoE layers' router terms.
  CausalLMOutput forward(const Tensor& input_ids, const LayerRunner& run_layer = {}) const;

  // Inference through a KV cache (nn/kv_cache.h), as generation runs it:
  // input_ids (B, T) i64 are the tokens at positions cache.length() ..
  // cache.length() + T - 1. Their keys and values are added to `cache`
  // (which then holds T more positions) and attention reads the earlier
  // ones from it, so a prompt is fed once and each new token alone.
  // -> logits (B, T, V) f32 (widened under Autocast), or (B, 1, V) of the
  // last position with last_only. Runs without grad (nothing is recorded) and without dropout
  // whatever the training mode. MoE layers route every token to its top-k
  // experts with no capacity limit: a limit depends on how many tokens
  // share a forward, so a token would route differently in a prompt than
  // alone. Each row's arithmetic does not depend on the others' (products
  // are one FMA chain per element, attention rows are independent), so the
  // logits are bit for bit those of forward() over the whole sequence at
  // these positions (for an MoE model, one without a capacity limit; with
  // dynamic RoPE past max_position_embeddings each position is rotated by
  // the frequencies of its own length, as in HF's generation).
  Tensor forward_cached(const Tensor& input_ids, KvCache& cache, bool last_only = false) const;

  // Hugging Face's causal-LM loss: the mean cross-entropy of logits[:, t]
  // against labels[:, t + 1] over every pair whose label is not -100 (the
  // labels are shifted here, as HF does; the last position has no target).
  // logits: (B, T, V) f32, f64 or bf16, labels: (B, T) i64 -> () scalar
  // (f32 for bf16 logits).
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

  // The generator dropout draws from (rng::default_generator() until set),
  // shared with whoever set it.
  void set_dropout_generator(std::shared_ptr<rng::Generator> gen);
  const std::shared_ptr<rng::Generator>& dropout_generator() const { return dropout_gen_; }

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
  std::shared_ptr<rng::Generator> dropout_gen_ = rng::default_generator_handle();
};

}  // namespace reprise::nn
