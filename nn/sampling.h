#pragma once
// Choosing the next token from a model's logits: greedy, or a sample after
// temperature, top-k and top-p (nucleus) filtering, applied in that order
// as transformers' generate applies its logits warpers. The random numbers
// come from a counter-based Philox stream, so the same seed gives the same
// tokens on every machine and thread count.
//
// V = vocabulary.

#include <cstdint>
#include <string>

#include "engine/tensor.h"
#include "rng/generator.h"

namespace reprise::nn {

struct SamplingOptions {
  // 0: greedy, the largest logit (the lowest id among equal ones); else the
  // logits are divided by it before the filters and the softmax.
  double temperature = 0.0;
  // Keep only the k largest logits (ties by lower id; transformers keeps
  // every tie of the k-th); 0: no limit. top_k 1 is greedy.
  int64_t top_k = 0;
  // Keep the most likely tokens, in order, while the probability of those
  // kept before is below top_p (the smallest set whose mass reaches top_p;
  // at least one token); 1: no limit.
  double top_p = 1.0;

  // Raises an Error naming the field when it is out of range: temperature
  // >= 0, top_k >= 0, top_p in (0, 1].
  void validate() const;
  // "greedy" or "temperature 0.8, top-k 40, top-p 0.95"
  std::string describe() const;
};

class TokenSampler {
 public:
  // Draws from `stream` of a generator seeded with `seed` (a batch of
  // rollouts gives each sequence a stream of its own, nn/rollout.h).
  TokenSampler(const SamplingOptions& options, uint64_t seed, std::string stream = "sample");

  // logits: (V) f32 or f64, read on the host -> the chosen id in [0, V).
  // Each call reserves 4 words of the stream (greedy ones too, so call n
  // reads words 4n and 4n + 1 whatever came before): u =
  // rng::uniform_double(w0, w1) in (0, 1] picks the first kept token, in
  // order of decreasing logit (by id without a top-k or top-p filter),
  // whose cumulative weight reaches u times the kept total. Raises when a
  // logit is NaN.
  int64_t next(const Tensor& logits);

  const SamplingOptions& options() const { return options_; }
  const rng::Generator& generator() const { return gen_; }

 private:
  SamplingOptions options_;
  rng::Generator gen_;
  std::string stream_;
};

}  // namespace reprise::nn
