#pragma once
// What a model's attention layers computed for the positions seen so far,
// so that generation feeds each new token alone instead of the whole
// sequence again (LlamaForCausalLM::forward_cached).
//
// B = batch, Hkv = num_key_value_heads, P = capacity (positions), D =
// head_dim. Each layer has two buffers on the model's device: keys (after
// RoPE) and values (B, Hkv, P, D) for grouped-query attention; for
// DeepSeek's MLA the compressed latent (B, P, kv_lora_rank) and the rotated
// shared key (B, 1, P, qk_rope_head_dim), R + dr numbers per position
// instead of Hq (dn + dr + dv). Positions [0, length()) hold the tokens fed
// so far. A forward of T tokens writes positions [length(), length() + T)
// of every layer, then advance(T) counts them.

#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "nn/llama.h"

namespace reprise::nn {

class KvCache {
 public:
  // Room for `capacity` positions (at most the config's
  // max_sequence_length()) of `batch` sequences, f32 on `device`.
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
  // Keeps only the sequences `rows` (indices into the batch, in the order
  // given): the batch becomes rows.size(), each kept sequence's positions
  // as they were. A batch of rollouts drops the sequences that stopped.
  void keep_rows(const std::vector<int64_t>& rows);
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
