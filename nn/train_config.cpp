#include "nn/train_config.h"

#include <charconv>
#include <cmath>
#include <exception>
#include <optional>
#include <string_view>
#include <type_traits>

#include "nn/data.h"
#include "nn/hf_config.h"

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

namespace train_json {

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

}  // namespace train_json

namespace {

using train_json::field, train_json::int_field, train_json::parse_u64, train_json::string_field;

double real_field(const json::Value& v, const char* key, const std::string& where) {
  const json::Value& f = field(v, key, where);
  REPRISE_CHECK(f.is_number(), where, ": field \"", key, "\" must be a number, got ",
                json::kind_name(f.kind()));
  return f.as_double();
}

// A TrainConfig dtype (run_dtype_named).
DType dtype_field(const json::Value& v, const char* key, const std::string& where) {
  const std::string& name = string_field(v, key, where);
  const std::optional<DType> dtype = run_dtype_named(name);
  REPRISE_CHECK(dtype, where, ": field \"", key, "\" must be \"f32\" or \"bf16\", got \"", name,
                "\"");
  return *dtype;
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

}  // namespace reprise::nn
