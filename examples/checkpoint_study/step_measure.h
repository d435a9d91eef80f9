#pragma once
// One training step (forward, loss, backward; no update) of a model under a
// checkpointing setup, measured and compared with the same step without
// checkpointing: same weights, same batch, same generator state.
//
// B = batch, T = sequence length, V = vocabulary.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/verifier.h"
#include "engine/device.h"
#include "nn/checkpointing.h"
#include "nn/data.h"
#include "nn/llama.h"
#include "rng/generator.h"

namespace study {

using namespace reprise;

// A model's parameters and buffers by name (Module::named_state()).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Copies into each tensor of model's state the one of `weights` of its
// name; raises when one is missing.
void copy_state(nn::Module& model, const NamedTensors& weights);

struct StepMeasurement {
  std::vector<std::vector<float>> grads;  // per parameter, in parameters() order
  float loss = 0;
  int64_t peak_saved_activation = 0;           // bytes, peak during the step
  int64_t peak_total = 0;                      // bytes of everything MemoryStats counts
  double seconds = 0;                          // process CPU time, the least over the timed repeats
  autograd::RecomputeStats stats;              // counters of one step
  std::vector<autograd::Mismatch> mismatches;  // verifier reports of one step
  std::vector<nn::MoeLayerStats> moe;          // the forward's routing, per MoE layer
};

// CPU time of this process (all threads), in seconds. Steps on the CPU are
// timed in CPU time, not wall time: on a shared machine it counts the work
// done, not the time spent waiting for a core.
double process_cpu_seconds();

// The clock steps on `device` are timed by, in seconds: process CPU time on
// the CPU, wall time on a GPU (the host only launches and waits there).
double step_clock_seconds(Device device);

// How far a step's gradients are from the reference's.
struct GradientError {
  bool bitwise_equal = true;
  double max_abs = 0;  // max |g - g_ref| over every parameter element
  double rel_l2 = 0;   // ||g - g_ref|| / ||g_ref|| over all parameters together
};
GradientError compare(const StepMeasurement& step, const StepMeasurement& reference);

class StepBench {
 public:
  // Initialises the model from stream "init" of a generator seeded with
  // `seed` (then, given `weights`, copies each named tensor of its state
  // from them), samples one (batch, seq) batch from `data` and remembers
  // the generator state after it: every measured step starts from there.
  // The model and the batch are then moved to `device`. The forward runs
  // under nn::Autocast(dtype): f32, or bf16 projections (nn/autocast.h).
  StepBench(const nn::LlamaConfig& config, const nn::TextDataset& data, int64_t batch, int64_t seq,
            uint64_t seed, Device device = Device::cpu(), DType dtype = DType::f32,
            const NamedTensors* weights = nullptr);

  // Runs `warmup` unmeasured steps (a budget planner records in the first),
  // then `repeats` >= 1 measured ones, all from the same state; the
  // gradients, peaks, counters and mismatches are those of the first
  // measured step, the time the least of all of them.
  StepMeasurement run(const nn::CheckpointConfig& checkpointing, int warmup, int repeats);

  nn::LlamaForCausalLM& model() { return model_; }

 private:
  StepMeasurement step(nn::LayerCheckpointing& layers, bool read_grads);

  Device device_;
  DType dtype_;
  std::shared_ptr<rng::Generator> gen_;
  nn::LlamaForCausalLM model_;
  nn::Batch batch_;  // input_ids, labels: (B, T) i64
  rng::GeneratorState start_;
};

}  // namespace study
