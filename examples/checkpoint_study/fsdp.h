#pragma once
// The study's rows for weights split over the processes (FSDP-style,
// --shard parameters): the small Llama trained under mpiexec with each
// checkpoint policy, and once with the weights replicated for reference.
// Per policy: the bytes each process's gathers brought per step, how many
// of them a checkpointed layer's replay gathered again (over the run
// without checkpointing), the time the step waited for them, and rank 0's
// peaks over the last step (whole weights, saved activations, all
// together), with whether the losses are the replicated run's bit for bit.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/data.h"
#include "nn/train_config.h"
#include "parallel/world.h"

namespace study {

using namespace reprise;

struct FsdpRow {
  std::string policy;      // "none", "full", ...; "replicated" for the reference
  int64_t gathered = 0;    // bytes the gathers brought in the last step, rank 0
  int64_t regathered = 0;  // of them, over the same step without checkpointing
  double waited_ms = 0;    // the last step's wait for its gathers, rank 0
  int64_t peak_parameter = 0, peak_saved = 0, peak_total = 0;  // bytes, rank 0, last step
  std::vector<float> losses;                                   // every step's
};

struct FsdpStudy {
  std::vector<FsdpRow> rows;
  int64_t layer_bytes = 0;  // the decoder layers' weights, in f32
};

// Trains `config` for its steps on `world`'s processes: replicated first,
// then with the weights split under each of `policies` (the first one's
// gathers are what the others' re-gathers are counted against).
FsdpStudy fsdp_study(const nn::TrainConfig& config,
                     const std::shared_ptr<const nn::TextDataset>& data, parallel::World& world,
                     const std::vector<std::string>& policies);

// The rows as a Markdown table, with a note of what freeing the weights
// between replay and backward would cost for `ranks` processes and
// `layer_bytes` of decoder-layer weights.
std::string fsdp_markdown(const std::vector<FsdpRow>& rows, int ranks, int64_t layer_bytes);

}  // namespace study
