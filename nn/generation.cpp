#include "nn/generation.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "nn/kv_cache.h"

namespace reprise::nn {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::eos:
      return "EOS";
    case StopReason::context:
      return "context full";
    default:
      return "max new tokens";
  }
}

void check_prompt(const LlamaConfig& c, const std::vector<int64_t>& prompt,
                  const std::string& who) {
  const int64_t P = int64_t(prompt.size()), V = c.vocab_size;
  REPRISE_CHECK(P >= 1, who, ": the prompt is empty (no tokens to start from)");
  REPRISE_CHECK(P <= c.max_sequence_length(), who, ": the prompt's ", P,
                " tokens exceed the model's longest sequence, ", c.max_sequence_length(),
                " (max_position_embeddings = ", c.max_position_embeddings, ")");
  for (int64_t t = 0; t < P; ++t) {
    const int64_t id = prompt[size_t(t)];
    REPRISE_CHECK(id >= 0 && id < V, who, ": prompt token ", t, " is id ", id,
                  ", outside the model's vocabulary [0, ", V, ")");
  }
}

GenerationResult generate(const LlamaForCausalLM& model, const std::vector<int64_t>& prompt,
                          const GenerationOptions& options,
                          const std::function<void(int64_t)>& on_token) {
  const LlamaConfig& c = model.config();
  const int64_t P = int64_t(prompt.size()), V = c.vocab_size;
  REPRISE_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
                options.max_new_tokens);
  REPRISE_CHECK(options.choose_below >= 0 && options.choose_below <= V,
                "generate: choose_below must be in [0, vocab_size = ", V, "], got ",
                options.choose_below);
  check_prompt(c, prompt);
  TokenSampler sampler(options.sampling, options.seed);
  GenerationResult result;
  result.prompt_tokens = P;
  if (options.max_new_tokens == 0) return result;

  const Device device = model.model.embed_tokens.weight().device();
  // The prompt and every new token but the last are fed.
  KvCache cache(c, 1, std::min(c.max_sequence_length(), P + options.max_new_tokens - 1), device);
  const int64_t limit = options.choose_below > 0 ? options.choose_below : V;
  using Clock = std::chrono::steady_clock;
  auto choose = [&](const Tensor& logits) {  // (1, 1, V)
    const Tensor row = logits.view({V}).slice(0, 0, limit).to(Device::cpu());
    const int64_t id = sampler.next(row);
    result.tokens.push_back(id);
    if (on_token) on_token(id);
    return id;
  };

  auto start = Clock::now();
  Tensor ids = Tensor::from_vector(prompt, {1, P}).to(device);
  int64_t id = choose(model.forward_cached(ids, cache, /*last_only=*/true));
  result.prefill_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  start = Clock::now();
  while (true) {
    if (options.eos && id == *options.eos) {
      result.stop = StopReason::eos;
      break;
    }
    if (int64_t(result.tokens.size()) == options.max_new_tokens) break;
    if (cache.length() == c.max_sequence_length()) {
      result.stop = StopReason::context;
      break;
    }
    ids = Tensor::from_vector(std::vector<int64_t>{id}, {1, 1}).to(device);
    id = choose(model.forward_cached(ids, cache));
    ++result.decode_steps;
  }
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace reprise::nn
