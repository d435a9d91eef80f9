#pragma once
// The keys and values a Llama's attention layers computed for the positions
// seen so far, so that generation feeds each new token alone instead of the
// whole sequence again (LlamaForCausalLM::forward_cached).
//
// B = batch, Hkv = num_key_value_heads, P = capacity (positions), D =
// head_dim. Each layer has two buffers (B, Hkv, P, D) on the model's device;
// positions [0, length()) hold the keys (after RoPE) and values of the
// tokens fed so far. A forward of T tokens writes positions [length(),
// length() + T) of every layer, then advance(T) counts them.

#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "nn/llama.h"

namespace reprise::nn {

class KvCache {
 public:
  // Room for `capacity` positions (at most the config's
  // max_position_embeddings) of `batch` sequences, f32 on `device`.
  KvCache(const LlamaConfig& config, int64_t batch, int64_t capacity,
          Device device = Device::cpu());

  int64_t length() const { return length_; }  // positions held
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  size_t num_layers() const { return layers_.size(); }

  // Layer i's buffers (B, Hkv, P, D), with start = length(): where a forward
  // writes its positions.
  LayerKv layer(size_t i) const;

  // Counts `tokens` more positions as held, once a forward wrote them in
  // every layer. Raises when that passes the capacity.
  void advance(int64_t tokens);
  // Forgets every position (the buffers stay allocated).
  void clear() { length_ = 0; }

 private:
  struct Buffers {
    Tensor k, v;
  };
  std::vector<Buffers> layers_;
  int64_t batch_, capacity_;
  int64_t length_ = 0;
};

}  // namespace reprise::nn
