#include "nn/kv_cache.h"

#include <algorithm>

#include "base/error.h"
#include "engine/backend.h"
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
    const int64_t window = config.mla ? 0 : config.attention_window(i);
    Shape ki = k, vi = v;
    if (window > 0) ki[2] = vi[2] = window_rows(window);
    if (config.is_linear_layer(i)) {
      // A gated DeltaNet layer's states: the convolution's last inputs and
      // the recurrence's (nn/gated_deltanet.h).
      const LinearAttentionConfig& a = *config.linear_attention;
      ki = {batch, a.conv_kernel - 1, a.conv_dim()};
      vi = {batch, a.value_heads, a.key_head_dim, a.value_head_dim};
    }
    layers_.push_back({.k = Tensor::empty(ki, DType::f32, device),
                       .v = Tensor::empty(vi, DType::f32, device),
                       .window = window,
                       .recurrent = config.is_linear_layer(i)});
  }
}

int64_t KvCache::window_rows(int64_t window) const {
  constexpr int64_t block = kAttentionKeyBlock;
  return std::min(capacity_, (window + block - 1) / block * block + block);
}

void KvCache::reserve(int64_t tokens) {
  REPRISE_CHECK(tokens >= 0 && length_ + tokens <= capacity_, "KvCache: ", length_, " + ", tokens,
                " positions do not fit its capacity of ", capacity_);
  for (Buffers& b : layers_) {
    if (b.window == 0) continue;
    // The first position a query at length_ or later sees, down to a block.
    const int64_t first =
        std::max<int64_t>(0, length_ - b.window + 1) / kAttentionKeyBlock * kAttentionKeyBlock;
    const int64_t need = length_ + tokens - first, rows = b.k.size(2);
    const int64_t want = std::max(need, window_rows(b.window));
    if (first == b.first && rows == want) continue;
    // Positions [first, length_) move to rows [0, length_ - first) of
    // buffers of `want` rows.
    auto moved = [&](const Tensor& old) {
      Shape shape = old.shape();
      shape[2] = want;
      Tensor fresh = Tensor::empty(shape, old.dtype(), old.device());
      const int64_t held = length_ - first, from = first - b.first;
      if (held > 0) fresh.slice(2, 0, held).copy_(old.slice(2, from, from + held));
      return fresh;
    };
    b.k = moved(b.k);
    b.v = moved(b.v);
    b.first = first;
  }
}

LayerKv KvCache::layer(size_t i) const {
  REPRISE_CHECK(i < layers_.size(), "KvCache: layer ", i, " of ", layers_.size());
  const Buffers& b = layers_[i];
  return {.k = b.k, .v = b.v, .start = length_, .first = b.first};
}

int64_t KvCache::rows(size_t i) const {
  REPRISE_CHECK(i < layers_.size(), "KvCache: layer ", i, " of ", layers_.size());
  const Buffers& b = layers_[i];
  if (b.recurrent) return 0;
  return b.k.size(b.k.dim() == 3 ? 1 : 2);  // MLA's (B, P, R), else (B, Hkv, P, D)
}

void KvCache::clear() {
  length_ = 0;
  for (Buffers& b : layers_) b.first = 0;
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
