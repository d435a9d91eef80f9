#include "tests/support/tiny_train.h"

#include <map>

namespace reprise::testing {

nn::TrainConfig tiny_train_config(int64_t hidden, int64_t intermediate, int64_t steps,
                                  int64_t batch, int64_t seq) {
  nn::TrainConfig c;
  c.model.hidden_size = hidden;
  c.model.intermediate_size = intermediate;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 2;
  c.model.num_key_value_heads = 1;
  c.model.max_position_embeddings = 64;
  c.steps = steps;
  c.batch = batch;
  c.seq = seq;
  c.warmup = 2;
  c.lr = 1e-2;
  c.min_lr = 1e-3;
  return c;
}

std::shared_ptr<const nn::TextDataset> builtin_corpus(int64_t bytes) {
  static std::map<int64_t, std::shared_ptr<const nn::TextDataset>> made;
  auto& data = made[bytes];
  if (!data) {
    data =
        std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin(nn::kCorpusSeed, bytes));
  }
  return data;
}

}  // namespace reprise::testing
