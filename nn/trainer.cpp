#include "nn/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "autograd/backward.h"
#include "autograd/tracer.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "engine/memory_stats.h"
#include "io/safetensors.h"
#include "nn/autocast.h"
#include "nn/device.h"
#include "nn/hf_config.h"

namespace reprise::nn {

KernelSet training_kernels(const LlamaConfig& model) {
  KernelSet needed = all_kernels();
  if (!model.moe) {
    needed.reset(size_t(Kernel::moe_route));
    needed.reset(size_t(Kernel::moe_route_backward));
  }
  return needed;
}

Trainer::Trainer(TrainConfig config, std::shared_ptr<const TextDataset> data,
                 std::shared_ptr<TrainGroup> group, Device device)
    : config_(std::move(config)),
      data_(std::move(data)),
      group_(std::move(group)),
      device_(device),
      generator_(std::make_shared<rng::Generator>(config_.seed)) {
  config_.validate();
  backend(device_).require(training_kernels(config_.model), "training");
  REPRISE_CHECK(data_ != nullptr, "Trainer: no dataset");
  REPRISE_CHECK(data_->train_size() >= config_.seq, "Trainer: ", data_->name(),
                " has a training part of ", data_->train_size(),
                " tokens, fewer than seq = ", config_.seq);
  const DataTokenizer& tok = data_->tokenizer();
  REPRISE_CHECK(tok.vocab_size() <= config_.model.vocab_size, "Trainer: the model's vocab_size ",
                config_.model.vocab_size, " is smaller than the ", tok.vocab_size(),
                " ids of the data's tokenizer (", tok.describe(),
                tok.path.empty() ? "" : ", " + tok.path, ")");
  const std::shared_ptr<const ExpertDispatch> experts =
      group_ ? group_->expert_dispatch() : nullptr;
  model_ = std::make_unique<LlamaForCausalLM>(config_.model, *generator_, experts);
  model_->set_dropout_generator(generator_);
  // Initialised on the CPU from the same streams, so a model starts from the
  // same values on every device.
  to_device(*model_, device_);
  AdamWOptions adam;
  adam.lr = config_.lr;
  adam.beta1 = config_.beta1;
  adam.beta2 = config_.beta2;
  adam.weight_decay = config_.weight_decay;
  // Expert parallelism: this process's experts are its own; the rest is
  // replicated, and its gradients are reduced over the processes.
  const std::vector<NamedParameter> params = model_->parameters();
  std::vector<NamedParameter> replicated;
  std::vector<size_t> units;
  for (const NamedParameter& p : params) {
    if (experts && is_expert_parameter(p.name)) continue;
    replicated.push_back(p);
    units.push_back(unit_of(p.name));
  }
  if (group_) group_->attach(replicated, units);
  std::optional<OptimizerShard> shard;
  if (const ShardLayout* layout = group_ ? group_->shard_layout() : nullptr) {
    TrainGroup* g = group_.get();
    const auto all_gather = [g](const Tensor& block) { return g->all_gather(block); };
    shard = OptimizerShard{.layout = *layout, .rank = g->rank(), .all_gather = all_gather};
    if (g->shard_mode() == ShardMode::parameters) {
      parameter_shards_ = std::make_unique<ParameterShards>(
          *layout, g->rank(),
          [g](std::vector<Tensor> blocks) { return g->all_gather_async(std::move(blocks)); });
      shard->param_blocks = parameter_shards_->blocks();
    }
  }
  optimizer_ = std::make_unique<AdamW>(params, adam, std::move(shard));
  schedule_ = CosineSchedule{config_.lr, config_.min_lr, config_.warmup, config_.steps};
  set_compute_options(config_);
}

size_t Trainer::unit_of(const std::string& name) const {
  const std::string prefix = model_->model.name() + "." + model_->model.layers.name() + ".";
  if (name.compare(0, prefix.size(), prefix) == 0) {
    const size_t end = name.find('.', prefix.size());
    return size_t(std::stoul(name.substr(prefix.size(), end - prefix.size())));
  }
  return rest_unit();
}

size_t Trainer::rest_unit() const { return model_->model.layers.size(); }

void Trainer::set_compute_options(const TrainConfig& c) {
  const std::vector<std::string> diffs = config_.run_differences(c);
  REPRISE_CHECK(diffs.empty(), "Trainer::set_compute_options: the run's config differs in ",
                diffs.front());
  CheckpointConfig checkpointing = c.checkpointing;
  // Noise exists to be measured: with it, the verifier reports instead of raising.
  if (checkpointing.recompute_noise_ulps > 0) {
    checkpointing.on_mismatch = autograd::OnMismatch::report;
  }
  checkpointing_ =
      std::make_unique<LayerCheckpointing>(checkpointing, generator_, moe_scopes_of(config_.model));
  config_.checkpointing = c.checkpointing;
}

OnNonFinite parse_on_nonfinite(const std::string& name) {
  if (name == "stop") return OnNonFinite::stop;
  if (name == "skip") return OnNonFinite::skip;
  REPRISE_FAIL("on non-finite: expected stop or skip, got '", name, "'");
}

const char* on_nonfinite_name(OnNonFinite on) { return on == OnNonFinite::stop ? "stop" : "skip"; }

Trainer::StepStats Trainer::step(const AfterBackward& after_backward) {
  const auto start = std::chrono::steady_clock::now();
  memory_stats::reset_peaks();
  if (parameter_shards_) parameter_shards_->reset_counts();
  StepStats s;
  s.lr = schedule_.lr(step_);
  optimizer_->set_lr(s.lr);
  const int64_t A = config_.grad_accum, B = config_.batch, R = ranks();
  // Every micro-batch starts from the step's generator state and reserves
  // the whole global batch's words, of which it reads its samples' slice.
  const rng::GeneratorState at_start = generator_->state();
  // Each micro-batch's mean loss weighs 1 / (R A) in the step's gradient.
  const Tensor seed = R * A > 1 ? Tensor::full({}, 1.0 / double(R * A)) : Tensor();
  std::vector<double> losses;
  std::vector<std::vector<MoeRouterTerms>> terms;
  for (int64_t m = 0; m < A; ++m) {
    if (m > 0) generator_->set_state(at_start);
    const rng::SampleSliceGuard slice(*generator_, {.first = uint64_t((rank() * A + m) * B),
                                                    .count = uint64_t(B),
                                                    .total = uint64_t(global_batch())});
    const Batch batch = on_device(data_->sample(B, config_.seq, *generator_));
    std::optional<autograd::TraceSpan> forward_span(std::in_place, "forward", "", "forward");
    const CausalLMOutput out = [&] {
      const Autocast precision(config_.dtype, config_.attention_dtype);
      if (!parameter_shards_) return model_->forward(batch.input_ids, checkpointing_->runner());
      parameter_shards_->gather(rest_unit());
      return model_->forward(batch.input_ids, parameter_shards_->runner(checkpointing_->runner()));
    }();
    // Cross-entropy, plus the router losses of an MoE model.
    const Tensor loss = model_->causal_lm_loss(out, batch.labels);
    forward_span.reset();
    const bool last = m + 1 == A;
    {
      // With the parameters split, each unit is given back once its
      // gradients are in (and any left at the end).
      const std::unique_ptr<autograd::GradReadyHook> releasing =
          parameter_shards_ ? parameter_shards_->release_when_done() : nullptr;
      if (last && group_) group_->begin_backward();
      {
        autograd::TraceSpan backward_span("backward", "", "backward");
        autograd::backward(loss, seed);
      }
      if (last && group_) group_->end_backward();
    }
    if (parameter_shards_) parameter_shards_->release_all();
    if (last && after_backward) after_backward(batch, out, loss);
    losses.push_back(double(loss.item<float>()));
    terms.push_back(out.moe);
  }
  // The mean over the global batch's micro-batches, in their order.
  const std::vector<double> all = group_ ? group_->all_gather(losses) : losses;
  double total = 0;
  for (const double l : all) total += l;
  s.loss = float(total / double(all.size()));
  s.moe = combine_router_terms(terms);
  {
    autograd::TraceSpan optimizer_span("optimizer", "", "optimizer");
    // With the optimizer split, this process's blocks of the summed gradients.
    std::optional<ShardGradients> blocks;
    if (optimizer_->shard()) blocks = group_->take_gradients();
    s.grad_norm = clip_gradients(blocks ? &*blocks : nullptr);
    // The loss and the norm are every process's (gathered, reduced), so all
    // processes decide alike.
    s.skipped = !std::isfinite(s.loss) || !std::isfinite(s.grad_norm);
    REPRISE_CHECK(!s.skipped || on_nonfinite_ == OnNonFinite::skip, "step ", step_ + 1, ": the ",
                  std::isfinite(s.loss) ? "gradient norm" : "loss", " is not finite (loss ", s.loss,
                  ", gradient norm ", s.grad_norm,
                  "); the update was not applied. A learning rate too high? Anomaly detection "
                  "names the first op that made a NaN or an infinity");
    if (!s.skipped) {
      if (blocks) {
        optimizer_->step(*blocks);
        s.gather_seconds = optimizer_->last_gather_seconds();
      } else {
        optimizer_->step();
      }
      balance_experts(s.moe);
    }
    optimizer_->zero_grad();
  }
  if (parameter_shards_) {
    s.gather_seconds = parameter_shards_->gather_seconds();
    s.gathered_bytes = parameter_shards_->gathered_bytes();
  }
  ++step_;
  if (!device_.is_cpu()) backend(device_).synchronize();  // the step's time includes its kernels
  const MemorySnapshot m = memory_stats::snapshot();
  s.step = step_;
  s.tokens = global_batch() * config_.seq;
  s.peak_saved_activation = m[MemoryKind::saved_activation].peak;
  s.peak_total = m.total.peak;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

std::vector<MoeRouterTerms> Trainer::combine_router_terms(
    const std::vector<std::vector<MoeRouterTerms>>& micro_batches) {
  const std::vector<MoeRouterTerms>& first = micro_batches.front();
  if (first.empty() || (micro_batches.size() == 1 && ranks() == 1)) return first;
  // Per layer: prob_sum (E), z_sum, routed (E), kept (E), rows, tokens
  // within each margin (W); summed in f64 (exact for the counts),
  // micro-batch by micro-batch, then by rank.
  const size_t E = size_t(first[0].routed.numel()), W = kMarginUlps.size();
  const size_t per_layer = 3 * E + 2 + W;
  std::vector<double> sums(first.size() * per_layer, 0.0);
  for (const std::vector<MoeRouterTerms>& layers : micro_batches) {
    for (size_t l = 0; l < layers.size(); ++l) {
      double* out = &sums[l * per_layer];
      const std::vector<double> probs = layers[l].prob_sum.to_vector<double>();
      const std::vector<int64_t> routed = layers[l].routed.to_vector<int64_t>();
      const std::vector<int64_t> kept = layers[l].kept.to_vector<int64_t>();
      for (size_t e = 0; e < E; ++e) {
        out[e] += probs[e];
        out[E + e] += double(routed[e]);
        out[2 * E + e] += double(kept[e]);
      }
      out[3 * E] += layers[l].z_sum.item<double>();
      out[3 * E + 1] += double(layers[l].rows);
      const auto within = layers[l].count_within_ulps();
      for (size_t i = 0; i < W; ++i) out[3 * E + 2 + i] += double(within[i]);
    }
  }
  if (group_) {
    const std::vector<double> all = group_->all_gather(sums);
    std::fill(sums.begin(), sums.end(), 0.0);
    for (size_t i = 0; i < all.size(); ++i) sums[i % sums.size()] += all[i];
  }
  std::vector<MoeRouterTerms> out;
  for (size_t l = 0; l < first.size(); ++l) {
    const double* v = &sums[l * per_layer];
    std::vector<float> probs(v, v + E);
    std::vector<int64_t> routed(E), kept(E), within(W);
    for (size_t e = 0; e < E; ++e) {
      routed[e] = int64_t(v[E + e]);
      kept[e] = int64_t(v[2 * E + e]);
    }
    for (size_t i = 0; i < W; ++i) within[i] = int64_t(v[3 * E + 2 + i]);
    MoeRouterTerms t;
    t.layer = first[l].layer;
    t.prob_sum = Tensor::from_vector(probs, {int64_t(E)});
    t.z_sum = Tensor::scalar(v[3 * E]);
    t.routed = Tensor::from_vector(routed, {int64_t(E)});
    t.kept = Tensor::from_vector(kept, {int64_t(E)});
    t.rows = int64_t(v[3 * E + 1]);
    t.within_ulps = Tensor::from_vector(within, {int64_t(W)});
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<float> balance_score_bias(const std::vector<float>& bias,
                                      const std::vector<int64_t>& routed, double coeff) {
  const size_t E = routed.size();
  REPRISE_CHECK(E > 0 && bias.size() == E, "balance_score_bias: ", bias.size(), " biases for ", E,
                " experts' counts");
  REPRISE_CHECK(std::isfinite(coeff) && coeff >= 0,
                "balance_score_bias: coeff must be finite and >= 0, got ", coeff);
  int64_t total = 0;
  for (const int64_t n : routed) {
    REPRISE_CHECK(n >= 0, "balance_score_bias: a negative count ", n);
    total += n;
  }
  // sign(mean - routed_e) = sign(total - E routed_e), exact in integers.
  std::vector<int> sign(E);
  int64_t net = 0;  // experts below the mean minus those above
  for (size_t e = 0; e < E; ++e) {
    const int64_t d = total - int64_t(E) * routed[e];
    sign[e] = d > 0 ? 1 : d < 0 ? -1 : 0;
    net += sign[e];
  }
  const float c = float(coeff);
  const float mean = float(double(c) * double(net) / double(E));
  std::vector<float> out(E);
  for (size_t e = 0; e < E; ++e) out[e] = bias[e] + (float(sign[e]) * c - mean);
  return out;
}

void Trainer::balance_experts(const std::vector<MoeRouterTerms>& terms) {
  if (!config_.model.moe || config_.model.moe->load_balance_coeff == 0) return;
  const double coeff = config_.model.moe->load_balance_coeff;
  // Every process holds every router (expert parallelism splits only the
  // experts) and the same summed counts, so each updates its copy to the
  // same bits. E values per layer: host arithmetic, then one copy to the
  // buffer's device (no kernel is needed on a GPU).
  NoGradGuard no_grad;
  size_t j = 0;
  for (size_t i = 0; i < model_->model.layers.size(); ++i) {
    const SparseMoeBlock* block = model_->model.layers[i].moe.get();
    if (block == nullptr) continue;
    REPRISE_CHECK(j < terms.size(), "Trainer: the step's router terms cover ", terms.size(),
                  " MoE layers, fewer than the model's");
    Tensor bias = block->gate.score_bias();
    const std::vector<float> next =
        balance_score_bias(bias.to_vector<float>(), terms[j++].routed.to_vector<int64_t>(), coeff);
    bias.copy_(Tensor::from_vector(next, bias.shape()));
  }
}

double Trainer::clip_gradients(ShardGradients* blocks) {
  const double max_norm =
      config_.grad_clip > 0 ? config_.grad_clip : std::numeric_limits<double>::infinity();
  const std::vector<NamedParameter>& params = optimizer_->params();
  // Replicas hold the same gradients after the reduction.
  if (!blocks && (!group_ || !group_->expert_dispatch())) return clip_grad_norm(params, max_norm);
  // Per parameter, the sums of squares of its chunks.
  std::vector<std::vector<double>> sums;
  if (blocks) {
    // A shared parameter's chunks are spread over the processes, each with
    // zeros for the others': added over processes, each chunk's sum is its
    // one nonzero term, exactly.
    sums = optimizer_->square_sums(*blocks);
    std::vector<double> spread;
    for (size_t i = 0; i < params.size(); ++i) {
      if (optimizer_->shared(i)) spread.insert(spread.end(), sums[i].begin(), sums[i].end());
    }
    const std::vector<double> all = group_->all_gather(spread);  // (R, n)
    size_t at = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!optimizer_->shared(i)) continue;
      for (double& x : sums[i]) {
        x = 0;
        for (int q = 0; q < ranks(); ++q) x += all[size_t(q) * spread.size() + at];
        ++at;
      }
    }
  } else {
    for (const NamedParameter& p : params) sums.push_back(grad_square_sums(p));
  }
  // Added in the order one process adds them: with experts split over
  // processes, every process's in one list.
  double total = 0;
  if (group_->expert_dispatch()) {
    std::vector<std::pair<std::string, Tensor>> named;
    for (size_t i = 0; i < params.size(); ++i) {
      named.emplace_back(params[i].name, Tensor::from_vector(sums[i], {int64_t(sums[i].size())}));
    }
    for (const auto& [name, t] : group_->gather_named(named, true)) {
      for (const double x : t.to_vector<double>()) total += x;
    }
  } else {
    for (const std::vector<double>& v : sums) {
      for (const double x : v) total += x;
    }
  }
  const double norm = std::sqrt(total);
  // The optimizer reads the shared parameters' gradients from the blocks
  // (with ZeRO-1 they are views of the whole gradients, which are then
  // clipped only there) and its own parameters' from their .grad().
  if (blocks) {
    std::vector<NamedParameter> own;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!optimizer_->shared(i)) own.push_back(params[i]);
    }
    scale_grads(own, norm, max_norm);
    scale_blocks(blocks->blocks, norm, max_norm);
  } else {
    scale_grads(params, norm, max_norm);
  }
  return norm;
}

Batch Trainer::on_device(Batch b) const {
  if (device_.is_cpu()) return b;
  return Batch{b.input_ids.to(device_), b.labels.to(device_)};
}

double Trainer::evaluate(int64_t batches) {
  const int64_t T = config_.seq, B = config_.batch;
  const int64_t windows = std::min(data_->num_val_windows(T), batches * B);
  REPRISE_CHECK(batches >= 1 && windows >= 1, "Trainer::evaluate: ", data_->name(),
                " has no held-out window of ", T, " tokens (held-out part: ", data_->val_size(),
                " tokens); asked for ", batches, " batches");
  struct EvalMode {
    LlamaForCausalLM& m;
    explicit EvalMode(LlamaForCausalLM& model) : m(model) { m.eval(); }
    ~EvalMode() { m.train(); }
  } eval_mode(*model_);
  NoGradGuard no_grad;
  // Batch j (B windows, fewer for the last) on rank j mod R, in rounds of
  // R. An expert-parallel forward and one that gathers split parameters
  // are collective, so a process without a batch in the last round runs
  // batch 0 and drops its loss.
  const int64_t R = ranks(), n_batches = (windows + B - 1) / B, rounds = (n_batches + R - 1) / R;
  const bool lockstep = group_ && (group_->expert_dispatch() || parameter_shards_);
  const LlamaForCausalLM::LayerRunner runner =
      parameter_shards_ ? parameter_shards_->runner({}) : LlamaForCausalLM::LayerRunner{};
  std::vector<double> weighted(size_t(rounds), 0.0);  // loss x windows per round
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t j = round * R + rank();
    if (j >= n_batches && !lockstep) continue;
    const int64_t first = j < n_batches ? j * B : 0;
    const int64_t n = std::min(B, windows - first);
    const Batch b = on_device(data_->val_batch(first, n, T));
    const Autocast precision(config_.dtype, config_.attention_dtype);
    if (parameter_shards_) parameter_shards_->gather(rest_unit());
    const Tensor loss =
        LlamaForCausalLM::loss(model_->forward(b.input_ids, runner).logits, b.labels);
    if (j < n_batches) weighted[size_t(round)] = double(loss.item<float>()) * double(n);
  }
  if (parameter_shards_) parameter_shards_->release_all();
  // Each window scores T - 1 targets; weighting batch means by window count
  // gives the mean over all held-out targets. Summed in batch order.
  const std::vector<double> all = group_ ? group_->all_gather(weighted) : weighted;  // (R, rounds)
  double total = 0;
  for (int64_t j = 0; j < n_batches; ++j) total += all[size_t((j % R) * rounds + j / R)];
  return total / double(windows);
}

void write_gradient_dump(const std::string& path, const LlamaForCausalLM& model, const Batch& batch,
                         const Tensor& logits, const Tensor& loss) {
  std::vector<std::pair<std::string, Tensor>> tensors{
      {"input_ids", batch.input_ids},
      {"labels", batch.labels},
      {"loss", loss.detach().to(DType::f32)},
      {"logits", logits.detach()},
  };
  for (const NamedParameter& p : model.parameters()) {
    const Tensor g = p.value.grad();
    REPRISE_CHECK(g.defined(), "write_gradient_dump: parameter '", p.name,
                  "' has no gradient; call it after backward");
    tensors.emplace_back(p.name, g);
  }
  const std::map<std::string, std::string> metadata{
      {"format", "reprise.gradient_dump"},
      {"config", json::dump(llama_config_to_json(model.config()))},
      {"loss", "mean cross-entropy of logits[:, t] against labels[:, t + 1] (Hugging Face's)"},
  };
  io::write_safetensors(path, tensors, metadata);
}

}  // namespace reprise::nn
