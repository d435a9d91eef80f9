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

namespace {

// The shortest text that reads back as v.
std::string shortest(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

namespace train_setting {

namespace {

bool in(const Range& r, double v) {
  return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

// ">= 1", "> 0", "in [0, 1)".
std::string wording(const Range& r) {
  if (std::isinf(r.hi)) return (r.lo_open ? "> " : ">= ") + shortest(r.lo);
  return std::string("in ") + (r.lo_open ? "(" : "[") + shortest(r.lo) + ", " + shortest(r.hi) +
         (r.hi_open ? ")" : "]");
}

}  // namespace

void check(const char* name, int64_t value, const Range& range) {
  REPRISE_CHECK(in(range, double(value)), "TrainConfig: ", name, " must be ", wording(range),
                ", got ", value);
}

void check(const char* name, double value, const Range& range) {
  REPRISE_CHECK(std::isfinite(value) && in(range, value), "TrainConfig: ", name, " must be ",
                wording(range), ", got ", value);
}

void check(const char* name, DType value, RunDType) {
  REPRISE_CHECK(run_dtype_named(dtype_name(value)), "TrainConfig: ", name,
                " must be f32 or bf16, got ", dtype_name(value));
}

}  // namespace train_setting

void TrainConfig::validate() const {
  model.validate();
#define REPRISE_CHECK_SETTING(type, name, default_value, check_as, ...) \
  train_setting::check(#name, name, train_setting::check_as);
  REPRISE_TRAIN_SETTINGS(REPRISE_CHECK_SETTING)
#undef REPRISE_CHECK_SETTING
  // What the rows cannot say alone.
  REPRISE_CHECK(seq <= model.max_position_embeddings,
                "TrainConfig: seq must be at most the model's max_position_embeddings = ",
                model.max_position_embeddings, ", got ", seq);
  REPRISE_CHECK(min_lr <= lr, "TrainConfig: min_lr must be at most lr = ", lr, ", got ", min_lr);
  checkpointing.validate();
}

json::Value TrainConfig::to_json() const {
  json::Value v = json::Object{};
  v.set("model", llama_config_to_json(model));
#define REPRISE_WRITE_SETTING(type, name, ...) v.set(#name, setting_json(name));
  REPRISE_TRAIN_SETTINGS(REPRISE_WRITE_SETTING)
#undef REPRISE_WRITE_SETTING
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

// A setting's stored value (setting_json's forms) into `out`.
void read_setting(const json::Value& v, const char* key, const std::string& where, int64_t& out) {
  out = int_field(v, key, where);
}

void read_setting(const json::Value& v, const char* key, const std::string& where, double& out) {
  const json::Value& f = field(v, key, where);
  REPRISE_CHECK(f.is_number(), where, ": field \"", key, "\" must be a number, got ",
                json::kind_name(f.kind()));
  out = f.as_double();
}

void read_setting(const json::Value& v, const char* key, const std::string& where, uint64_t& out) {
  out = parse_u64(string_field(v, key, where), 10, where + " " + key);
}

void read_setting(const json::Value& v, const char* key, const std::string& where, DType& out) {
  const std::string& name = string_field(v, key, where);
  const std::optional<DType> dtype = run_dtype_named(name);
  REPRISE_CHECK(dtype, where, ": field \"", key, "\" must be \"f32\" or \"bf16\", got \"", name,
                "\"");
  out = *dtype;
}

template <class T>
void read_setting(const json::Value& v, const char* key, const std::string& where,
                  IfAbsent if_absent, T& out) {
  if (if_absent == IfAbsent::defaulted && v.is_object() && v.find(key) == nullptr) return;
  read_setting(v, key, where, out);
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
#define REPRISE_READ_SETTING(type, name, default_value, check, on_resume, if_absent, ...) \
  read_setting(v, #name, where, IfAbsent::if_absent, c.name);
  REPRISE_TRAIN_SETTINGS(REPRISE_READ_SETTING)
#undef REPRISE_READ_SETTING
  c.checkpointing = CheckpointConfig::read_json(v, where);
  return c;
}

std::vector<std::string> TrainConfig::run_differences(const TrainConfig& o) const {
  std::vector<std::string> out;
  if (!(model == o.model))
    out.push_back("model (" + model.describe() + ") vs (" + o.model.describe() + ")");
#define REPRISE_DIFFER_SETTING(type, name, default_value, check, on_resume, ...) \
  if (OnResume::on_resume == OnResume::kept) differ(out, #name, name, o.name);
  REPRISE_TRAIN_SETTINGS(REPRISE_DIFFER_SETTING)
#undef REPRISE_DIFFER_SETTING
  return out;
}

}  // namespace reprise::nn
