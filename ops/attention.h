#pragma once
// Fused scaled dot-product attention (flash-attention style, CPU).
//
// B = batch, Hq = query heads, Hkv = key/value heads (grouped-query attention
// when Hkv < Hq: query head h reads kv head h / (Hq / Hkv)), T = queries,
// S = keys, D = query/key head size, Dv = value head size.
//
// The kernel walks (64 query x 64 key) tiles with an online softmax and
// never holds a T x S matrix: forward keeps only the per-row logsumexp, and
// backward recomputes the probabilities tile by tile from q, k and it. Tiles
// wholly outside the causal mask or the window are skipped, so a window W
// costs O(T W). Results do not depend on the thread count.

#include <cstdint>
#include <optional>
#include <string>

#include "engine/tensor.h"
#include "rng/reservation.h"

namespace reprise::rng {
class Generator;
}

namespace reprise::ops {

struct AttentionOptions {
  // Query i attends keys j <= i + causal_offset. With the offset 0 (torch's
  // is_causal) the mask is aligned top-left when T != S (row i sees keys
  // 0..i); with S - T it is aligned bottom-right: the queries are the last T
  // of S positions, as when a KV cache holds the first S - T. Without a
  // window every row sees at least key 0.
  bool causal = false;
  int64_t causal_offset = 0;  // >= 0; read only when causal
  // Sliding-window attention (Mistral's, transformers' sliding_window): with
  // window W > 0 (causal only) query i also needs j > i + causal_offset - W,
  // so it sees at most W keys, itself included, at any causal_offset (a KV
  // cache's queries keep the window of their positions). 0: no window. Every
  // query must see a key: T + causal_offset - W < S.
  int64_t window = 0;
  // Multiplies q.k before the softmax; 1/sqrt(D) when unset.
  std::optional<double> scale;
  // Probability of zeroing an attention weight (after the softmax; kept
  // weights are scaled by 1/(1-p)). Weight (b, h, i, j) is kept when word
  // ((b Hq + h) T + i) S + j of the op's reservation is a Bernoulli(1 - p)
  // success (rng::bernoulli); backward regenerates the same words. The op is
  // recorded as "sdpa_dropout" (random, replayable) instead of "sdpa".
  double dropout_p = 0.0;
  // Attention sinks (GPT-OSS): (Hq), a learned logit per head that joins
  // each row's softmax denominator as a key with no value, so the weights
  // of the real keys sum to less than 1. f32 or f64 as q (f32 for 16-bit
  // q), on q's device; differentiable. Undefined: none.
  Tensor sinks;
  // The words to use when dropout_p > 0: exactly these when set (count at
  // least sdpa_dropout_words(B, Hq, T, S)), else a new reservation from
  // `dropout_stream` of `generator` (rng::default_generator() when null).
  std::optional<rng::Reservation> dropout_rng;
  rng::Generator* generator = nullptr;
  std::string dropout_stream = "dropout";
};

// Random words one dropout call reads: B Hq T S.
uint64_t sdpa_dropout_words(int64_t B, int64_t Hq, int64_t T, int64_t S);

// softmax(scale * q k^T + mask) v, per batch and head.
// q: (B, Hq, T, D), k: (B, Hkv, S, D), v: (B, Hkv, S, Dv) -> (B, Hq, T, Dv).
// f32 or f64 (the backends' own kernels, the same bits on the CPU and on a
// GPU), or bf16 or f16 (on the CPU the f32 kernel on the exactly widened
// inputs, the output rounded once; on a GPU cuDNN's fused flash attention,
// with its own summation order and dropout mask bits: cuda/sdpa_cudnn.h).
// Any strides. Hq % Hkv == 0, S >= 1.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace reprise::ops
