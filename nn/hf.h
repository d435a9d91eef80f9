#pragma once
// Hugging Face model folders for Llama and Mixtral: config.json
// (transformers' LlamaConfig or MixtralConfig) and model.safetensors (one
// file, Hugging Face parameter names; Mixtral's legacy on-disk layout
// block_sparse_moe.experts.{e}.w1/w2/w3, which transformers 5 converts on
// load and writes back on save), as save_pretrained(safe_serialization=True)
// writes them, so a model moves between PyTorch and reprise both ways.
//
// Loading validates everything before any weight is touched: the config
// (unsupported features such as rope_scaling, attention or MLP biases, or an
// activation other than silu are errors, not silently ignored), then the
// tensor list (each expected name present with the expected shape and a
// floating dtype; no unexpected names), then the data. F32, BF16 and F16
// weights are converted to f32. Errors name the folder, the file and the
// field or tensor.

#include <memory>
#include <string>

#include "engine/dtype.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/llama.h"

namespace reprise::nn {

// The config from a parsed config.json. Fields reprise does not model and
// that do not change the computation (architectures, bos_token_id,
// torch_dtype, use_cache, output_router_logits, ...) are ignored.
// model_type "mixtral" sets config.moe from num_local_experts,
// num_experts_per_tok, router_aux_loss_coef (MixtralConfig's defaults when
// absent) and the fields Mixtral lacks: router_z_loss_coef, scoring_func,
// norm_topk_prob, n_shared_experts, reprise_capacity_factor and
// reprise_router_dtype; a sliding_window other than null and a nonzero
// router_jitter_noise are errors. num_key_value_heads defaults to
// num_attention_heads and head_dim to hidden_size / num_attention_heads, as
// in transformers. `where` names the source in error messages.
LlamaConfig llama_config_from_json(const json::Value& config,
                                   const std::string& where = "config.json");
// config.json contents for `config`: every LlamaConfig field, with
// model_type "llama", architectures ["LlamaForCausalLM"] (for an MoE config
// "mixtral", ["MixtralForCausalLM"] and the MoE fields, the non-Mixtral ones
// only when not at their defaults), hidden_act "silu"
// and torch_dtype naming `dtype`, so transformers loads it. The residual
// dropout, which HF has no field for, is written as "reprise_dropout" when
// it is not 0 (and read back by llama_config_from_json).
json::Value llama_config_to_json(const LlamaConfig& config, DType dtype = DType::f32);

// Reads <dir>/config.json (at most 1 MiB).
LlamaConfig read_llama_config(const std::string& dir);

// The parameter tensors of a model of `config` and their elements in all,
// counted without building it (the model's parameters() would list the
// same). Raises an Error when the config is invalid or a count exceeds int64.
struct LlamaSize {
  int64_t tensors = 0;
  int64_t elements = 0;
};
LlamaSize llama_size(const LlamaConfig& config);

// Raises an Error naming the file and `what` (the config's source) unless
// a model of `config` has no more tensors than a safetensors file may hold
// and `file`'s tensors hold at least `bytes_per_weight` bytes per weight of
// it. Readers call it before they build the model, so that a config that
// claims a far larger model than its file (a vocab_size of 10^9, a million
// layers) is refused before the model's memory is allocated, not after.
void check_weights_fit(const LlamaConfig& config, const io::SafetensorsFile& file,
                       uint64_t bytes_per_weight, const std::string& what);

// Builds a model from <dir>/config.json and loads <dir>/model.safetensors
// into it, checking with check_weights_fit (2 bytes per weight: BF16 or F16
// at least) before the model is built.
std::unique_ptr<LlamaForCausalLM> load_llama(const std::string& dir);

// Loads the weights of the safetensors file at `path` into `model` (same
// config). Nothing is written to the model unless every tensor checks out.
void load_llama_weights(LlamaForCausalLM& model, const std::string& path);

// Writes <dir>/config.json and <dir>/model.safetensors (weights cast to
// `dtype`: f32, bf16 or f16), creating dir when absent. Both files are
// written atomically (temporary file and rename).
void save_llama(const LlamaForCausalLM& model, const std::string& dir, DType dtype = DType::f32);

}  // namespace reprise::nn
