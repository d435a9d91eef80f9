#include "nn/rollout.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "nn/kv_cache.h"
#include "nn/routing.h"
#include "nn/sampling.h"
#include "ops/indexing.h"
#include "ops/softmax.h"
#include "ops/views.h"

namespace reprise::nn {
namespace {

std::string sequence_name(size_t i) { return "generate: sequence " + std::to_string(i); }

void check_rollout(const LlamaConfig& c, const std::vector<std::vector<int64_t>>& prompts,
                   const RolloutOptions& o) {
  REPRISE_CHECK(o.max_new_tokens >= 1, "generate: max_new_tokens must be >= 1, got ",
                o.max_new_tokens);
  REPRISE_CHECK(o.choose_below >= 0 && o.choose_below <= c.vocab_size,
                "generate: choose_below must be in [0, vocab_size = ", c.vocab_size, "], got ",
                o.choose_below);
  REPRISE_CHECK(o.sequence_ids.empty() || o.sequence_ids.size() == prompts.size(),
                "generate: ", o.sequence_ids.size(), " sequence_ids for ", prompts.size(),
                " prompts (give one per prompt, or none)");
  for (int64_t id : o.stop_tokens) {
    REPRISE_CHECK(id >= 0 && id < c.vocab_size, "generate: stop token ", id,
                  " is outside the model's vocabulary [0, ", c.vocab_size, ")");
  }
  o.sampling.validate();
  for (size_t i = 0; i < prompts.size(); ++i) {
    check_prompt(c, prompts[i], sequence_name(i));
    const int64_t total = int64_t(prompts[i].size()) + o.max_new_tokens;
    REPRISE_CHECK(total <= c.max_sequence_length(), sequence_name(i), ": its prompt's ",
                  prompts[i].size(), " tokens and max_new_tokens = ", o.max_new_tokens, " make ",
                  total, ", past the model's longest sequence, ", c.max_sequence_length());
  }
}

// The sequences whose prompts have one length, decoded in lockstep through
// one KV cache; a sequence that stops leaves the cache (with
// record_routing, after one more forward has routed its last token).
class LengthBatch {
 public:
  LengthBatch(const LlamaForCausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
              const std::vector<size_t>& members, const RolloutOptions& o,
              std::vector<Rollout>& results)
      : model_(model),
        options_(o),
        results_(results),
        cache_(model.config(), int64_t(members.size()),
               int64_t(prompts[members[0]].size()) + o.max_new_tokens - (o.record_routing ? 0 : 1),
               model.model.embed_tokens.weight().device()) {
    std::vector<int64_t> ids;
    for (size_t i : members) {
      const uint64_t id = o.sequence_ids.empty() ? uint64_t(i) : o.sequence_ids[i];
      members_.push_back(
          {i, std::make_unique<TokenSampler>(o.sampling, o.seed, "sample." + std::to_string(id))});
      ids.insert(ids.end(), prompts[i].begin(), prompts[i].end());
    }
    const int64_t b = int64_t(members.size());
    next_ids_ = Tensor::from_vector(ids, {b, int64_t(ids.size()) / b});
  }

  // Runs every member to its stop; returns the forwards it ran.
  int64_t run() {
    int64_t forwards = 0;
    const Device device = model_.model.embed_tokens.weight().device();
    while (!members_.empty()) {
      // Only a recording run copies each layer's choices to the host.
      std::optional<RoutingCapture> capture;
      if (options_.record_routing) capture.emplace();
      const Tensor logits = model_.forward_cached(next_ids_.to(device), cache_, /*last_only=*/true);
      ++forwards;
      if (capture) {
        const std::vector<RoutingRecord> fed =
            capture->records(int64_t(members_.size()), next_ids_.size(1));
        for (size_t r = 0; r < members_.size(); ++r)
          results_[members_[r].index].routing.append(fed[r]);
      }
      choose(logits);  // (b, 1, V)
    }
    return forwards;
  }

 private:
  struct Member {
    size_t index;  // into the prompts
    std::unique_ptr<TokenSampler> sampler;
    bool finishing = false;  // stopped; this forward routed its last token
  };

  // Each running member's next token and its log-prob; drops the members
  // that are done. logits: (b, 1, V) on the model's device, where their
  // log_softmax runs as a training step's does.
  void choose(const Tensor& logits) {
    const int64_t V = model_.config().vocab_size;
    const int64_t limit = options_.choose_below > 0 ? options_.choose_below : V;
    const Tensor host = logits.to(Device::cpu());
    const Tensor logprobs = ops::log_softmax(logits, -1).to(Device::cpu());
    std::vector<int64_t> keep, next;
    for (size_t r = 0; r < members_.size(); ++r) {
      Member& m = members_[r];
      Rollout& out = results_[m.index];
      if (m.finishing) continue;
      const Tensor row = host.slice(0, int64_t(r), int64_t(r) + 1).view({V});
      const int64_t id = m.sampler->next(row.slice(0, 0, limit));
      out.tokens.push_back(id);
      out.logprobs.push_back(logprobs.data<float>()[int64_t(r) * V + id]);
      const bool stop_token = std::find(options_.stop_tokens.begin(), options_.stop_tokens.end(),
                                        id) != options_.stop_tokens.end();
      if (stop_token) out.stop = StopReason::eos;
      const bool done = stop_token || int64_t(out.tokens.size()) == options_.max_new_tokens;
      if (done && !options_.record_routing) continue;
      m.finishing = done;
      keep.push_back(int64_t(r));
      next.push_back(id);
    }
    if (keep.size() < members_.size()) keep_only(keep);
    if (!members_.empty()) next_ids_ = Tensor::from_vector(next, {int64_t(next.size()), 1});
  }

  void keep_only(const std::vector<int64_t>& keep) {
    std::vector<Member> members;
    for (int64_t r : keep) members.push_back(std::move(members_[size_t(r)]));
    members_ = std::move(members);
    if (!keep.empty()) cache_.keep_rows(keep);
  }

  const LlamaForCausalLM& model_;
  const RolloutOptions& options_;
  std::vector<Rollout>& results_;
  std::vector<Member> members_;  // still running or finishing
  KvCache cache_;
  Tensor next_ids_;  // (b, T) i64 on the host: what the next forward feeds
};

}  // namespace

std::vector<Rollout> generate(const LlamaForCausalLM& model,
                              const std::vector<std::vector<int64_t>>& prompts,
                              const RolloutOptions& options, RolloutTimes* times) {
  check_rollout(model.config(), prompts, options);
  const auto start = std::chrono::steady_clock::now();
  NoGradGuard no_grad;
  std::map<size_t, std::vector<size_t>> by_length;
  for (size_t i = 0; i < prompts.size(); ++i) by_length[prompts[i].size()].push_back(i);
  std::vector<Rollout> results(prompts.size());
  int64_t forwards = 0;
  for (auto& [length, members] : by_length) {
    forwards += LengthBatch(model, prompts, members, options, results).run();
  }
  if (times) {
    times->forwards = forwards;
    times->tokens = 0;
    for (const Rollout& r : results) times->tokens += int64_t(r.tokens.size());
    times->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return results;
}

Tensor rollout_ids(const std::vector<std::vector<int64_t>>& prompts,
                   const std::vector<Rollout>& rollouts, int64_t pad) {
  REPRISE_CHECK(!prompts.empty() && prompts.size() == rollouts.size(),
                "rollout_ids: ", prompts.size(), " prompts and ", rollouts.size(), " rollouts");
  size_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i)
    longest = std::max(longest, prompts[i].size() + rollouts[i].tokens.size());
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.insert(ids.end(), prompts[i].begin(), prompts[i].end());
    ids.insert(ids.end(), rollouts[i].tokens.begin(), rollouts[i].tokens.end());
    ids.resize(ids.size() + longest - prompts[i].size() - rollouts[i].tokens.size(), pad);
  }
  return Tensor::from_vector(ids, {int64_t(prompts.size()), int64_t(longest)});
}

Tensor next_token_logprobs(const Tensor& logits, const Tensor& ids) {
  REPRISE_CHECK(logits.dim() == 3 && ids.dim() == 2 && ids.dtype() == DType::i64 &&
                    logits.size(0) == ids.size(0) && logits.size(1) == ids.size(1) &&
                    ids.size(1) >= 2,
                "next_token_logprobs: expected logits (B, T, V) and ids (B, T) i64 with T >= 2, "
                "got ",
                logits.describe(), " and ", ids.describe());
  const int64_t T = ids.size(1);
  const Tensor logprobs = ops::log_softmax(widened(logits), -1);            // (B, T, V)
  const Tensor next = ops::unsqueeze(ids.slice(1, 1, T).contiguous(), -1);  // (B, T - 1, 1)
  return ops::squeeze(ops::gather(ops::slice(logprobs, 1, 0, T - 1), -1, next), -1);
}

}  // namespace reprise::nn
