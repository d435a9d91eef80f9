#include "nn/train_state.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <type_traits>

#include "autograd/backward.h"
#include "autograd/verifier.h"
#include "engine/grad_mode.h"
#include "engine/memory_stats.h"
#include "io/safetensors.h"
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

autograd::RngReplay parse_rng_replay(const std::string& s) {
  if (s == "recorded") return autograd::RngReplay::recorded;
  if (s == "stash") return autograd::RngReplay::stash;
  if (s == "fresh") return autograd::RngReplay::fresh;
  REPRISE_FAIL("unknown rng replay mode '", s, "'; expected recorded, stash or fresh");
}

autograd::Verify parse_verify(const std::string& s) {
  if (s == "none") return autograd::Verify::none;
  if (s == "metadata") return autograd::Verify::metadata;
  if (s == "bitwise") return autograd::Verify::bitwise;
  REPRISE_FAIL("unknown verifier mode '", s, "'; expected none, metadata or bitwise");
}

void TrainConfig::validate() const {
  model.validate();
  REPRISE_CHECK(model.vocab_size >= kByteVocabSize, "TrainConfig: the byte tokenizer needs ",
                "vocab_size >= 256, got ", model.vocab_size);
  REPRISE_CHECK(steps >= 1, "TrainConfig: steps must be >= 1, got ", steps);
  REPRISE_CHECK(batch >= 1, "TrainConfig: batch must be >= 1, got ", batch);
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
  REPRISE_CHECK(recompute_noise_ulps >= 0, "TrainConfig: recompute_noise_ulps must be >= 0, got ",
                recompute_noise_ulps);
  ActivationCheckpointing::parse(checkpoint_policy);
}

json::Value TrainConfig::to_json() const {
  json::Value v = json::Object{};
  v.set("model", llama_config_to_json(model));
  v.set("steps", steps);
  v.set("batch", batch);
  v.set("seq", seq);
  v.set("lr", lr);
  v.set("min_lr", min_lr);
  v.set("warmup", warmup);
  v.set("weight_decay", weight_decay);
  v.set("beta1", beta1);
  v.set("beta2", beta2);
  v.set("grad_clip", grad_clip);
  v.set("seed", std::to_string(seed));  // a string: JSON integers here stop at int64
  v.set("checkpoint_policy", checkpoint_policy);
  v.set("rng_replay", autograd::rng_replay_name(rng_replay));
  v.set("verify", autograd::verify_name(verify));
  v.set("recompute_noise_ulps", int64_t(recompute_noise_ulps));
  v.set("save_router", save_router);
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
  c.seq = int_field(v, "seq", where);
  c.lr = real_field(v, "lr", where);
  c.min_lr = real_field(v, "min_lr", where);
  c.warmup = int_field(v, "warmup", where);
  c.weight_decay = real_field(v, "weight_decay", where);
  c.beta1 = real_field(v, "beta1", where);
  c.beta2 = real_field(v, "beta2", where);
  c.grad_clip = real_field(v, "grad_clip", where);
  c.seed = parse_u64(string_field(v, "seed", where), 10, where + " seed");
  c.checkpoint_policy = string_field(v, "checkpoint_policy", where);
  c.rng_replay = parse_rng_replay(string_field(v, "rng_replay", where));
  c.verify = parse_verify(string_field(v, "verify", where));
  const int64_t noise = int_field(v, "recompute_noise_ulps", where);
  REPRISE_CHECK(noise >= 0 && noise <= std::numeric_limits<int>::max(), where,
                ": recompute_noise_ulps out of range: ", noise);
  c.recompute_noise_ulps = int(noise);
  // Absent from files written before the field existed: the default.
  if (const json::Value* f = v.find("save_router")) {
    REPRISE_CHECK(f->is_bool(), where, ": field \"save_router\" must be a boolean, got ",
                  json::kind_name(f->kind()));
    c.save_router = f->as_bool();
  }
  try {
    c.validate();
  } catch (const Error& e) {
    REPRISE_FAIL(where, ": ", e.what());
  }
  return c;
}

std::vector<std::string> TrainConfig::run_differences(const TrainConfig& o) const {
  std::vector<std::string> out;
  if (!(model == o.model))
    out.push_back("model (" + model.describe() + ") vs (" + o.model.describe() + ")");
  differ(out, "steps", steps, o.steps);
  differ(out, "batch", batch, o.batch);
  differ(out, "seq", seq, o.seq);
  differ(out, "lr", lr, o.lr);
  differ(out, "min_lr", min_lr, o.min_lr);
  differ(out, "warmup", warmup, o.warmup);
  differ(out, "weight_decay", weight_decay, o.weight_decay);
  differ(out, "beta1", beta1, o.beta1);
  differ(out, "beta2", beta2, o.beta2);
  differ(out, "grad_clip", grad_clip, o.grad_clip);
  differ(out, "seed", seed, o.seed);
  return out;
}

// ---- Trainer ----------------------------------------------------------------

Trainer::Trainer(TrainConfig config, std::shared_ptr<const TextDataset> data)
    : config_(std::move(config)), data_(std::move(data)), generator_(config_.seed) {
  config_.validate();
  REPRISE_CHECK(data_ != nullptr, "Trainer: no dataset");
  REPRISE_CHECK(data_->train_size() >= config_.seq, "Trainer: ", data_->name(),
                " has a training part of ", data_->train_size(),
                " bytes, fewer than seq = ", config_.seq);
  model_ = std::make_unique<LlamaForCausalLM>(config_.model, generator_);
  model_->set_dropout_generator(generator_);
  AdamWOptions adam;
  adam.lr = config_.lr;
  adam.beta1 = config_.beta1;
  adam.beta2 = config_.beta2;
  adam.weight_decay = config_.weight_decay;
  optimizer_ = std::make_unique<AdamW>(model_->parameters(), adam);
  schedule_ = CosineSchedule{config_.lr, config_.min_lr, config_.warmup, config_.steps};
  set_compute_options(config_);
}

void Trainer::set_compute_options(const TrainConfig& c) {
  const std::vector<std::string> diffs = config_.run_differences(c);
  REPRISE_CHECK(diffs.empty(), "Trainer::set_compute_options: the run's config differs in ",
                diffs.front());
  ActivationCheckpointing ac = ActivationCheckpointing::parse(c.checkpoint_policy);
  ac.options.rng = c.rng_replay;
  ac.options.verify = c.verify;
  ac.options.recompute_noise_ulps = c.recompute_noise_ulps;
  ac.save_router = c.save_router;
  // Noise exists to be measured: with it, the verifier reports instead of raising.
  ac.options.on_mismatch =
      c.recompute_noise_ulps > 0 ? autograd::OnMismatch::report : autograd::OnMismatch::raise;
  model_->set_checkpointing(std::move(ac));
  config_.checkpoint_policy = c.checkpoint_policy;
  config_.rng_replay = c.rng_replay;
  config_.verify = c.verify;
  config_.recompute_noise_ulps = c.recompute_noise_ulps;
  config_.save_router = c.save_router;
}

Trainer::StepStats Trainer::step(const AfterBackward& after_backward) {
  const auto start = std::chrono::steady_clock::now();
  memory_stats::reset_peaks();
  StepStats s;
  s.lr = schedule_.lr(step_);
  optimizer_->set_lr(s.lr);
  {
    const Batch batch = data_->sample(config_.batch, config_.seq, generator_);
    const Tensor logits = model_->forward(batch.input_ids);  // (B, T, V)
    // Cross-entropy, plus the router losses of an MoE model.
    const Tensor loss = model_->causal_lm_loss(logits, batch.labels);
    autograd::backward(loss);
    if (after_backward) after_backward(batch, logits, loss);
    s.loss = loss.item<float>();
  }
  s.grad_norm = clip_grad_norm(optimizer_->params(), config_.grad_clip > 0
                                                         ? config_.grad_clip
                                                         : std::numeric_limits<double>::infinity());
  optimizer_->step();
  optimizer_->zero_grad();
  ++step_;
  const MemorySnapshot m = memory_stats::snapshot();
  s.step = step_;
  s.tokens = config_.batch * config_.seq;
  s.peak_saved_activation = m[MemoryKind::saved_activation].peak;
  s.peak_total = m.total.peak;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

double Trainer::evaluate(int64_t batches) {
  const int64_t T = config_.seq;
  const int64_t windows = std::min(data_->num_val_windows(T), batches * config_.batch);
  REPRISE_CHECK(batches >= 1 && windows >= 1, "Trainer::evaluate: ", data_->name(),
                " has no held-out window of ", T, " bytes (held-out part: ", data_->val_size(),
                " bytes); asked for ", batches, " batches");
  struct EvalMode {
    LlamaForCausalLM& m;
    explicit EvalMode(LlamaForCausalLM& model) : m(model) { m.eval(); }
    ~EvalMode() { m.train(); }
  } eval_mode(*model_);
  NoGradGuard no_grad;
  // Each window scores T - 1 targets; weighting batch means by window count
  // gives the mean over all held-out targets. Summed in batch order.
  double total = 0;
  for (int64_t first = 0; first < windows; first += config_.batch) {
    const int64_t n = std::min(config_.batch, windows - first);
    const Batch b = data_->val_batch(first, n, T);
    const Tensor loss = LlamaForCausalLM::loss(model_->forward(b.input_ids), b.labels);
    total += double(loss.item<float>()) * double(n);
  }
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
  for (const NamedParameter& p : t.model().parameters()) out.emplace_back(p.name, p.value.detach());
  for (auto& [name, value] : t.optimizer().state())
    out.emplace_back(kOptimizerPrefix + name, value);
  return out;
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

}  // namespace

std::string train_state_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "train_state.safetensors").string();
}

void save_train_state(const Trainer& t, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  REPRISE_CHECK(!ec, "save_train_state: cannot create directory '", dir, "': ", ec.message());
  const std::vector<std::pair<std::string, Tensor>> tensors = state_tensors(t);
  json::Value checksums = json::Object{};
  for (const auto& [name, value] : tensors)
    checksums.set(name, hex64(autograd::hash_values(value)));

  json::Value data = json::Object{};
  data.set("name", t.data().name());
  data.set("path", t.data().path());
  data.set("bytes", int64_t(t.data().text().size()));
  data.set("train_bytes", t.data().train_size());
  data.set("fingerprint", hex64(t.data().fingerprint()));

  json::Value state = json::Object{};
  state.set("format", kFormat);
  state.set("version", kVersion);
  state.set("step", t.steps_done());
  state.set("tokens_seen", t.tokens_seen());
  state.set("config", t.config().to_json());
  state.set("generator", hex_bytes(t.generator().state().to_bytes()));
  state.set("data", data);
  state.set("checksums", checksums);
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
  const json::Value& data = field(s.state, "data", path);
  info.data_name = string_field(data, "name", path + " data");
  info.data_path = string_field(data, "path", path + " data");
  return info;
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
  REPRISE_CHECK(fingerprint == t.data().fingerprint(), path, ": the checkpoint was trained on '",
                string_field(data, "name", path + " data"), "' (",
                int_field(data, "bytes", path + " data"), " bytes), a different text than '",
                t.data().name(), "' (", t.data().text().size(), " bytes)");

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
  std::set<std::string> param_names;
  const std::vector<NamedParameter> params = t.model().parameters();
  for (const NamedParameter& p : params) {
    param_names.insert(p.name);
    auto it = loaded.find(p.name);
    REPRISE_CHECK(it != loaded.end(), path, ": missing parameter '", p.name, "' (",
                  p.value.describe(), ")");
    REPRISE_CHECK(it->second.shape() == p.value.shape() && it->second.dtype() == p.value.dtype(),
                  path, ": parameter '", p.name, "' is ", it->second.describe(), ", expected ",
                  p.value.describe());
  }
  for (const auto& [name, value] : loaded) {
    if (param_names.count(name) != 0) continue;
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
    for (const NamedParameter& p : params) {
      Tensor dst = p.value;
      dst.copy_(loaded.at(p.name));
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
