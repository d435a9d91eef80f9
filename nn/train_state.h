#pragma once
// The state of a training run of the example Llama, how it advances by one
// step, and training checkpoints that resume it bit for bit.
//
// A run is a TrainConfig, a dataset and a Trainer. The Trainer holds
// everything that changes from step to step: the model's parameters, the
// AdamW state, one rng::Generator (seeded with config.seed) whose streams
// are "init" (parameter initialisation), "data" (batch sampling: its offset
// is the data position) and "dropout" (every dropout mask), and the step
// count. Nothing else feeds a step: the learning rate is a function of the
// step, kernels do not depend on the thread count, and checkpointed layers
// replay their recorded random numbers. So saving that state after step k
// and loading it into a fresh Trainer gives steps k+1, k+2, ... with the same
// losses, bit for bit, as the run that never stopped.
//
// A training checkpoint is one file, <dir>/train_state.safetensors:
//   tensors   "<HF parameter name>"            f32, the model
//             "optimizer.<AdamW state name>"   f32 moments, i64 step counts
//   metadata  "reprise.train_state": a JSON object with the format version,
//             step, tokens seen, the TrainConfig, the generator state (hex
//             of GeneratorState::to_bytes), the dataset's name, size,
//             tokenizer (its path) and fingerprint, and every tensor's
//             autograd::hash_values (hex);
//             "reprise.train_state.fnv1a64": the 64-bit FNV-1a hash of that
//             JSON text (hex), so every byte of the file is covered by a
//             check.
// It is written atomically (temporary file, fsync, rename, fsync of the
// directory) and loading checks every part before it changes anything.
//
// B = batch, T = sequence length, V = vocabulary (256 bytes, or a
// tokenizer's ids).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/json.h"
#include "nn/checkpointing.h"
#include "nn/data.h"
#include "nn/llama.h"
#include "nn/optim.h"

namespace reprise::nn {

// The example's default model: a small byte-level Llama that learns the
// built-in corpus's grammar within a couple of minutes on two cores.
LlamaConfig default_train_model();

struct TrainConfig {
  // What is computed: a resumed run must agree on all of these.
  LlamaConfig model = default_train_model();
  int64_t steps = 250;  // the schedule's length
  int64_t batch = 16;
  int64_t seq = 128;
  double lr = 3e-3;  // peak, after warmup
  double min_lr = 3e-4;
  int64_t warmup = 20;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;  // global L2 norm; 0: no clipping
  uint64_t seed = 1;

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
  // The fields that must agree on resume and do not: "lr 0.003 vs 0.01", ...
  std::vector<std::string> run_differences(const TrainConfig& other) const;
};

class Trainer {
 public:
  // Builds the model (initialised from stream "init" of the run's
  // generator), AdamW (weight decay on the projection and head weights
  // only) and the cosine schedule, and sets the checkpoint policy.
  Trainer(TrainConfig config, std::shared_ptr<const TextDataset> data);

  struct StepStats {
    int64_t step = 0;  // the step just taken, from 1
    float loss = 0;    // of the batch, before the update (causal_lm_loss: with an MoE, the router
                       // losses included)
    double lr = 0;
    double grad_norm = 0;  // before clipping
    int64_t tokens = 0;    // B T
    double seconds = 0;
    int64_t peak_saved_activation = 0;  // bytes, during the step
    int64_t peak_total = 0;             // bytes, during the step
    std::vector<MoeRouterTerms> moe;    // the step's router terms, per MoE layer
  };
  // Called after backward, before clipping and the optimizer update, with
  // the batch, the forward's output (logits (B, T, V), MoE terms) and the
  // loss.
  using AfterBackward =
      std::function<void(const Batch& batch, const CausalLMOutput& out, const Tensor& loss)>;

  // One optimizer step on the next training batch.
  StepStats step(const AfterBackward& after_backward = {});

  // Mean loss over held-out batches 0 .. batches - 1 (clamped to what the
  // held-out part holds), in eval mode without grad: no dropout, and no
  // random numbers drawn, so evaluating does not change the run.
  double evaluate(int64_t batches);

  // Applies the "how it is computed" part of `config` (its checkpointing);
  // the rest must equal the run's.
  void set_compute_options(const TrainConfig& config);
  // The checkpointing the model's layers run under.
  const LayerCheckpointing& checkpointing() const { return *checkpointing_; }

  const TrainConfig& config() const { return config_; }
  const TextDataset& data() const { return *data_; }
  LlamaForCausalLM& model() { return *model_; }
  const LlamaForCausalLM& model() const { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  const AdamW& optimizer() const { return *optimizer_; }
  rng::Generator& generator() { return generator_; }
  const rng::Generator& generator() const { return generator_; }
  int64_t steps_done() const { return step_; }
  bool finished() const { return step_ >= config_.steps; }
  int64_t tokens_seen() const { return step_ * config_.batch * config_.seq; }

 private:
  friend void load_train_state(Trainer& trainer, const std::string& dir);

  TrainConfig config_;
  std::shared_ptr<const TextDataset> data_;
  rng::Generator generator_;
  std::unique_ptr<LlamaForCausalLM> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<LayerCheckpointing> checkpointing_;
  CosineSchedule schedule_;
  int64_t step_ = 0;
};

// <dir>/train_state.safetensors
std::string train_state_path(const std::string& dir);

// Writes the trainer's state to <dir> (created when absent), atomically.
void save_train_state(const Trainer& trainer, const std::string& dir);

// What <dir> holds, to build the Trainer that loads it.
struct TrainStateInfo {
  TrainConfig config;
  int64_t step = 0;
  std::string data_name;       // TextDataset::name()
  std::string data_path;       // TextDataset::path(): empty for the built-in corpus
  std::string tokenizer_path;  // DataTokenizer::path: empty for bytes
};
TrainStateInfo read_train_state_info(const std::string& dir);

// The model of the checkpoint in <dir> (its config and parameters, each
// checked against its recorded hash), for inference; the optimizer state
// and the generator are not read.
std::unique_ptr<LlamaForCausalLM> load_train_state_model(const std::string& dir);

// Restores a checkpoint into `trainer`, which must have the same run config
// (TrainConfig::run_differences empty) and a dataset with the same
// fingerprint. Checks the file (format, version, JSON, the tensor list,
// shapes, dtypes, every tensor's hash, the generator bytes) before changing
// anything; raises an Error naming the file and what is wrong.
void load_train_state(Trainer& trainer, const std::string& dir);

// The --dump-grads file: input_ids and labels (B, T) i64, "loss" () f32,
// "logits" (B, T, V) f32 and every parameter's gradient under its Hugging
// Face name, written atomically. Call it after backward (a Trainer's
// AfterBackward hook), before any update.
void write_gradient_dump(const std::string& path, const LlamaForCausalLM& model, const Batch& batch,
                         const Tensor& logits, const Tensor& loss);

}  // namespace reprise::nn
