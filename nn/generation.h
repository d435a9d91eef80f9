#pragma once
// Generating text with a LlamaForCausalLM (dense or MoE) and a KV cache:
// the prompt is fed once (prefill), then each chosen token alone (decode),
// each forward reading the earlier positions' keys and values from the
// cache (LlamaForCausalLM::forward_cached). Tokens are chosen by
// nn/sampling.h's TokenSampler. Nothing is recorded on the tape.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/llama.h"
#include "nn/sampling.h"

namespace reprise::nn {

struct GenerationOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  uint64_t seed = 0;           // of the sampler's Philox stream
  std::optional<int64_t> eos;  // stop once this token is chosen (it is kept)
  // Only ids below this are chosen (a tokenizer smaller than the model's
  // vocabulary has no text for the rest); 0: the model's vocab_size.
  int64_t choose_below = 0;
};

enum class StopReason {
  max_new_tokens,
  eos,
  context,  // the sequence reached the model's longest (max_sequence_length)
};
const char* stop_reason_name(StopReason r);  // "max new tokens", "EOS", "context full"

struct GenerationResult {
  std::vector<int64_t> tokens;  // the new tokens (EOS included when it stopped there)
  StopReason stop = StopReason::max_new_tokens;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward and the first choice
  int64_t decode_steps = 0;    // one-token forwards: tokens.size() - 1
  double decode_seconds = 0;   // their forwards and choices
};

// Raises an Error unless `prompt` has at least one and at most
// max_sequence_length() ids, each in [0, vocab_size) (naming the
// position and the id of the first that is not). `who` begins the message
// ("rollout: sequence 3").
void check_prompt(const LlamaConfig& config, const std::vector<int64_t>& prompt,
                  const std::string& who = "generate");

// Continues `prompt` (see check_prompt) with up to max_new_tokens tokens,
// batch 1, on the model's device. on_token(id) is called as each token is
// chosen, before the next forward, so output can stream.
GenerationResult generate(const LlamaForCausalLM& model, const std::vector<int64_t>& prompt,
                          const GenerationOptions& options,
                          const std::function<void(int64_t)>& on_token = {});

}  // namespace reprise::nn
