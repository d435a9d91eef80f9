#pragma once
// The small training setups that the trainer tests share.

#include <cstdint>
#include <memory>

#include "engine/device.h"
#include "nn/data.h"
#include "nn/trainer.h"

namespace reprise::testing {

// A 2-layer Llama with 2 heads (1 kv head) and 64 positions, trained with 2
// warmup steps at lr 1e-2 decaying to 1e-3. Tests set the widths, the
// dropout, the steps and the batch shape they need.
nn::TrainConfig tiny_train_config(int64_t hidden, int64_t intermediate, int64_t steps,
                                  int64_t batch, int64_t seq);

// The GPU tests' model: vocabulary 96, hidden 64, intermediate 96, 2
// layers of 4 heads (2 kv heads), 128 positions, the given dropout (also
// attention's); with `moe`, Mixtral's layout with 8 experts, top-2.
nn::LlamaConfig gpu_test_model(bool moe, double dropout);
// The device the GPU tests run on.
inline constexpr Device kGpu = Device::cuda(0);

// The built-in corpus (nn::kCorpusSeed) of at least `bytes` bytes, made once
// per size for the test program.
std::shared_ptr<const nn::TextDataset> builtin_corpus(int64_t bytes);

}  // namespace reprise::testing
