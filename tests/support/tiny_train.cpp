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

nn::LlamaConfig gpu_test_model(bool moe, double dropout) {
  nn::LlamaConfig c;
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 128;
  c.dropout = dropout;
  c.attention_dropout = dropout;
  if (moe) {
    c.family = nn::Family::mixtral;
    c.moe = nn::MoeConfig{};
    c.moe->num_local_experts = 8;
    c.moe->num_experts_per_tok = 2;
  }
  return c;
}

}  // namespace reprise::testing
