#include "nn/train_state.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <type_traits>

#include "autograd/anomaly.h"
#include "autograd/backward.h"
#include "autograd/tracer.h"
#include "autograd/verifier.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "engine/memory_stats.h"
#include "io/safetensors.h"
#include "io/write_file.h"
#include "nn/autocast.h"
#include "nn/device.h"
#include "nn/hf.h"

namespace reprise::nn {

LlamaConfig default_train_model() {
  LlamaConfig c;
  c.vocab_size = kByteVocabSize;
  c.hidden_size = 128;
  c.intermediate_size = 352;  // ~8/3 of hidden, as Llama, rounded to 32
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5;
  return c;
}

// ---- TrainConfig ------------------------------------------------------------

std::optional<DType> run_dtype_named(std::string_view name) {
  for (const DType t : {DType::f32, DType::bf16}) {
    if (name == dtype_name(t)) return t;
  }
  return std::nullopt;
}

void TrainConfig::validate() const {
  model.validate();
  REPRISE_CHECK(steps >= 1, "TrainConfig: steps must be >= 1, got ", steps);
  REPRISE_CHECK(batch >= 1, "TrainConfig: batch must be >= 1, got ", batch);
  REPRISE_CHECK(grad_accum >= 1, "TrainConfig: grad_accum must be >= 1, got ", grad_accum);
  REPRISE_CHECK(seq >= 2 && seq <= model.max_position_embeddings,
                "TrainConfig: seq must be in [2, max_position_embeddings = ",
                model.max_position_embeddings, "], got ", seq);
  REPRISE_CHECK(lr > 0 && std::isfinite(lr), "TrainConfig: lr must be > 0, got ", lr);
  REPRISE_CHECK(min_lr >= 0 && min_lr <= lr, "TrainConfig: min_lr must be in [0, lr = ", lr,
                "], got ", min_lr);
  // A warmup longer than the run is allowed: the whole run warms up.
  REPRISE_CHECK(warmup >= 0, "TrainConfig: warmup must be >= 0, got ", warmup);
  REPRISE_CHECK(weight_decay >= 0, "TrainConfig: weight_decay must be >= 0, got ", weight_decay);
  REPRISE_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
                "TrainConfig: betas must be in [0, 1), got ", beta1, " and ", beta2);
  REPRISE_CHECK(grad_clip >= 0, "TrainConfig: grad_clip must be >= 0 (0: off), got ", grad_clip);
  REPRISE_CHECK(run_dtype_named(dtype_name(dtype)), "TrainConfig: dtype must be f32 or bf16, got ",
                dtype_name(dtype));
  REPRISE_CHECK(run_dtype_named(dtype_name(attention_dtype)),
                "TrainConfig: attention_dtype must be f32 or bf16, got ",
                dtype_name(attention_dtype));
  checkpointing.validate();
}

json::Value TrainConfig::to_json() const {
  json::Value v = json::Object{};
  v.set("model", llama_config_to_json(model));
  v.set("steps", steps);
  v.set("batch", batch);
  v.set("grad_accum", grad_accum);
  v.set("seq", seq);
  v.set("lr", lr);
  v.set("min_lr", min_lr);
  v.set("warmup", warmup);
  v.set("weight_decay", weight_decay);
  v.set("beta1", beta1);
  v.set("beta2", beta2);
  v.set("grad_clip", grad_clip);
  v.set("seed", std::to_string(seed));  // a string: JSON integers here stop at int64
  v.set("dtype", dtype_name(dtype));
  v.set("attention_dtype", dtype_name(attention_dtype));
  checkpointing.write_json(v);
  return v;
}

namespace {

const json::Value& field(const json::Value& v, const char* key, const std::string& where) {
  REPRISE_CHECK(v.is_object(), where, ": expected a JSON object, got ", json::kind_name(v.kind()));
  const json::Value* f = v.find(key);
  REPRISE_CHECK(f != nullptr, where, ": missing field \"", key, "\"");
  return *f;
}

int64_t int_field(const json::Value& v, const char* key, const std::string& where) {
  const json::Value& f = field(v, key, where);
  REPRISE_CHECK(f.is_int(), where, ": field \"", key, "\" must be an integer, got ",
                json::kind_name(f.kind()));
  return f.as_int();
}

double real_field(const json::Value& v, const char* key, const std::string& where) {
  const json::Value& f = field(v, key, where);
  REPRISE_CHECK(f.is_number(), where, ": field \"", key, "\" must be a number, got ",
                json::kind_name(f.kind()));
  return f.as_double();
}

const std::string& string_field(const json::Value& v, const char* key, const std::string& where) {
  const json::Value& f = field(v, key, where);
  REPRISE_CHECK(f.is_string(), where, ": field \"", key, "\" must be a string, got ",
                json::kind_name(f.kind()));
  return f.as_string();
}

// A TrainConfig dtype (run_dtype_named).
DType dtype_field(const json::Value& v, const char* key, const std::string& where) {
  const std::string& name = string_field(v, key, where);
  const std::optional<DType> dtype = run_dtype_named(name);
  REPRISE_CHECK(dtype, where, ": field \"", key, "\" must be \"f32\" or \"bf16\", got \"", name,
                "\"");
  return *dtype;
}

uint64_t parse_u64(const std::string& s, int base, const std::string& what) {
  REPRISE_CHECK(!s.empty() && s.size() <= (base == 16 ? 16u : 20u), what, ": bad number '", s, "'");
  size_t used = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(s, &used, base);
  } catch (const std::exception&) {
    used = 0;
  }
  REPRISE_CHECK(used == s.size() && s[0] != '-' && s[0] != '+', what, ": bad number '", s, "'");
  return v;
}

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

std::string hex_bytes(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::vector<uint8_t> unhex_bytes(const std::string& s, const std::string& what) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    REPRISE_FAIL(what, ": '", c, "' is not a lowercase hex digit");
  };
  REPRISE_CHECK(s.size() % 2 == 0, what, ": odd number of hex digits (", s.size(), ")");
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint8_t(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
  return out;
}

// The shortest text that reads back as v.
std::string shortest(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

template <class T>
void differ(std::vector<std::string>& out, const char* name, const T& a, const T& b) {
  if (a == b) return;
  if constexpr (std::is_floating_point_v<T>) {
    out.push_back(std::string(name) + " " + shortest(a) + " vs " + shortest(b));
  } else if constexpr (std::is_same_v<T, DType>) {
    out.push_back(std::string(name) + " " + dtype_name(a) + " vs " + dtype_name(b));
  } else {
    out.push_back(std::string(name) + " " + std::to_string(a) + " vs " + std::to_string(b));
  }
}

}  // namespace

TrainConfig TrainConfig::from_json(const json::Value& v, const std::string& where) {
  TrainConfig c;
  c.model = llama_config_from_json(field(v, "model", where), where + " model");
  c.steps = int_field(v, "steps", where);
  c.batch = int_field(v, "batch", where);
  // Checkpoints from before gradient accumulation have no field: 1.
  if (v.find("grad_accum") != nullptr) c.grad_accum = int_field(v, "grad_accum", where);
  c.seq = int_field(v, "seq", where);
  c.lr = real_field(v, "lr", where);
  c.min_lr = real_field(v, "min_lr", where);
  c.warmup = int_field(v, "warmup", where);
  c.weight_decay = real_field(v, "weight_decay", where);
  c.beta1 = real_field(v, "beta1", where);
  c.beta2 = real_field(v, "beta2", where);
  c.grad_clip = real_field(v, "grad_clip", where);
  c.seed = parse_u64(string_field(v, "seed", where), 10, where + " seed");
  // Checkpoints from before mixed precision have no field: f32.
  if (v.find("dtype") != nullptr) c.dtype = dtype_field(v, "dtype", where);
  if (v.find("attention_dtype") != nullptr)
    c.attention_dtype = dtype_field(v, "attention_dtype", where);
  c.checkpointing = CheckpointConfig::read_json(v, where);
  return c;
}

std::vector<std::string> TrainConfig::run_differences(const TrainConfig& o) const {
  std::vector<std::string> out;
  if (!(model == o.model))
    out.push_back("model (" + model.describe() + ") vs (" + o.model.describe() + ")");
  differ(out, "steps", steps, o.steps);
  differ(out, "batch", batch, o.batch);
  differ(out, "grad_accum", grad_accum, o.grad_accum);
  differ(out, "seq", seq, o.seq);
  differ(out, "lr", lr, o.lr);
  differ(out, "min_lr", min_lr, o.min_lr);
  differ(out, "warmup", warmup, o.warmup);
  differ(out, "weight_decay", weight_decay, o.weight_decay);
  differ(out, "beta1", beta1, o.beta1);
  differ(out, "beta2", beta2, o.beta2);
  differ(out, "grad_clip", grad_clip, o.grad_clip);
  differ(out, "seed", seed, o.seed);
  differ(out, "dtype", dtype, o.dtype);
  differ(out, "attention_dtype", attention_dtype, o.attention_dtype);
  return out;
}

// ---- Trainer ----------------------------------------------------------------

Trainer::Trainer(TrainConfig config, std::shared_ptr<const TextDataset> data,
                 std::shared_ptr<TrainGroup> group, Device device)
    : config_(std::move(config)),
      data_(std::move(data)),
      group_(std::move(group)),
      device_(device),
      generator_(config_.seed) {
  config_.validate();
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
  model_ = std::make_unique<LlamaForCausalLM>(config_.model, generator_, experts);
  model_->set_dropout_generator(generator_);
  // Initialised on the CPU from the same streams, so a model starts from the
  // same values on every device.
  to_device(*model_, device_);
  AdamWOptions adam;
  adam.lr = config_.lr;
  adam.beta1 = config_.beta1;
  adam.beta2 = config_.beta2;
  adam.weight_decay = config_.weight_decay;
  optimizer_ = std::make_unique<AdamW>(model_->parameters(), adam);
  schedule_ = CosineSchedule{config_.lr, config_.min_lr, config_.warmup, config_.steps};
  set_compute_options(config_);
  if (group_) {
    std::vector<NamedParameter> replicated;
    for (const NamedParameter& p : model_->parameters()) {
      if (!(experts && is_expert_parameter(p.name))) replicated.push_back(p);
    }
    group_->attach(replicated);
  }
}

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
      std::make_unique<LayerCheckpointing>(checkpointing, generator_, moe_block_of(config_.model));
  config_.checkpointing = c.checkpointing;
}

OnNonFinite parse_on_nonfinite(const std::string& name) {
  if (name == "stop") return OnNonFinite::stop;
  if (name == "skip") return OnNonFinite::skip;
  REPRISE_FAIL("on non-finite: expected stop or skip, got '", name, "'");
}

Trainer::StepStats Trainer::step(const AfterBackward& after_backward) {
  const auto start = std::chrono::steady_clock::now();
  memory_stats::reset_peaks();
  StepStats s;
  s.lr = schedule_.lr(step_);
  optimizer_->set_lr(s.lr);
  const int64_t A = config_.grad_accum, B = config_.batch, R = ranks();
  // Every micro-batch starts from the step's generator state and reserves
  // the whole global batch's words, of which it reads its samples' slice.
  const rng::GeneratorState at_start = generator_.state();
  // Each micro-batch's mean loss weighs 1 / (R A) in the step's gradient.
  const Tensor seed = R * A > 1 ? Tensor::full({}, 1.0 / double(R * A)) : Tensor();
  std::vector<double> losses;
  std::vector<std::vector<MoeRouterTerms>> terms;
  for (int64_t m = 0; m < A; ++m) {
    if (m > 0) generator_.set_state(at_start);
    const rng::SampleSliceGuard slice(generator_, {.first = uint64_t((rank() * A + m) * B),
                                                   .count = uint64_t(B),
                                                   .total = uint64_t(global_batch())});
    const Batch batch = on_device(data_->sample(B, config_.seq, generator_));
    std::optional<autograd::TraceSpan> forward_span(std::in_place, "forward", "", "forward");
    const CausalLMOutput out = [&] {
      const Autocast precision(config_.dtype, config_.attention_dtype);
      return model_->forward(batch.input_ids, checkpointing_->runner());
    }();
    // Cross-entropy, plus the router losses of an MoE model.
    const Tensor loss = model_->causal_lm_loss(out, batch.labels);
    forward_span.reset();
    const bool last = m + 1 == A;
    if (last && group_) group_->begin_backward();
    {
      autograd::TraceSpan backward_span("backward", "", "backward");
      autograd::backward(loss, seed);
    }
    if (last && group_) group_->end_backward();
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
    s.grad_norm = clip_gradients();
    // The loss and the norm are every process's (gathered, reduced), so all
    // processes decide alike.
    s.skipped = !std::isfinite(s.loss) || !std::isfinite(s.grad_norm);
    REPRISE_CHECK(!s.skipped || on_nonfinite_ == OnNonFinite::skip, "step ", step_ + 1, ": the ",
                  std::isfinite(s.loss) ? "gradient norm" : "loss", " is not finite (loss ", s.loss,
                  ", gradient norm ", s.grad_norm,
                  "); the update was not applied. A learning rate too high? Anomaly detection "
                  "names the first op that made a NaN or an infinity");
    if (!s.skipped) {
      optimizer_->step();
      balance_experts(s.moe);
    }
    optimizer_->zero_grad();
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

double Trainer::clip_gradients() {
  const double max_norm =
      config_.grad_clip > 0 ? config_.grad_clip : std::numeric_limits<double>::infinity();
  const std::vector<NamedParameter>& params = optimizer_->params();
  // Replicas hold the same gradients after the reduction; experts split
  // over processes need every process's sums of squares, added in the
  // order one process adds them.
  if (!group_ || !group_->expert_dispatch()) return clip_grad_norm(params, max_norm);
  std::vector<std::pair<std::string, Tensor>> sums;
  for (const NamedParameter& p : params) {
    const std::vector<double> v = grad_square_sums(p);
    sums.emplace_back(p.name, Tensor::from_vector(v, {int64_t(v.size())}));
  }
  double total = 0;
  for (const auto& [name, t] : group_->gather_named(sums, true)) {
    for (const double x : t.to_vector<double>()) total += x;
  }
  const double norm = std::sqrt(total);
  scale_grads(params, norm, max_norm);
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
  // R. An expert-parallel forward is collective, so a process without a
  // batch in the last round runs batch 0 and drops its loss.
  const int64_t R = ranks(), n_batches = (windows + B - 1) / B, rounds = (n_batches + R - 1) / R;
  const bool lockstep = group_ && group_->expert_dispatch();
  std::vector<double> weighted(size_t(rounds), 0.0);  // loss x windows per round
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t j = round * R + rank();
    if (j >= n_batches && !lockstep) continue;
    const int64_t first = j < n_batches ? j * B : 0;
    const int64_t n = std::min(B, windows - first);
    const Batch b = on_device(data_->val_batch(first, n, T));
    const Autocast precision(config_.dtype, config_.attention_dtype);
    const Tensor loss = LlamaForCausalLM::loss(model_->forward(b.input_ids).logits, b.labels);
    if (j < n_batches) weighted[size_t(round)] = double(loss.item<float>()) * double(n);
  }
  // Each window scores T - 1 targets; weighting batch means by window count
  // gives the mean over all held-out targets. Summed in batch order.
  const std::vector<double> all = group_ ? group_->all_gather(weighted) : weighted;  // (R, rounds)
  double total = 0;
  for (int64_t j = 0; j < n_batches; ++j) total += all[size_t((j % R) * rounds + j / R)];
  return total / double(windows);
}

// ---- Training checkpoints ---------------------------------------------------

namespace {

constexpr const char* kMetadataKey = "reprise.train_state";
constexpr const char* kHashKey = "reprise.train_state.fnv1a64";
constexpr const char* kFormat = "reprise.train_state";
constexpr int64_t kVersion = 1;
constexpr const char* kOptimizerPrefix = "optimizer.";

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

// The checkpoint's tensors in file order: the model, then the optimizer.
std::vector<std::pair<std::string, Tensor>> state_tensors(const Trainer& t) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, value] : t.model().named_state()) out.emplace_back(name, value.detach());
  for (auto& [name, value] : t.optimizer().state())
    out.emplace_back(kOptimizerPrefix + name, value);
  return out;
}

// Removes what io::write_safetensors leaves of train_state.safetensors when
// its writer dies between creating its temporary file and the rename
// ("train_state.safetensors.tmp.<pid>.<n>"). A checkpoint folder has one
// writer, so any such file is stale.
void remove_stale_temporaries(const std::string& dir) {
  const std::string prefix =
      std::filesystem::path(train_state_path(dir)).filename().string() + ".tmp.";
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path());
  }
}

struct OpenedState {
  io::SafetensorsFile file;
  json::Value state;
};

OpenedState open_state(const std::string& dir) {
  const std::string path = train_state_path(dir);
  REPRISE_CHECK(std::filesystem::is_regular_file(path), "no training checkpoint at '", path,
                "' (--save DIR writes one)");
  io::SafetensorsFile file = io::read_safetensors(path);
  auto it = file.metadata().find(kMetadataKey);
  REPRISE_CHECK(it != file.metadata().end(), path, ": not a reprise training checkpoint (no \"",
                kMetadataKey, "\" metadata)");
  auto hash = file.metadata().find(kHashKey);
  REPRISE_CHECK(hash != file.metadata().end(), path, ": no \"", kHashKey, "\" metadata");
  REPRISE_CHECK(parse_u64(hash->second, 16, path + " state hash") == fnv1a64(it->second), path,
                ": the training-state JSON is corrupted: it does not match its recorded hash");
  json::Value state;
  try {
    state = json::parse(it->second);
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": bad training-state JSON: ", e.what());
  }
  REPRISE_CHECK(state.is_object() && string_field(state, "format", path) == kFormat, path,
                ": metadata is not a reprise training state");
  const int64_t version = int_field(state, "version", path);
  REPRISE_CHECK(version == kVersion, path, ": training-state version ", version,
                "; this build reads version ", kVersion);
  return {std::move(file), std::move(state)};
}

// The processes that wrote a state (checkpoints from before several
// processes have no field: 1).
int64_t saved_ranks(const json::Value& state, const std::string& path) {
  if (state.find("ranks") == nullptr) return 1;
  const int64_t ranks = int_field(state, "ranks", path);
  REPRISE_CHECK(ranks >= 1, path, ": \"ranks\" must be >= 1, got ", ranks);
  return ranks;
}

// The expert a checkpoint entry (a parameter or its optimizer state)
// belongs to, or "".
std::string expert_of_entry(std::string_view name) {
  if (name.rfind(kOptimizerPrefix, 0) == 0) {
    name.remove_prefix(std::string_view(kOptimizerPrefix).size());
  }
  return expert_of(name);
}

}  // namespace

void check_resume_ranks(const std::string& path, int64_t saved, int64_t ranks) {
  REPRISE_CHECK(saved == ranks, path, ": written by a run of ", saved,
                " process(es), and this run has ", ranks, "; resume it on ", saved,
                " (the global batch, and with it the data order, depends on the number)");
}

std::string train_state_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "train_state.safetensors").string();
}

void save_train_state(const Trainer& t, const std::string& dir, const json::Value& session) {
  std::vector<std::pair<std::string, Tensor>> tensors = state_tensors(t);
  if (t.group()) {
    tensors = t.group()->gather_named(tensors, false);
    if (t.rank() != 0) return;
  }
  for (const auto& [name, value] : tensors) {
    const char* bad = autograd::first_non_finite(value);
    REPRISE_CHECK(bad == nullptr, "save_train_state: ", name, " holds ", bad, " after step ",
                  t.steps_done(), "; a non-finite state is not saved (the last checkpoint in '",
                  dir, "' stays)");
  }
  io::create_directories_durable(dir);
  remove_stale_temporaries(dir);
  json::Value checksums = json::Object{};
  for (const auto& [name, value] : tensors)
    checksums.set(name, hex64(autograd::hash_values(value)));

  json::Value data = json::Object{};
  data.set("name", t.data().name());
  data.set("path", t.data().path());
  data.set("bytes", int64_t(t.data().text().size()));
  data.set("train_bytes", t.data().train_size());
  data.set("fingerprint", hex64(t.data().fingerprint()));
  data.set("tokens", t.data().num_tokens());
  data.set("tokenizer", t.data().tokenizer().describe());
  data.set("tokenizer_path", t.data().tokenizer().path);

  json::Value state = json::Object{};
  state.set("format", kFormat);
  state.set("version", kVersion);
  state.set("step", t.steps_done());
  state.set("tokens_seen", t.tokens_seen());
  state.set("ranks", int64_t(t.ranks()));
  state.set("config", t.config().to_json());
  state.set("generator", hex_bytes(t.generator().state().to_bytes()));
  state.set("data", data);
  state.set("checksums", checksums);
  if (!session.is_null()) state.set("session", session);
  const std::string text = json::dump(state, 1);
  io::write_safetensors(train_state_path(dir), tensors,
                        {{kMetadataKey, text}, {kHashKey, hex64(fnv1a64(text))}});
}

TrainStateInfo read_train_state_info(const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();
  TrainStateInfo info;
  info.config = TrainConfig::from_json(field(s.state, "config", path), path + " config");
  // The caller builds a Trainer of this config: its model must fit the f32
  // parameters the file holds before it is allocated.
  check_weights_fit(info.config.model, s.file, 4, "the training state's config");
  info.step = int_field(s.state, "step", path);
  info.ranks = int(saved_ranks(s.state, path));
  const json::Value& data = field(s.state, "data", path);
  info.data_name = string_field(data, "name", path + " data");
  info.data_path = string_field(data, "path", path + " data");
  // Checkpoints from before tokenizers trained on bytes.
  if (const json::Value* tok = data.find("tokenizer_path"); tok != nullptr) {
    info.tokenizer_path = string_field(data, "tokenizer_path", path + " data");
  }
  return info;
}

std::unique_ptr<LlamaForCausalLM> load_train_state_model(const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();
  const TrainConfig config =
      TrainConfig::from_json(field(s.state, "config", path), path + " config");
  auto model = std::make_unique<LlamaForCausalLM>(config.model, nullptr);  // loaded next
  const json::Value& checksums = field(s.state, "checksums", path);
  std::vector<std::pair<Tensor, Tensor>> loads;  // (parameter or buffer, checked value)
  for (const auto& [name, param] : model->named_state()) {
    REPRISE_CHECK(s.file.contains(name), path, ": missing parameter '", name, "' (",
                  param.describe(), ")");
    Tensor value = s.file.get(name);
    REPRISE_CHECK(value.shape() == param.shape() && value.dtype() == param.dtype(), path,
                  ": parameter '", name, "' is ", value.describe(), ", expected ",
                  param.describe());
    const uint64_t expected = parse_u64(string_field(checksums, name.c_str(), path + " checksums"),
                                        16, path + " checksum of '" + name + "'");
    REPRISE_CHECK(autograd::hash_values(value) == expected, path, ": tensor '", name, "' (",
                  value.describe(), ") is corrupted: its bytes do not match the recorded hash");
    loads.emplace_back(param, std::move(value));
  }
  NoGradGuard no_grad;
  for (auto& [param, value] : loads) param.copy_(value);
  return model;
}

void load_train_state(Trainer& t, const std::string& dir) {
  const OpenedState s = open_state(dir);
  const std::string& path = s.file.path();

  const TrainConfig saved =
      TrainConfig::from_json(field(s.state, "config", path), path + " config");
  const std::vector<std::string> diffs = t.config().run_differences(saved);
  if (!diffs.empty()) {
    std::string all;
    for (const std::string& d : diffs) all += (all.empty() ? "" : "; ") + d;
    REPRISE_FAIL(path, ": this run's config differs from the checkpoint's (this vs saved): ", all);
  }

  const json::Value& data = field(s.state, "data", path);
  const uint64_t fingerprint =
      parse_u64(string_field(data, "fingerprint", path + " data"), 16, path + " data fingerprint");
  const json::Value* saved_tok = data.find("tokenizer");
  const std::string saved_tokenizer =
      saved_tok && saved_tok->is_string() ? saved_tok->as_string() : "bytes";
  REPRISE_CHECK(fingerprint == t.data().fingerprint(), path, ": the checkpoint was trained on '",
                string_field(data, "name", path + " data"), "' (",
                int_field(data, "bytes", path + " data"), " bytes, tokenized as ", saved_tokenizer,
                "), a different text or tokenizer than '", t.data().name(), "' (",
                t.data().text().size(), " bytes, tokenized as ", t.data().tokenizer().describe(),
                ")");

  check_resume_ranks(path, saved_ranks(s.state, path), t.ranks());
  const int64_t step = int_field(s.state, "step", path);
  REPRISE_CHECK(step >= 0 && step <= saved.steps, path, ": step ", step, " outside [0, ",
                saved.steps, "]");
  const rng::GeneratorState gen_state = [&] {
    const std::vector<uint8_t> bytes =
        unhex_bytes(string_field(s.state, "generator", path), path + " generator");
    try {
      return rng::GeneratorState::from_bytes(bytes.data(), bytes.size());
    } catch (const Error& e) {
      REPRISE_FAIL(path, ": generator state: ", e.what());
    }
  }();
  REPRISE_CHECK(gen_state.seed == saved.seed, path, ": generator seed ", gen_state.seed,
                " is not the config's seed ", saved.seed);
  try {
    rng::Generator(saved.seed).set_state(gen_state);  // its checks, on a scratch generator
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": generator state: ", e.what());
  }

  // The tensor list: every parameter, optimizer entries, nothing else, each
  // with its hash.
  const json::Value& checksums = field(s.state, "checksums", path);
  REPRISE_CHECK(checksums.is_object() && checksums.as_object().size() == s.file.names().size(),
                path, ": the checksum list does not match the ", s.file.names().size(),
                " tensors of the file");
  std::map<std::string, Tensor> loaded;
  // As many checksums as tensors, with unique names: each names a tensor of
  // the file, so together they name every one. (Looking each tensor up in
  // the checksum list instead would cost a scan per tensor.)
  for (const auto& [name, hash] : checksums.as_object()) {
    REPRISE_CHECK(s.file.contains(name), path, ": the checksum list names a tensor '", name,
                  "' that the file does not hold");
    REPRISE_CHECK(hash.is_string(), path, ": the checksum of '", name, "' must be a string, got ",
                  json::kind_name(hash.kind()));
    const uint64_t expected = parse_u64(hash.as_string(), 16, path + " checksum of '" + name + "'");
    Tensor value = s.file.get(name);
    REPRISE_CHECK(autograd::hash_values(value) == expected, path, ": tensor '", name, "' (",
                  value.describe(), ") is corrupted: its bytes do not match the recorded hash");
    loaded.emplace(name, std::move(value));
  }
  std::map<std::string, Tensor> optimizer_state;
  std::set<std::string> param_names, held_experts;
  // The parameters and buffers (the model's state).
  const std::vector<std::pair<std::string, Tensor>> params = t.model().named_state();
  for (const auto& [name, param] : params) {
    param_names.insert(name);
    held_experts.insert(expert_of_entry(name));
    auto it = loaded.find(name);
    REPRISE_CHECK(it != loaded.end(), path, ": missing parameter '", name, "' (", param.describe(),
                  ")");
    REPRISE_CHECK(it->second.shape() == param.shape() && it->second.dtype() == param.dtype(), path,
                  ": parameter '", name, "' is ", it->second.describe(), ", expected ",
                  param.describe());
  }
  // With experts split over processes, the file holds every process's.
  const bool split = t.group() && t.group()->expert_dispatch();
  for (const auto& [name, value] : loaded) {
    if (param_names.count(name) != 0) continue;
    const std::string expert = expert_of_entry(name);
    if (split && !expert.empty() && held_experts.count(expert) == 0) continue;
    REPRISE_CHECK(name.rfind(kOptimizerPrefix, 0) == 0, path, ": unexpected tensor '", name, "'");
    optimizer_state.emplace(name.substr(std::string(kOptimizerPrefix).size()), value);
  }

  // Everything checked: AdamW validates its part before changing it, then
  // the parameters, the generator and the step follow.
  try {
    t.optimizer().load_state(optimizer_state);
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": optimizer state: ", e.what());
  }
  {
    NoGradGuard no_grad;
    for (const auto& [name, param] : params) {
      Tensor dst = param;
      dst.copy_(loaded.at(name));
    }
  }
  t.generator().set_state(gen_state);
  t.step_ = step;
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
