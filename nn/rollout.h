#pragma once
// Rollouts: many prompts continued at once, as RL post-training samples
// them, with the log-probability of each chosen token under the model, so
// that a training step can compare its own with the sampler's.
//
// A sequence's arithmetic is its own. Prompts of one length share a KV
// cache and each forward (their rows are independent: every product is one
// FMA chain per element and attention rows do not mix), prompts of other
// lengths run in batches of their own, and a sequence that stops leaves its
// batch, so no padding enters anything. Each sequence samples from its own
// Philox stream, "sample.<id>" of the seed. So a sequence's tokens and
// log-probs are bit for bit the same alone or among any others, at any
// thread count and CPU capability, and equal the training forward's
// (next_token_logprobs of LlamaForCausalLM::forward over prompt + tokens),
// with grad and under every checkpoint policy.
//
// V = vocabulary.

#include <cstdint>
#include <vector>

#include "nn/generation.h"
#include "nn/llama.h"
#include "nn/routing.h"

namespace reprise::nn {

struct RolloutOptions {
  int64_t max_new_tokens = 64;  // per sequence
  SamplingOptions sampling;
  uint64_t seed = 0;
  // A sequence stops once it chooses one of these (the token is kept).
  std::vector<int64_t> stop_tokens;
  // Only ids below this are chosen; 0: the model's vocab_size. The
  // log-probs are over the whole vocabulary all the same.
  int64_t choose_below = 0;
  // Per prompt, the id of its sampling stream; empty: the prompt's index.
  // Two sequences with one id and one prompt choose the same tokens.
  std::vector<uint64_t> sequence_ids;
  // Also record each sequence's routing (MoE models): every position of
  // prompt + tokens, the last token's too (one more forward feeds it).
  bool record_routing = false;
};

struct Rollout {
  std::vector<int64_t> tokens;  // the new tokens (a stop token included)
  // logprobs[t] = log p(tokens[t] | prompt, tokens[:t]) under the model:
  // log_softmax of its logits (temperature 1, every id), whatever the
  // sampling options, as a training step computes it.
  std::vector<float> logprobs;
  StopReason stop = StopReason::max_new_tokens;  // max_new_tokens or eos (a stop token)
  // With record_routing: the experts of prompt.size() + tokens.size()
  // positions (nn/routing.h); no layers for a dense model.
  RoutingRecord routing;
};

struct RolloutTimes {
  int64_t forwards = 0;  // model forwards, prefills included
  int64_t tokens = 0;    // new tokens, over all sequences
  double seconds = 0;    // the whole call
};

// Continues every prompt with up to max_new_tokens tokens (a batch of
// rollouts; nn/generation.h's generate continues one prompt), on the model's
// device, without recording. Raises an Error naming the sequence for an
// empty prompt, an id outside the vocabulary, or a prompt that
// max_new_tokens would take past the model's longest sequence (nothing is
// cut short); and for bad options (a stop token outside the vocabulary,
// sequence_ids of another length than prompts).
std::vector<Rollout> generate(const LlamaForCausalLM& model,
                              const std::vector<std::vector<int64_t>>& prompts,
                              const RolloutOptions& options, RolloutTimes* times = nullptr);

// prompt + tokens of each rollout as one batch for the training forward:
// (B, L) i64 on the host, L the longest, right-padded with `pad` (causal:
// padding after a position never reaches it).
Tensor rollout_ids(const std::vector<std::vector<int64_t>>& prompts,
                   const std::vector<Rollout>& rollouts, int64_t pad = 0);

// The log-probability of each next token: logits (B, T, V), ids (B, T)
// i64 -> (B, T - 1) f32, [b, t] = log_softmax(logits[b, t])[ids[b, t + 1]].
// Recorded: its gradient reaches the logits. A rollout's logprobs are
// next_token_logprobs(forward(prompt + tokens).logits, prompt + tokens)
// at positions P - 1 .. P + n - 2, bit for bit.
Tensor next_token_logprobs(const Tensor& logits, const Tensor& ids);

}  // namespace reprise::nn
