#include "nn/hf.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "engine/grad_mode.h"
#include "io/safetensors.h"
#include "io/write_file.h"

namespace reprise::nn {
namespace {

// ---- config.json ------------------------------------------------------------

const json::Value* member(const json::Value& obj, std::string_view key) {
  const json::Value* v = obj.find(key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}

int64_t int_field(const json::Value& obj, const char* key, const std::string& where, bool required,
                  int64_t fallback) {
  const json::Value* v = member(obj, key);
  if (v == nullptr) {
    REPRISE_CHECK(!required, where, ": missing required field \"", key, "\"");
    return fallback;
  }
  REPRISE_CHECK(v->is_int(), where, ": field \"", key, "\" must be an integer, got ",
                json::kind_name(v->kind()));
  return v->as_int();
}

double real_field(const json::Value& obj, const char* key, const std::string& where,
                  double fallback) {
  const json::Value* v = member(obj, key);
  if (v == nullptr) return fallback;
  REPRISE_CHECK(v->is_number(), where, ": field \"", key, "\" must be a number, got ",
                json::kind_name(v->kind()));
  return v->as_double();
}

bool bool_field(const json::Value& obj, const char* key, const std::string& where, bool fallback) {
  const json::Value* v = member(obj, key);
  if (v == nullptr) return fallback;
  REPRISE_CHECK(v->is_bool(), where, ": field \"", key, "\" must be true or false, got ",
                json::kind_name(v->kind()));
  return v->as_bool();
}

// A field that must hold `expected` when present (a feature reprise lacks).
void require_string(const json::Value& obj, const char* key, const char* expected,
                    const std::string& where) {
  const json::Value* v = member(obj, key);
  if (v == nullptr) return;
  REPRISE_CHECK(v->is_string() && v->as_string() == expected, where, ": field \"", key, "\" is ",
                json::dump(*v), "; reprise's Llama supports only \"", expected, "\"");
}

void require_false(const json::Value& obj, const char* key, const std::string& where) {
  REPRISE_CHECK(!bool_field(obj, key, where, false), where, ": field \"", key,
                "\" is true; reprise's Llama has no biases");
}

// rope_theta: top level (transformers 4), or rope_parameters.rope_theta
// (transformers 5). Only the default rope type, without scaling, is supported.
double rope_theta_of(const json::Value& c, const std::string& where, double fallback) {
  double theta = real_field(c, "rope_theta", where, fallback);
  if (const json::Value* s = member(c, "rope_scaling")) {
    REPRISE_CHECK(s->is_object(), where, ": field \"rope_scaling\" must be an object or null");
    require_string(*s, "rope_type", "default", where + " rope_scaling");
    require_string(*s, "type", "default", where + " rope_scaling");
  }
  if (const json::Value* p = member(c, "rope_parameters")) {
    REPRISE_CHECK(p->is_object(), where, ": field \"rope_parameters\" must be an object or null");
    require_string(*p, "rope_type", "default", where + " rope_parameters");
    theta = real_field(*p, "rope_theta", where + " rope_parameters", theta);
  }
  return theta;
}

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    default:
      break;
  }
  REPRISE_FAIL("save_llama: weights can be written as f32, bf16 or f16, not ", dtype_name(dtype));
}

// ---- files --------------------------------------------------------------------

// A config.json is a few KB; a file far larger is not one, and reading it
// whole would cost its size, so it is refused after 1 MiB.
constexpr size_t kMaxConfigBytes = size_t(1) << 20;

std::string read_config_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REPRISE_CHECK(in.good(), path, ": cannot open (", std::strerror(errno), ")");
  std::string text;
  char chunk[1 << 14];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, size_t(in.gcount()));
    // read_llama_config's message names the file.
    REPRISE_CHECK(text.size() <= kMaxConfigBytes, "more than ", kMaxConfigBytes,
                  " bytes; a config.json has a few thousand");
  }
  REPRISE_CHECK(!in.bad(), path, ": read failed");
  return text;
}

void make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return;
  struct stat st {};
  REPRISE_CHECK(errno == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), dir,
                ": cannot create the model folder (", std::strerror(errno), ")");
}

void check_weight_dtype(const std::string& path, const io::TensorInfo& info) {
  REPRISE_CHECK(info.dtype && (*info.dtype == DType::f32 || *info.dtype == DType::bf16 ||
                               *info.dtype == DType::f16),
                path, ": tensor '", info.name, "' has dtype ", info.dtype_name,
                "; expected F32, BF16 or F16");
}

std::string join(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

// The MoE fields of a "mixtral" config.json (defaults: MixtralConfig's),
// with the reprise and DeepSeek fields Mixtral does not have.
MoeConfig moe_config_from_json(const json::Value& c, const std::string& where) {
  REPRISE_CHECK(member(c, "sliding_window") == nullptr, where, ": field \"sliding_window\" is ",
                json::dump(*member(c, "sliding_window")),
                "; reprise's Mixtral supports only null (full causal attention)");
  MoeConfig m;
  m.num_local_experts = int_field(c, "num_local_experts", where, false, 8);
  m.num_experts_per_tok = int_field(c, "num_experts_per_tok", where, false, 2);
  m.router_aux_loss_coef = real_field(c, "router_aux_loss_coef", where, 0.001);
  m.router_jitter_noise = real_field(c, "router_jitter_noise", where, 0.0);
  REPRISE_CHECK(m.router_jitter_noise == 0, where, ": field \"router_jitter_noise\" is ",
                m.router_jitter_noise, "; reprise's Mixtral supports only 0");
  m.router_z_loss_coef = real_field(c, "router_z_loss_coef", where, 0.0);
  m.norm_topk_prob = bool_field(c, "norm_topk_prob", where, true);
  m.n_shared_experts = int_field(c, "n_shared_experts", where, false, 0);
  m.capacity_factor = real_field(c, "reprise_capacity_factor", where, 0.0);
  if (const json::Value* v = member(c, "scoring_func")) {
    REPRISE_CHECK(v->is_string() && (v->as_string() == "softmax" || v->as_string() == "sigmoid"),
                  where, ": field \"scoring_func\" is ", json::dump(*v),
                  "; expected \"softmax\" or \"sigmoid\"");
    m.scoring_func = v->as_string() == "softmax" ? RouterScoring::softmax : RouterScoring::sigmoid;
  }
  if (const json::Value* v = member(c, "reprise_router_dtype")) {
    REPRISE_CHECK(v->is_string() && (v->as_string() == "float32" || v->as_string() == "bfloat16"),
                  where, ": field \"reprise_router_dtype\" is ", json::dump(*v),
                  "; expected \"float32\" or \"bfloat16\"");
    m.router_dtype = v->as_string() == "float32" ? RouterDType::f32 : RouterDType::bf16;
  }
  return m;
}

void moe_config_to_json(const MoeConfig& m, json::Value& c) {
  c.set("num_local_experts", m.num_local_experts);
  c.set("num_experts_per_tok", m.num_experts_per_tok);
  c.set("router_aux_loss_coef", m.router_aux_loss_coef);
  c.set("router_jitter_noise", m.router_jitter_noise);
  c.set("output_router_logits", false);
  c.set("sliding_window", json::Value());
  // Not Mixtral's: written when they change the computation.
  if (m.router_z_loss_coef != 0) c.set("router_z_loss_coef", m.router_z_loss_coef);
  if (m.scoring_func != RouterScoring::softmax) {
    c.set("scoring_func", router_scoring_name(m.scoring_func));
  }
  if (!m.norm_topk_prob) c.set("norm_topk_prob", false);
  if (m.n_shared_experts != 0) c.set("n_shared_experts", m.n_shared_experts);
  if (m.capacity_factor != 0) c.set("reprise_capacity_factor", m.capacity_factor);
  if (m.router_dtype != RouterDType::f32) {
    c.set("reprise_router_dtype", router_dtype_name(m.router_dtype));
  }
}

}  // namespace

LlamaConfig llama_config_from_json(const json::Value& c, const std::string& where) {
  REPRISE_CHECK(c.is_object(), where, ": expected a JSON object, got ", json::kind_name(c.kind()));
  const json::Value* type = member(c, "model_type");
  const bool mixtral = type != nullptr && type->is_string() && type->as_string() == "mixtral";
  if (!mixtral) require_string(c, "model_type", "llama", where);
  require_string(c, "hidden_act", "silu", where);
  require_false(c, "attention_bias", where);
  require_false(c, "mlp_bias", where);
  REPRISE_CHECK(int_field(c, "pretraining_tp", where, false, 1) == 1, where,
                ": pretraining_tp other than 1 is not supported");
  LlamaConfig l;
  l.vocab_size = int_field(c, "vocab_size", where, true, 0);
  l.hidden_size = int_field(c, "hidden_size", where, true, 0);
  l.intermediate_size = int_field(c, "intermediate_size", where, true, 0);
  l.num_hidden_layers = int_field(c, "num_hidden_layers", where, true, 0);
  l.num_attention_heads = int_field(c, "num_attention_heads", where, true, 0);
  // MixtralConfig's defaults differ from LlamaConfig's for these.
  l.num_key_value_heads =
      int_field(c, "num_key_value_heads", where, false, mixtral ? 8 : l.num_attention_heads);
  l.max_position_embeddings = int_field(c, "max_position_embeddings", where, false,
                                        mixtral ? 4096 * 32 : l.max_position_embeddings);
  l.rms_norm_eps = real_field(c, "rms_norm_eps", where, mixtral ? 1e-5 : l.rms_norm_eps);
  l.rope_theta = rope_theta_of(c, where, mixtral ? 1e6 : 10000.0);
  l.initializer_range = real_field(c, "initializer_range", where, l.initializer_range);
  l.tie_word_embeddings = bool_field(c, "tie_word_embeddings", where, l.tie_word_embeddings);
  l.attention_dropout = real_field(c, "attention_dropout", where, 0.0);
  l.dropout = real_field(c, "reprise_dropout", where, 0.0);
  if (mixtral) l.moe = moe_config_from_json(c, where);
  // transformers writes head_dim explicitly; keep 0 when it is the default
  // so that configs compare equal whichever way they were made.
  const int64_t head_dim = int_field(c, "head_dim", where, false, 0);
  int64_t width = 0;  // checked: the product of two fields of the file may overflow
  const bool default_head_dim =
      !__builtin_mul_overflow(head_dim, l.num_attention_heads, &width) && width == l.hidden_size;
  if (head_dim != 0 && l.num_attention_heads > 0 && !default_head_dim) l.head_dim = head_dim;
  try {
    l.validate();
  } catch (const Error& e) {
    REPRISE_FAIL(where, ": ", e.what());
  }
  return l;
}

json::Value llama_config_to_json(const LlamaConfig& l, DType dtype) {
  json::Value c = json::Object{};
  c.set("architectures", json::Array{l.moe ? "MixtralForCausalLM" : "LlamaForCausalLM"});
  c.set("model_type", l.moe ? "mixtral" : "llama");
  c.set("hidden_act", "silu");
  c.set("attention_bias", false);
  c.set("mlp_bias", false);
  c.set("vocab_size", l.vocab_size);
  c.set("hidden_size", l.hidden_size);
  c.set("intermediate_size", l.intermediate_size);
  c.set("num_hidden_layers", l.num_hidden_layers);
  c.set("num_attention_heads", l.num_attention_heads);
  c.set("num_key_value_heads", l.num_key_value_heads);
  c.set("head_dim", l.resolved_head_dim());
  c.set("max_position_embeddings", l.max_position_embeddings);
  c.set("rms_norm_eps", l.rms_norm_eps);
  // Both spellings: transformers 4 reads rope_theta, transformers 5 rope_parameters.
  c.set("rope_theta", l.rope_theta);
  json::Value rope = json::Object{};
  rope.set("rope_theta", l.rope_theta);
  rope.set("rope_type", "default");
  c.set("rope_parameters", rope);
  c.set("initializer_range", l.initializer_range);
  c.set("tie_word_embeddings", l.tie_word_embeddings);
  c.set("attention_dropout", l.attention_dropout);
  if (l.dropout != 0) c.set("reprise_dropout", l.dropout);
  if (l.moe) moe_config_to_json(*l.moe, c);
  c.set("torch_dtype", torch_dtype_name(dtype));
  return c;
}

LlamaConfig read_llama_config(const std::string& dir) {
  const std::string path = join(dir, "config.json");
  json::Value v;
  try {
    v = json::parse(read_config_text(path));
  } catch (const Error& e) {
    REPRISE_FAIL("read_llama_config: ", path, ": ", e.what());
  }
  return llama_config_from_json(v, path);
}

LlamaSize llama_size(const LlamaConfig& c) {
  c.validate();
  // Checked int64 arithmetic: a config read from a file may describe a model
  // whose counts overflow. Shapes as in nn/llama.h and nn/moe.h.
  bool overflow = false;
  auto mul = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    overflow = overflow || __builtin_mul_overflow(a, b, &r);
    return r;
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    overflow = overflow || __builtin_add_overflow(a, b, &r);
    return r;
  };
  const int64_t C = c.hidden_size, F = c.intermediate_size, D = c.resolved_head_dim();
  const int64_t q_width = mul(c.num_attention_heads, D), kv_width = mul(c.num_key_value_heads, D);
  // Per layer: two norms and the q, k, v, o projections, then the MLP.
  LlamaSize layer{.tensors = 6, .elements = add(mul(2, C), mul(2, mul(add(q_width, kv_width), C)))};
  const int64_t swiglu = mul(3, mul(F, C));  // gate/up (F, C), down (C, F)
  if (c.moe) {
    const int64_t E = c.moe->num_local_experts, S = c.moe->n_shared_experts;
    // The router (E, C), E experts of w1, w2, w3, and a SwiGLU of S F if S > 0.
    layer.tensors = add(layer.tensors, add(1, add(mul(3, E), S > 0 ? 3 : 0)));
    layer.elements = add(layer.elements, add(mul(E, C), mul(add(E, S), swiglu)));
  } else {
    layer.tensors = add(layer.tensors, 3);
    layer.elements = add(layer.elements, swiglu);
  }
  // The embedding (V, C), the layers, the final norm, the head (V, C) unless tied.
  const int64_t vocab_tensors = c.tie_word_embeddings ? 1 : 2;
  LlamaSize size{.tensors = add(vocab_tensors + 1, mul(c.num_hidden_layers, layer.tensors)),
                 .elements = add(add(mul(vocab_tensors, mul(c.vocab_size, C)), C),
                                 mul(c.num_hidden_layers, layer.elements))};
  REPRISE_CHECK(!overflow, "llama_size: the model of config (", c.describe(),
                ") has more than 2^63 - 1 weights");
  return size;
}

void check_weights_fit(const LlamaConfig& config, const io::SafetensorsFile& file,
                       uint64_t bytes_per_weight, const std::string& what) {
  const LlamaSize size = llama_size(config);
  REPRISE_CHECK(uint64_t(size.tensors) <= io::kMaxSafetensorsTensors, file.path(), ": ", what,
                " describes a model of ", size.tensors, " tensors (", config.describe(),
                "), more than a safetensors file may hold (", io::kMaxSafetensorsTensors, ")");
  REPRISE_CHECK(uint64_t(size.elements) <= file.data_bytes() / bytes_per_weight, file.path(), ": ",
                what, " describes a model of ", size.elements, " weights (", config.describe(),
                "), but the file's tensors hold ", file.data_bytes(), " bytes, fewer than ",
                bytes_per_weight, " per weight");
}

namespace {

void load_weights(LlamaForCausalLM& model, const io::SafetensorsFile& file) {
  const std::string& path = file.path();
  const std::vector<NamedParameter> params = model.parameters();
  std::set<std::string> expected;
  // Check names, shapes and dtypes of everything before reading any data.
  for (const NamedParameter& p : params) {
    expected.insert(p.name);
    REPRISE_CHECK(file.contains(p.name), path, ": missing tensor '", p.name, "' (",
                  p.value.describe(), ")");
    const io::TensorInfo& info = file.info(p.name);
    REPRISE_CHECK(info.shape == p.value.shape(), path, ": tensor '", p.name, "' has shape ",
                  to_string(info.shape), ", expected ", to_string(p.value.shape()),
                  " (does config.json match the weights?)");
    check_weight_dtype(path, info);
  }
  for (const std::string& name : file.names()) {
    if (expected.count(name) != 0) continue;
    // A tied checkpoint may still carry the head (transformers drops it,
    // other writers may not); it must then equal the embedding.
    const bool tied_head = name == "lm_head.weight" && model.config().tie_word_embeddings;
    REPRISE_CHECK(tied_head, path, ": unexpected tensor '", name, "'");
    const io::TensorInfo& info = file.info(name);
    REPRISE_CHECK(info.shape == model.model.embed_tokens.weight().shape(), path,
                  ": tensor 'lm_head.weight' has shape ", to_string(info.shape),
                  ", expected the embedding's ",
                  to_string(model.model.embed_tokens.weight().shape()));
    check_weight_dtype(path, info);
  }
  std::vector<Tensor> loaded;
  for (const NamedParameter& p : params) loaded.push_back(file.get(p.name).to(DType::f32));
  if (model.config().tie_word_embeddings && file.contains("lm_head.weight")) {
    const std::vector<float> head = file.get("lm_head.weight").to(DType::f32).to_vector<float>();
    size_t e = 0;
    while (params[e].name != "model.embed_tokens.weight") ++e;
    REPRISE_CHECK(head == loaded[e].to_vector<float>(), path,
                  ": 'lm_head.weight' differs from 'model.embed_tokens.weight' although "
                  "tie_word_embeddings is true");
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor w = params[i].value;
    w.copy_(loaded[i]);
  }
}

}  // namespace

void load_llama_weights(LlamaForCausalLM& model, const std::string& path) {
  load_weights(model, io::read_safetensors(path));
}

std::unique_ptr<LlamaForCausalLM> load_llama(const std::string& dir) {
  const LlamaConfig config = read_llama_config(dir);
  const io::SafetensorsFile file = io::read_safetensors(join(dir, "model.safetensors"));
  check_weights_fit(config, file, 2, "config.json");  // BF16 or F16 at least
  // Initialising from a private generator leaves the default one untouched.
  rng::Generator scratch;
  auto model = std::make_unique<LlamaForCausalLM>(config, scratch);
  load_weights(*model, file);
  return model;
}

void save_llama(const LlamaForCausalLM& model, const std::string& dir, DType dtype) {
  const json::Value config = llama_config_to_json(model.config(), dtype);  // checks dtype
  make_dir(dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const NamedParameter& p : model.parameters()) {
    tensors.emplace_back(p.name,
                         dtype == DType::f32 ? p.value.detach() : p.value.detach().to(dtype));
  }
  io::write_safetensors(join(dir, "model.safetensors"), tensors, {{"format", "pt"}});
  io::write_text_atomic(join(dir, "config.json"), json::dump(config, 2) + "\n");
}

}  // namespace reprise::nn
