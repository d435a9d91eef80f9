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
// instead of Hq (dn + dr + dv); for a gated DeltaNet layer its states, a
// fixed size whatever the length (nn/gated_deltanet.h). Positions [0,
// length()) hold the tokens fed
// so far. A forward of T tokens calls reserve(T), writes positions
// [length(), length() + T) of every layer, then advance(T) counts them.
//
// A layer with a sliding window W keeps only the positions a query still
// sees: its buffers start at position first (LayerKv::first), a multiple
// of kAttentionKeyBlock at most W - 1 before the next query, and hold about
// W + kAttentionKeyBlock positions while decoding (more for a longer
// forward, such as the prompt's). Because the attention kernels tile keys
// from index 0 in blocks of kAttentionKeyBlock, a buffer that starts at a
// multiple of it tiles the window's keys as the forward over the whole
// sequence does: decoding stays bit for bit that forward (the rollout
// promise, nn/rollout.h).

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

  // Makes room in every layer for a forward of `tokens` more positions: a
  // sliding layer drops the positions no query from length() on sees, and
  // its buffers grow to hold the forward's or shrink back to the window's.
  // Raises when length() + tokens passes the capacity.
  void reserve(int64_t tokens);
  // Layer i's buffers (B, Hkv, P_i, D), with start = length() (where a
  // forward writes its positions) and first (the position of their row 0).
  LayerKv layer(size_t i) const;
  // The positions layer i's buffers have room for (P_i): the capacity, or
  // for a sliding layer what its window needs; 0 for a gated DeltaNet
  // layer, which keeps states instead (its convolution's last inputs in k
  // (B, W - 1, Cc), its recurrence's in v (B, Hv, dk, dv)).
  int64_t rows(size_t i) const;

  // Counts `tokens` more positions as held, once a forward wrote them in
  // every layer. Raises when that passes the capacity.
  void advance(int64_t tokens);
  // Keeps only the sequences `rows` (indices into the batch, in the order
  // given): the batch becomes rows.size(), each kept sequence's positions
  // as they were. A batch of rollouts drops the sequences that stopped.
  void keep_rows(const std::vector<int64_t>& rows);
  // Forgets every position (the buffers stay allocated).
  void clear();

 private:
  struct Buffers {
    Tensor k, v;
    int64_t window = 0;      // the layer's sliding window, 0: none
    int64_t first = 0;       // the position of row 0
    bool recurrent = false;  // a gated DeltaNet layer's states, no positions
  };
  // A sliding layer's rows while decoding: the window and a block.
  int64_t window_rows(int64_t window) const;
  std::vector<Buffers> layers_;
  int64_t batch_, capacity_;
  int64_t length_ = 0;
};

}  // namespace reprise::nn
