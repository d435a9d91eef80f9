#pragma once
// config.json, as transformers writes and reads it for each family
// (FamilyInfo in nn/family.h), to and from LlamaConfig.
//
// Reading follows the family's config class: its field names (Qwen-MoE's
// num_experts, DeepSeek's n_routed_experts, ...), its defaults for absent
// fields, and the rules its __init__ applies (rope_scaling over
// rope_parameters, the rope_theta beside them, Qwen's use_sliding_window
// and max_window_layers into per-layer attention types, ...). What the
// reader finds falls in three kinds:
//   - fields that shape the model: read; a value reprise cannot compute
//     (a rope type, an activation other than silu, a bias where the
//     family has none, a DeepSeek topk_method other than noaux_tc, ...) is
//     an Error naming the file, the field and what is supported;
//   - fields that do not change the computation (token ids, use_cache,
//     torch_dtype, architectures, ...): skipped;
//   - fields neither the family's class nor reprise knows: reported in
//     ModelConfigFile::unknown, for the caller to warn about (transformers
//     ignores them too).
// Writing gives the family's fields under its names, with model_type and
// architectures, so transformers builds the same model; reading what was
// written gives the same LlamaConfig (the training checkpoints keep the
// model's config this way). reprise's own settings that HF has no field
// for are written as reprise_* fields (reprise_dropout,
// reprise_capacity_factor, reprise_router_dtype) or, for the router z-loss
// and reprise's Mixtral with sigmoid scoring or shared experts, under
// DeepSeek's names.

#include <string>
#include <vector>

#include "engine/dtype.h"
#include "io/json.h"
#include "nn/model_config.h"

namespace reprise::nn {

struct ModelConfigFile {
  LlamaConfig config;
  std::vector<std::string> unknown;  // top-level fields no one reads, in file order
};

// "<where>: fields reprise does not read (<transformers class> ignores them
// too): a, b", or "" when every field was read: what a program warns about.
std::string unknown_fields_warning(const ModelConfigFile& file, const std::string& where);

// The config of a parsed config.json. `where` names the source in errors.
ModelConfigFile read_model_config(const json::Value& config,
                                  const std::string& where = "config.json");
// read_model_config(config, where).config.
LlamaConfig llama_config_from_json(const json::Value& config,
                                   const std::string& where = "config.json");

// config.json contents for `config` in its family's fields, with
// torch_dtype (and transformers 5's dtype) naming `dtype`: f32, bf16 or f16.
json::Value llama_config_to_json(const LlamaConfig& config, DType dtype = DType::f32);

// Reads <dir>/config.json (at most 1 MiB).
ModelConfigFile read_model_config_file(const std::string& dir);
LlamaConfig read_llama_config(const std::string& dir);

}  // namespace reprise::nn
