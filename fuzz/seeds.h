#pragma once
// The runs and models behind the seed corpus (fuzz/make_seeds.cpp), which the
// train_state target needs too: a checkpoint only loads into a trainer on the
// same text.

#include <memory>

#include "nn/data.h"
#include "nn/train_state.h"

namespace reprise::fuzz {

// The smallest run a training checkpoint can hold: vocab 256 (the byte
// tokenizer's), hidden 2, one layer, one head, so a seed is a few KB and the
// fuzzer spends its mutations on the header rather than on weights.
inline nn::TrainConfig seed_train_config() {
  nn::TrainConfig c;
  c.model.hidden_size = 2;
  c.model.intermediate_size = 2;
  c.model.num_hidden_layers = 1;
  c.model.num_attention_heads = 1;
  c.model.num_key_value_heads = 1;
  c.model.max_position_embeddings = 8;
  c.model.tie_word_embeddings = true;
  c.steps = 4;
  c.batch = 1;
  c.seq = 4;
  c.warmup = 1;
  return c;
}

// 256 bytes of the built-in corpus: the text every seed checkpoint trained on.
inline std::shared_ptr<const nn::TextDataset> seed_dataset() {
  static const auto data =
      std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin(nn::kCorpusSeed, 256));
  return data;
}

}  // namespace reprise::fuzz
