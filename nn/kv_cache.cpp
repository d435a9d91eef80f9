#include "nn/kv_cache.h"

#include "base/error.h"
#include "ops/indexing.h"

namespace reprise::nn {

KvCache::KvCache(const LlamaConfig& config, int64_t batch, int64_t capacity, Device device)
    : batch_(batch), capacity_(capacity) {
  config.validate();
  REPRISE_CHECK(batch >= 1, "KvCache: batch must be >= 1, got ", batch);
  REPRISE_CHECK(capacity >= 1 && capacity <= config.max_sequence_length(),
                "KvCache: capacity must be in [1, ", config.max_sequence_length(),
                "] (the model's longest sequence; max_position_embeddings = ",
                config.max_position_embeddings, "), got ", capacity);
  // Grouped-query attention keeps keys and values; MLA its latent and the
  // rotated shared key (nn/llama.h's LayerKv).
  const Shape k =
      config.mla ? Shape{batch, capacity, config.mla->kv_lora_rank}
                 : Shape{batch, config.num_key_value_heads, capacity, config.resolved_head_dim()};
  const Shape v = config.mla ? Shape{batch, 1, capacity, config.mla->qk_rope_head_dim} : k;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layers_.push_back({Tensor::empty(k, DType::f32, device), Tensor::empty(v, DType::f32, device)});
  }
}

LayerKv KvCache::layer(size_t i) const {
  REPRISE_CHECK(i < layers_.size(), "KvCache: layer ", i, " of ", layers_.size());
  return {.k = layers_[i].k, .v = layers_[i].v, .start = length_};
}

void KvCache::advance(int64_t tokens) {
  REPRISE_CHECK(tokens >= 0 && length_ + tokens <= capacity_, "KvCache: ", length_, " + ", tokens,
                " positions do not fit its capacity of ", capacity_);
  length_ += tokens;
}

void KvCache::keep_rows(const std::vector<int64_t>& rows) {
  REPRISE_CHECK(!rows.empty(), "KvCache::keep_rows: no rows to keep of ", batch_);
  for (int64_t r : rows) {
    REPRISE_CHECK(r >= 0 && r < batch_, "KvCache::keep_rows: row ", r, " outside the batch of ",
                  batch_);
  }
  const Tensor index = Tensor::from_vector(rows, {int64_t(rows.size())}).to(layers_[0].k.device());
  for (Buffers& b : layers_) {
    b.k = ops::index_select(b.k, 0, index);
    b.v = ops::index_select(b.v, 0, index);
  }
  batch_ = int64_t(rows.size());
}

}  // namespace reprise::nn
