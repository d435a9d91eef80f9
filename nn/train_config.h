#pragma once
// What a training run of the example Llama computes and how: its model,
// schedule, batch, optimizer settings, seed, precision and checkpoint
// policy (TrainConfig), checked before a run starts and stored as JSON in
// its training checkpoints (nn/train_state.h). nn::Trainer (nn/trainer.h)
// runs one.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/dtype.h"
#include "io/json.h"
#include "nn/checkpointing.h"
#include "nn/model_config.h"
#include "nn/train_settings.h"

namespace reprise::nn {

// The example's default model: a small byte-level Llama that learns the
// built-in corpus's grammar within a couple of minutes on two cores.
LlamaConfig default_train_model();

// The dtype a run computes its projections or attention in
// (TrainConfig::dtype, attention_dtype), by name: "f32" or "bf16"; nullopt
// for any other name (f16 would need loss scaling to keep small gradients
// from flushing to zero). The trainers' flags and the checkpoint reader
// parse with it.
std::optional<DType> run_dtype_named(std::string_view name);

struct TrainConfig {
  // What is computed: a resumed run must agree on all of these.
  LlamaConfig model = default_train_model();
  // The run's settings (nn/train_settings.h): schedule, batch, AdamW,
  // seed, and the precision of the projections and of attention
  // (nn/autocast.h; the forward runs under Autocast(dtype,
  // attention_dtype), with the f32 parameters as master weights).
#define REPRISE_TRAIN_SETTING_MEMBER(type, name, default_value, ...) type name = default_value;
  REPRISE_TRAIN_SETTINGS(REPRISE_TRAIN_SETTING_MEMBER)
#undef REPRISE_TRAIN_SETTING_MEMBER

  // How it is computed: a resumed run may change it, since recompute
  // replays the recorded forward exactly (except with rng_replay fresh or
  // noise, which exist to show what goes wrong without exact replay).
  CheckpointConfig checkpointing;

  // Raises an Error naming the first field out of range.
  void validate() const;
  json::Value to_json() const;
  // Raises an Error naming `where` and the field when one is missing or has
  // the wrong type.
  static TrainConfig from_json(const json::Value& v, const std::string& where);
  // The fields that must agree on resume and do not (the model and each
  // setting kept on resume): "lr 0.003 vs 0.01", ...
  std::vector<std::string> run_differences(const TrainConfig& other) const;
};

// Readers of the JSON that TrainConfig::from_json and the training
// checkpoint reader (nn/train_state.cpp) share. Each raises an Error
// naming `where` and the field when it is missing or of another kind.
namespace train_json {
const json::Value& field(const json::Value& v, const char* key, const std::string& where);
int64_t int_field(const json::Value& v, const char* key, const std::string& where);
const std::string& string_field(const json::Value& v, const char* key, const std::string& where);
// `s` as an unsigned 64-bit number in `base` (10 or 16), digits only;
// raises an Error naming `what` for anything else.
uint64_t parse_u64(const std::string& s, int base, const std::string& what);
}  // namespace train_json

}  // namespace reprise::nn
