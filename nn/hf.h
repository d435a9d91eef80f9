#pragma once
// Hugging Face model folders, as save_pretrained writes them and the Hub
// holds them: config.json (nn/hf_config.h: every family of
// nn/model_config.h) and the weights, one model.safetensors or shards with
// model.safetensors.index.json (io/safetensors_folder.h), under the
// family's parameter names (Mixtral's legacy on-disk layout
// block_sparse_moe.experts.{e}.w1/w2/w3, which transformers 5 converts on
// load and writes back on save), so a model moves between PyTorch and
// reprise both ways.
//
// Loading validates everything before any weight is read: the config,
// then the tensor list (each expected name present exactly once with the
// expected shape and a floating dtype; nothing unexpected), then the data.
// F32, BF16 and F16 weights become the f32 parameters, read from the
// memory-mapped shards straight into them, so loading needs little more
// memory than the model itself. Errors name the folder, the file and the
// field or tensor.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "io/safetensors_folder.h"
#include "nn/hf_config.h"
#include "nn/llama.h"

namespace reprise::nn {

// The parameter tensors of a model of `config` and their elements in all,
// counted without building it (the model's named_state() would list the
// same). Raises an Error when the config is invalid or a count exceeds int64.
struct LlamaSize {
  int64_t tensors = 0;
  int64_t elements = 0;
};
LlamaSize llama_size(const LlamaConfig& config);

// Raises an Error naming the folder and `what` (the config's source)
// unless a model of `config` has no more tensors than the folder may hold
// and the folder's tensors hold at least `bytes_per_weight` bytes per
// weight of it. Readers call it before they build the model, so that a
// config that claims a far larger model than its files (a vocab_size of
// 10^9, a million layers) is refused before the model's memory is
// allocated, not after.
void check_weights_fit(const LlamaConfig& config, const io::SafetensorsFolder& folder,
                       uint64_t bytes_per_weight, const std::string& what);
// The same for one file (a training checkpoint).
void check_weights_fit(const LlamaConfig& config, const io::SafetensorsFile& file,
                       uint64_t bytes_per_weight, const std::string& what);

// A model read from a folder, and what its config.json held that nobody
// reads (for a warning; nn/hf_config.h).
struct LoadedModel {
  std::unique_ptr<LlamaForCausalLM> model;
  std::vector<std::string> unknown_config_fields;
};

// Builds the model <dir>/config.json describes and loads the folder's
// weights into it, checking with check_weights_fit (2 bytes per weight:
// BF16 or F16 at least) before the model is built.
LoadedModel load_model_folder(const std::string& dir);
std::unique_ptr<LlamaForCausalLM> load_model(const std::string& dir);

// Loads the weights of the folder `dir` into `model`, whose config must
// match them. Every name, shape and dtype is checked before any weight is
// read; the data is read into the parameters in place, so an error while
// reading (a file that changed under us) leaves them partly loaded.
void load_weights(LlamaForCausalLM& model, const std::string& dir);

// Shards as transformers' save_pretrained cuts them by default in
// transformers 4 ("5GB"): small models stay one file.
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

// Writes <dir>/config.json and the weights cast to `dtype` (f32, bf16 or
// f16), sharded at max_shard_bytes (io::write_safetensors_folder), creating
// dir when absent. Every file is written atomically.
void save_model(const LlamaForCausalLM& model, const std::string& dir, DType dtype = DType::f32,
                uint64_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace reprise::nn
