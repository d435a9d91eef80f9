#include "nn/hf_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "base/error.h"

namespace reprise::nn {
namespace {

// ---- reading fields ------------------------------------------------------------

// The members of one config.json object, each marked when read, so that
// what nobody read can be reported.
class Fields {
 public:
  Fields(const json::Value& object, std::string where) : object_(object), where_(std::move(where)) {
    REPRISE_CHECK(object.is_object(), where_, ": expected a JSON object, got ",
                  json::kind_name(object.kind()));
  }

  const std::string& where() const { return where_; }

  // The value, or nullptr when absent or null; marks the key read.
  const json::Value* get(std::string_view key) {
    read_.insert(std::string(key));
    const json::Value* v = object_.find(key);
    return v != nullptr && !v->is_null() ? v : nullptr;
  }
  bool has(std::string_view key) { return get(key) != nullptr; }
  // Whether the key is there at all, null or not.
  bool present(std::string_view key) const { return object_.find(key) != nullptr; }

  int64_t integer(std::string_view key, int64_t fallback) {
    const json::Value* v = get(key);
    if (v == nullptr) return fallback;
    REPRISE_CHECK(v->is_int(), where_, ": field \"", key, "\" must be an integer, got ",
                  json::kind_name(v->kind()));
    return v->as_int();
  }
  int64_t required_integer(std::string_view key) {
    REPRISE_CHECK(has(key), where_, ": missing required field \"", key, "\"");
    return integer(key, 0);
  }
  double real(std::string_view key, double fallback) {
    const json::Value* v = get(key);
    if (v == nullptr) return fallback;
    REPRISE_CHECK(v->is_number(), where_, ": field \"", key, "\" must be a number, got ",
                  json::kind_name(v->kind()));
    return v->as_double();
  }
  std::optional<double> optional_real(std::string_view key) {
    if (!has(key)) return std::nullopt;
    return real(key, 0);
  }
  bool flag(std::string_view key, bool fallback) {
    const json::Value* v = get(key);
    if (v == nullptr) return fallback;
    REPRISE_CHECK(v->is_bool(), where_, ": field \"", key, "\" must be true or false, got ",
                  json::kind_name(v->kind()));
    return v->as_bool();
  }
  std::optional<std::string> text(std::string_view key) {
    const json::Value* v = get(key);
    if (v == nullptr) return std::nullopt;
    REPRISE_CHECK(v->is_string(), where_, ": field \"", key, "\" must be a string, got ",
                  json::kind_name(v->kind()));
    return v->as_string();
  }
  // An array of integers ([] when absent).
  std::vector<int64_t> integers(std::string_view key) {
    std::vector<int64_t> out;
    const json::Value* v = get(key);
    if (v == nullptr) return out;
    REPRISE_CHECK(v->is_array(), where_, ": field \"", key, "\" must be an array of integers");
    for (const json::Value& e : v->as_array()) {
      REPRISE_CHECK(e.is_int(), where_, ": field \"", key, "\" must be an array of integers");
      out.push_back(e.as_int());
    }
    return out;
  }
  // A field that must hold `expected` when present.
  void require_text(std::string_view key, std::string_view expected, std::string_view what) {
    const std::optional<std::string> v = text(key);
    REPRISE_CHECK(!v || *v == expected, where_, ": field \"", key, "\" is \"", *v,
                  "\"; reprise supports only \"", expected, "\" (", what, ")");
  }
  // A field that changes the model where reprise has no such piece: its
  // default, or an Error.
  void require_false(std::string_view key, std::string_view what) {
    REPRISE_CHECK(!flag(key, false), where_, ": field \"", key, "\" is true; reprise's ", what);
  }
  // Fields known to leave the computation alone.
  void skip(std::initializer_list<std::string_view> keys) {
    for (std::string_view k : keys) read_.insert(std::string(k));
  }
  // Members nobody read, in document order.
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : object_.as_object()) {
      if (read_.count(key) == 0) out.push_back(key);
    }
    return out;
  }

 private:
  const json::Value& object_;
  std::string where_;
  std::set<std::string> read_;
};

// Fields of every config that do not change what the model computes.
void skip_common(Fields& c) {
  c.skip({"architectures",
          "model_type",
          "transformers_version",
          "torch_dtype",
          "dtype",
          "bos_token_id",
          "eos_token_id",
          "use_cache",
          "output_router_logits",
          "_name_or_path",
          "tokenizer_class",
          "return_dict",
          "output_attentions",
          "output_hidden_states",
          "torchscript",
          "_attn_implementation_autoset",
          "attn_implementation",
          "initializer_range",
          "decoder_start_token_id",
          "sep_token_id",
          "max_window_layers"});
}

// ---- rope ---------------------------------------------------------------------------

// partial_rotary_factor, in the rope object `rope` (when there is one) or
// beside it; only a family with partial rotary may set other than 1.
double read_partial_rotary(Fields& c, Fields* rope, const LlamaConfig& l, const FamilyDefaults& d) {
  const double beside = c.real("partial_rotary_factor", d.partial_rotary_factor);
  const double factor = rope != nullptr ? rope->real("partial_rotary_factor", beside) : beside;
  REPRISE_CHECK(factor == 1.0 || l.info().partial_rotary, c.where(), ": partial_rotary_factor ",
                factor, " is not supported for ", l.info().model_type,
                " (its models rotate the whole head)");
  return factor;
}

// The fields of a rope type other than default, from its rope object r.
void read_rope_scaling(Fields& c, Fields& r, const std::string& type, const std::string& field,
                       const LlamaConfig& l, RopeScaling& s) {
  const int64_t original =
      r.integer("original_max_position_embeddings",
                c.integer("original_max_position_embeddings", l.max_position_embeddings));
  if (s.type == RopeType::llama3 || s.type == RopeType::yarn) {
    s.original_max_position_embeddings = original;
  }
  if (s.type == RopeType::yarn) {
    // HF: factor defaults to max_position_embeddings / original, and a
    // beta of 0 or null means the default.
    s.factor = r.real("factor", double(l.max_position_embeddings) / double(original));
    s.attention_factor = r.optional_real("attention_factor");
    s.beta_fast = r.real("beta_fast", 0) != 0 ? r.real("beta_fast", 0) : 32.0;
    s.beta_slow = r.real("beta_slow", 0) != 0 ? r.real("beta_slow", 0) : 1.0;
    s.mscale = r.optional_real("mscale");
    s.mscale_all_dim = r.optional_real("mscale_all_dim");
    s.truncate = r.flag("truncate", true);
  } else {
    REPRISE_CHECK(r.has("factor"), c.where(), ": field \"", field, "\": rope type ", type,
                  " needs a factor");
    s.factor = r.real("factor", 1.0);
  }
  if (s.type == RopeType::llama3) {
    REPRISE_CHECK(r.has("low_freq_factor") && r.has("high_freq_factor"), c.where(), ": field \"",
                  field, "\": rope type llama3 needs low_freq_factor and high_freq_factor");
    s.low_freq_factor = r.real("low_freq_factor", 1.0);
    s.high_freq_factor = r.real("high_freq_factor", 4.0);
  }
}

// One rope object: rope_scaling, rope_parameters, or a layer type's entry
// of rope_parameters (`field`), its theta default_theta when it names
// none. With `partial`, partial_rotary_factor may be in it too.
LayerRope read_rope_object(Fields& c, const json::Value& object, const std::string& field,
                           double default_theta, LlamaConfig& l, const FamilyDefaults& d,
                           bool partial) {
  REPRISE_CHECK(object.is_object(), c.where(), ": field \"", field, "\" must be an object or null");
  Fields r(object, c.where() + " " + field);
  const std::string type = r.text("rope_type").value_or(r.text("type").value_or("default"));
  const std::optional<RopeType> t = rope_type_named(type);
  REPRISE_CHECK(t.has_value(), c.where(), ": field \"", field, "\" has rope_type \"", type,
                "\"; reprise supports default, linear, dynamic, llama3 and yarn");
  LayerRope rope{.theta = r.real("rope_theta", default_theta)};
  if (partial) l.partial_rotary_factor = read_partial_rotary(c, &r, l, d);
  if (l.info().text_mrope) r.skip({"mrope_section", "mrope_interleaved"});
  RopeScaling& s = rope.scaling;
  s.type = *t;
  if (s.type != RopeType::standard) {
    read_rope_scaling(c, r, type, field, l, s);
  } else {
    // The default rope ignores the other types' fields, as transformers does.
    r.skip({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor",
            "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"});
  }
  const std::vector<std::string> unread = r.unread();
  REPRISE_CHECK(unread.empty(), c.where(), ": field \"", field, "\" holds \"", unread.front(),
                "\", which rope type ", type, " does not read");
  return rope;
}

// rope_parameters with one entry per layer type (FamilyInfo::
// rope_per_layer_type): full_attention's is the model's rope, with
// rope_scaling over it when set (transformers 5 merges it so), and
// sliding_attention's the sliding layers' (kept only where they differ,
// after read_window). An absent entry is the default rope, its theta
// rope_theta, or for the sliding layers of a family with a theta of their
// own (Gemma 3) rope_local_base_freq or that default.
void read_rope_per_layer_type(Fields& c, const json::Value& parameters, const json::Value* scaling,
                              double top_theta, LlamaConfig& l, const FamilyDefaults& d) {
  REPRISE_CHECK(parameters.is_object(), c.where(),
                ": field \"rope_parameters\" must be an object or null");
  for (const auto& [key, value] : parameters.as_object()) {
    REPRISE_CHECK(key == "full_attention" || key == "sliding_attention", c.where(),
                  ": field \"rope_parameters\" holds \"", key,
                  "\"; expected one rope per layer type, \"full_attention\" and "
                  "\"sliding_attention\"");
  }
  auto entry = [&](const char* type) {
    const json::Value* v = parameters.find(type);
    return v != nullptr && !v->is_null() ? *v : json::Value(json::Object{});
  };
  json::Value full = entry("full_attention");
  if (scaling != nullptr) {
    REPRISE_CHECK(scaling->is_object(), c.where(),
                  ": field \"rope_scaling\" must be an object or null");
    for (const auto& [key, value] : scaling->as_object()) full.set(key, value);
  }
  const LayerRope f =
      read_rope_object(c, full, "rope_parameters.full_attention", top_theta, l, d, false);
  l.rope_theta = f.theta;
  l.rope_scaling = f.scaling;
  const double sliding_theta =
      d.sliding_rope_theta > 0 ? c.real("rope_local_base_freq", d.sliding_rope_theta) : top_theta;
  l.sliding_rope =
      read_rope_object(c, entry("sliding_attention"), "rope_parameters.sliding_attention",
                       sliding_theta, l, d, false);
  l.partial_rotary_factor = read_partial_rotary(c, nullptr, l, d);
}

// rope_scaling (transformers 4, and 5's old spelling, which wins when set)
// or rope_parameters, with rope_theta beside them as the default theta.
void read_rope(Fields& c, LlamaConfig& l, const FamilyDefaults& d) {
  const double top_theta = c.real("rope_theta", d.rope_theta);
  l.rope_theta = top_theta;
  const json::Value* scaling = c.get("rope_scaling");
  const json::Value* parameters = c.get("rope_parameters");
  if (l.info().rope_per_layer_type) {
    read_rope_per_layer_type(c, parameters ? *parameters : json::Value(json::Object{}), scaling,
                             top_theta, l, d);
    return;
  }
  const json::Value* rope = scaling != nullptr ? scaling : parameters;
  if (rope == nullptr) {
    l.rope_scaling = d.rope_scaling;
    l.partial_rotary_factor = read_partial_rotary(c, nullptr, l, d);
    return;
  }
  const std::string field = scaling != nullptr ? "rope_scaling" : "rope_parameters";
  const LayerRope r = read_rope_object(c, *rope, field, top_theta, l, d, true);
  l.rope_theta = r.theta;
  l.rope_scaling = r.scaling;
}

// A rope as rope_parameters holds it, and its scaling as rope_scaling
// does (null when standard).
json::Value rope_scaling_json(const RopeScaling& s) {
  if (s.type == RopeType::standard) return json::Value();
  json::Value scaling = json::Object{};
  scaling.set("rope_type", rope_type_name(s.type));
  scaling.set("factor", s.factor);
  if (s.original_max_position_embeddings > 0) {
    scaling.set("original_max_position_embeddings", s.original_max_position_embeddings);
  }
  if (s.type == RopeType::llama3) {
    scaling.set("low_freq_factor", s.low_freq_factor);
    scaling.set("high_freq_factor", s.high_freq_factor);
  }
  if (s.type == RopeType::yarn) {
    scaling.set("beta_fast", s.beta_fast);
    scaling.set("beta_slow", s.beta_slow);
    if (s.attention_factor) scaling.set("attention_factor", *s.attention_factor);
    if (s.mscale) scaling.set("mscale", *s.mscale);
    if (s.mscale_all_dim) scaling.set("mscale_all_dim", *s.mscale_all_dim);
    scaling.set("truncate", s.truncate);
  }
  return scaling;
}

json::Value rope_json(const LayerRope& r) {
  json::Value rope = json::Object{};
  rope.set("rope_theta", r.theta);
  rope.set("rope_type", rope_type_name(r.scaling.type));
  const json::Value scaling = rope_scaling_json(r.scaling);
  if (!scaling.is_null()) {
    for (const auto& [key, value] : scaling.as_object()) rope.set(key, value);
  }
  return rope;
}

void write_rope(const LlamaConfig& l, json::Value& c) {
  // Both spellings: transformers 4 reads rope_theta and rope_scaling,
  // transformers 5 rope_parameters (per layer type where the family has it).
  const LayerRope full{.theta = l.rope_theta, .scaling = l.rope_scaling};
  c.set("rope_theta", l.rope_theta);
  c.set("rope_scaling", rope_scaling_json(l.rope_scaling));
  json::Value rope = rope_json(full);
  if (l.info().rope_per_layer_type) {
    rope = json::Object{};
    rope.set("full_attention", rope_json(full));
    rope.set("sliding_attention", rope_json(l.sliding_rope.value_or(full)));
  }
  if (l.info().partial_rotary) {
    rope.set("partial_rotary_factor", l.partial_rotary_factor);
    c.set("partial_rotary_factor", l.partial_rotary_factor);
  }
  c.set("rope_parameters", rope);
}

// ---- attention --------------------------------------------------------------------

const char* layer_type_name(LayerAttention t) {
  switch (t) {
    case LayerAttention::full:
      return "full_attention";
    case LayerAttention::sliding:
      return "sliding_attention";
    case LayerAttention::linear:
      return "linear_attention";
  }
  REPRISE_FAIL("layer_type_name: unknown layer type ", int(t));
}

// layer_types `v`: one entry per layer, "full_attention" or the family's
// other kind (`other`: sliding or linear).
std::vector<LayerAttention> read_layer_types(Fields& c, const json::Value& v, int64_t layers,
                                             LayerAttention other) {
  REPRISE_CHECK(v.is_array() && int64_t(v.as_array().size()) == layers, c.where(),
                ": field \"layer_types\" must list ", layers, " layer types");
  std::vector<LayerAttention> types;
  for (const json::Value& e : v.as_array()) {
    const bool full = e.is_string() && e.as_string() == layer_type_name(LayerAttention::full);
    const bool others = e.is_string() && e.as_string() == layer_type_name(other);
    REPRISE_CHECK(full || others, c.where(), ": field \"layer_types\" holds ", json::dump(e),
                  "; expected \"full_attention\" or \"", layer_type_name(other), "\"");
    types.push_back(others ? other : LayerAttention::full);
  }
  return types;
}

// The sliding window (FamilyInfo::window): Mistral and Mixtral put
// sliding_window on every layer; Qwen2, Qwen3 and Qwen2-MoE only with
// use_sliding_window, on the layers layer_types marks (HF derives them:
// layers from max_window_layers on); Qwen3-MoE with use_sliding_window, on
// every layer; OLMo 3 always, on the layers layer_types marks (by default
// all but every fourth).
void read_window(Fields& c, LlamaConfig& l, const FamilyDefaults& d) {
  const FamilyInfo& f = l.info();
  if (f.window == Window::none) {
    // The family's attention has no window: transformers ignores one.
    c.skip({"sliding_window", "use_sliding_window", "layer_types"});
    return;
  }
  const bool gated =
      f.window == Window::uniform_if_enabled || f.window == Window::per_layer_if_enabled;
  // The family's default window where the field is absent; null: none.
  int64_t window = c.present("sliding_window") ? c.integer("sliding_window", 0) : d.sliding_window;
  if (gated && !c.flag("use_sliding_window", false)) window = 0;
  REPRISE_CHECK(window >= 0, c.where(), ": field \"sliding_window\" must be positive or null, got ",
                window);
  l.sliding_window = window;
  const bool per_layer = f.window == Window::per_layer_if_enabled || f.window == Window::per_layer;
  if (!per_layer) {
    if (f.window_ignores_layer_types) c.skip({"layer_types"});
    return;
  }
  // transformers 5 writes its private copy of sliding_window_pattern too.
  if (f.window_pattern_field) c.skip({"_sliding_window_pattern"});
  std::vector<LayerAttention> types;
  if (const json::Value* v = c.get("layer_types")) {
    types = read_layer_types(c, *v, l.num_hidden_layers, LayerAttention::sliding);
    c.skip({"sliding_window_pattern"});  // layer_types wins, as in transformers
  } else {
    const int64_t first_sliding = c.integer("max_window_layers", 28);
    const int64_t full_every = f.window_pattern_field
                                   ? c.integer("sliding_window_pattern", d.full_attention_every)
                                   : d.full_attention_every;
    REPRISE_CHECK(f.window != Window::per_layer || full_every >= 1, c.where(),
                  ": field \"sliding_window_pattern\" must be positive, got ", full_every);
    for (int64_t i = 0; i < l.num_hidden_layers; ++i) {
      bool slides = i >= first_sliding;
      if (f.window == Window::per_layer) slides = (i + 1) % full_every != 0;
      if (f.nope_layers) slides = !l.uses_rope(i);  // SmolLM3: the NoPE layers slide
      types.push_back(window > 0 && slides ? LayerAttention::sliding : LayerAttention::full);
    }
  }
  const int64_t sliding = std::count(types.begin(), types.end(), LayerAttention::sliding);
  // OLMo 3's sliding layers always slide: they need a window.
  REPRISE_CHECK(f.window != Window::per_layer || window > 0 || sliding == 0, c.where(),
                ": field \"layer_types\" marks ", sliding,
                " sliding layers but \"sliding_window\" is null or 0");
  // A sliding type without a window attends fully (Qwen2-MoE writes
  // sliding_window 0 when use_sliding_window is false); uniform types are
  // kept as none.
  if (window == 0 || sliding == 0) {
    l.sliding_window = 0;
  } else if (sliding < l.num_hidden_layers) {
    l.layer_types = std::move(types);
  }
}

// The sliding layers' own rope is kept where some layer slides and it
// differs from the full layers' (LlamaConfig::sliding_rope).
void settle_sliding_rope(LlamaConfig& l) {
  const LayerRope full{.theta = l.rope_theta, .scaling = l.rope_scaling};
  if (l.sliding_window == 0 || l.sliding_rope == full) l.sliding_rope.reset();
}

void write_window(const LlamaConfig& l, json::Value& c) {
  const Window window = l.info().window;
  if (window == Window::none) return;
  const bool gated = window == Window::uniform_if_enabled || window == Window::per_layer_if_enabled;
  if (gated) c.set("use_sliding_window", l.sliding_window > 0);
  c.set("sliding_window", l.sliding_window > 0 ? json::Value(l.sliding_window) : json::Value());
  if (window == Window::per_layer_if_enabled) c.set("max_window_layers", l.num_hidden_layers);
  if (window != Window::per_layer_if_enabled && window != Window::per_layer) return;
  json::Array types;
  for (int64_t i = 0; i < l.num_hidden_layers; ++i) {
    types.emplace_back(layer_type_name(l.attention_window(i) > 0 ? LayerAttention::sliding
                                                                 : LayerAttention::full));
  }
  c.set("layer_types", types);
}

// Qwen3-Next's gated DeltaNet layers (FamilyInfo::linear_attention): their
// shape from the linear_* fields, and which layers from layer_types
// ("linear_attention" or "full_attention"; without it, all but every
// full_attention_every-th).
void read_linear_attention(Fields& c, LlamaConfig& l, const FamilyDefaults& d) {
  if (!l.info().linear_attention) return;
  LinearAttentionConfig a = d.linear_attention;
  a.conv_kernel = c.integer("linear_conv_kernel_dim", a.conv_kernel);
  a.key_heads = c.integer("linear_num_key_heads", a.key_heads);
  a.value_heads = c.integer("linear_num_value_heads", a.value_heads);
  a.key_head_dim = c.integer("linear_key_head_dim", a.key_head_dim);
  a.value_head_dim = c.integer("linear_value_head_dim", a.value_head_dim);
  l.linear_attention = a;
  std::vector<LayerAttention> types;
  if (const json::Value* v = c.get("layer_types")) {
    types = read_layer_types(c, *v, l.num_hidden_layers, LayerAttention::linear);
  } else {
    for (int64_t i = 0; i < l.num_hidden_layers; ++i) {
      const bool full = (i + 1) % d.full_attention_every == 0;
      types.push_back(full ? LayerAttention::full : LayerAttention::linear);
    }
  }
  l.layer_types = std::move(types);
}

void write_linear_attention(const LlamaConfig& l, json::Value& c) {
  if (!l.linear_attention) return;
  const LinearAttentionConfig& a = *l.linear_attention;
  c.set("linear_conv_kernel_dim", a.conv_kernel);
  c.set("linear_num_key_heads", a.key_heads);
  c.set("linear_num_value_heads", a.value_heads);
  c.set("linear_key_head_dim", a.key_head_dim);
  c.set("linear_value_head_dim", a.value_head_dim);
  json::Array types;
  for (int64_t i = 0; i < l.num_hidden_layers; ++i) {
    types.emplace_back(
        layer_type_name(l.is_linear_layer(i) ? LayerAttention::linear : LayerAttention::full));
  }
  c.set("layer_types", types);
}

// The layers without rotary embeddings (FamilyInfo::nope_layers):
// no_rope_layers, 1 for a layer with rope and 0 without, or every
// no_rope_layer_interval-th layer without. None such: empty.
void read_nope_layers(Fields& c, LlamaConfig& l) {
  if (!l.info().nope_layers) return;
  std::vector<bool> nope;
  if (c.has("no_rope_layers")) {
    const std::vector<int64_t> uses = c.integers("no_rope_layers");
    REPRISE_CHECK(int64_t(uses.size()) == l.num_hidden_layers, c.where(),
                  ": field \"no_rope_layers\" must list ", l.num_hidden_layers, " layers, got ",
                  uses.size());
    for (int64_t u : uses) {
      REPRISE_CHECK(u == 0 || u == 1, c.where(), ": field \"no_rope_layers\" holds ", u,
                    "; expected 1 (rope) or 0 (none)");
      nope.push_back(u == 0);
    }
    c.skip({"no_rope_layer_interval"});
  } else {
    const int64_t interval = c.integer("no_rope_layer_interval", 4);
    REPRISE_CHECK(interval >= 1, c.where(),
                  ": field \"no_rope_layer_interval\" must be positive, got ", interval);
    for (int64_t i = 0; i < l.num_hidden_layers; ++i) nope.push_back((i + 1) % interval == 0);
  }
  if (std::count(nope.begin(), nope.end(), true) > 0) l.nope_layers = std::move(nope);
}

void write_nope_layers(const LlamaConfig& l, json::Value& c) {
  if (!l.info().nope_layers) return;
  json::Array uses;
  for (int64_t i = 0; i < l.num_hidden_layers; ++i) uses.emplace_back(int64_t(l.uses_rope(i)));
  c.set("no_rope_layers", uses);
}

// pad_token_id, the embedding's padding_idx in every family's model: null
// or absent (where the family's default is none) for none; negative counts
// from the end, as torch's nn.Embedding does.
std::optional<int64_t> read_pad_token_id(Fields& c, int64_t vocab_size, const FamilyDefaults& d) {
  if (!c.present("pad_token_id")) return d.pad_token_id;
  if (!c.has("pad_token_id")) return std::nullopt;  // null
  int64_t pad = c.integer("pad_token_id", 0);
  REPRISE_CHECK(pad >= -vocab_size && pad < vocab_size, c.where(), ": field \"pad_token_id\" is ",
                pad, ", not a row of the embedding (vocab_size ", vocab_size, ")");
  if (pad < 0) pad += vocab_size;
  return pad;
}

// ---- the MLP and Gemma's pieces -------------------------------------------------

const char* activation_name(MlpActivation a) {
  return a == MlpActivation::silu ? "silu" : "gelu_pytorch_tanh";
}

// The MLP's activation, in the family's field (FamilyInfo::activation_field).
MlpActivation read_activation(Fields& c, const FamilyInfo& f) {
  const std::string name =
      c.text(f.activation_field).value_or(activation_name(f.defaults.activation));
  if (name == "silu" || name == "swish") return MlpActivation::silu;
  if (name == "gelu_pytorch_tanh") return MlpActivation::gelu_tanh;
  REPRISE_FAIL(c.where(), ": field \"", f.activation_field, "\" is \"", name,
               "\"; reprise's gated MLP supports \"silu\" and \"gelu_pytorch_tanh\"");
}

// Gemma's pieces (FamilyInfo::unit_offset_norms, ...): on for the family
// that has them, their fields read where it does.
void read_gemma_pieces(Fields& c, LlamaConfig& l, const FamilyDefaults& d) {
  const FamilyInfo& f = l.info();
  l.norm_unit_offset = f.unit_offset_norms;
  l.scale_embeddings = f.scaled_embeddings;
  if (f.query_pre_attn_scalar) {
    l.query_pre_attn_scalar = c.real("query_pre_attn_scalar", d.query_pre_attn_scalar);
    REPRISE_CHECK(l.query_pre_attn_scalar > 0, c.where(),
                  ": field \"query_pre_attn_scalar\" must be positive, got ",
                  l.query_pre_attn_scalar);
  }
  if (f.final_logit_softcapping) {
    l.final_logit_softcapping = c.real("final_logit_softcapping", 0);
    // Gemma 3's attention takes no soft-cap (transformers passes none to
    // its attention), and bidirectional attention is not causal LM.
    c.skip({"attn_logit_softcapping"});
    c.require_false("use_bidirectional_attention", "attention is causal");
  }
}

// The biases (FamilyInfo::biases, mlp_bias) as each family names them.
void read_biases(Fields& c, LlamaConfig& l) {
  const FamilyInfo& f = l.info();
  switch (f.biases) {
    case AttentionBiases::none:
      c.skip({"attention_bias"});  // their attention has no biases; HF reads no such field
      break;
    case AttentionBiases::none_refused:
      c.require_false("attention_bias", std::string(f.architecture) + " has no attention biases");
      break;
    case AttentionBiases::together:
      l.qkv_bias = l.o_bias = c.flag("attention_bias", f.defaults.attention_bias);
      break;
    case AttentionBiases::qkv_always:
      l.qkv_bias = true;  // e.g. Qwen2Attention's q, k, v always have biases
      break;
    case AttentionBiases::qkv_field:
      l.qkv_bias = c.flag("qkv_bias", true);
      break;
    case AttentionBiases::qkv_by_attention_bias:
      l.qkv_bias = c.flag("attention_bias", false);
      break;
  }
  if (f.mlp_bias) l.mlp_bias = c.flag("mlp_bias", false);
  if (f.pretraining_tp) {
    REPRISE_CHECK(c.integer("pretraining_tp", 1) == 1, c.where(),
                  ": pretraining_tp other than 1 is not supported");
  } else {
    c.skip({"pretraining_tp"});  // not read by these families' models
  }
}

void write_biases(const LlamaConfig& l, json::Value& c) {
  const FamilyInfo& f = l.info();
  switch (f.biases) {
    case AttentionBiases::none:
    case AttentionBiases::qkv_always:
      break;
    case AttentionBiases::none_refused:
    case AttentionBiases::together:
    case AttentionBiases::qkv_by_attention_bias:
      c.set("attention_bias", l.qkv_bias);
      break;
    case AttentionBiases::qkv_field:
      c.set("qkv_bias", l.qkv_bias);
      break;
  }
  if (f.mlp_bias) c.set("mlp_bias", l.mlp_bias);
  if (f.pretraining_tp) c.set("pretraining_tp", 1);
}

// ---- experts ----------------------------------------------------------------------

// The reprise fields every MoE family may carry.
void read_reprise_moe(Fields& c, MoeConfig& m) {
  m.router_z_loss_coef = c.real("router_z_loss_coef", 0.0);
  m.capacity_factor = c.real("reprise_capacity_factor", 0.0);
  m.load_balance_coeff = c.real("reprise_load_balance_coeff", 0.0);
  if (const std::optional<std::string> v = c.text("reprise_router_dtype")) {
    REPRISE_CHECK(*v == "float32" || *v == "bfloat16", c.where(),
                  ": field \"reprise_router_dtype\" is \"", *v,
                  "\"; expected \"float32\" or \"bfloat16\"");
    m.router_dtype = *v == "float32" ? RouterDType::f32 : RouterDType::bf16;
  }
}

void write_reprise_moe(const MoeConfig& m, json::Value& c) {
  if (m.router_z_loss_coef != 0) c.set("router_z_loss_coef", m.router_z_loss_coef);
  if (m.capacity_factor != 0) c.set("reprise_capacity_factor", m.capacity_factor);
  if (m.load_balance_coeff != 0) c.set("reprise_load_balance_coeff", m.load_balance_coeff);
  if (m.router_dtype != RouterDType::f32) {
    c.set("reprise_router_dtype", router_dtype_name(m.router_dtype));
  }
}

// The mixture of experts (FamilyInfo::experts), as the family spells it.
MoeConfig read_moe(Fields& c, const FamilyInfo& f) {
  const ExpertPieces& p = f.experts;
  const FamilyDefaults& d = f.defaults;
  MoeConfig m;
  m.num_experts_per_tok = c.integer("num_experts_per_tok", d.experts_per_tok);
  m.router_aux_loss_coef = c.real("router_aux_loss_coef", d.aux_loss_coef);
  m.norm_topk_prob = p.norm_topk_field ? c.flag("norm_topk_prob", d.norm_topk_prob) : true;
  read_reprise_moe(c, m);
  const int64_t experts = p.experts_alias ? c.integer("num_local_experts", d.experts) : d.experts;
  m.num_local_experts = c.integer(p.experts_field, experts);
  if (p.jitter_field) {
    m.router_jitter_noise = c.real("router_jitter_noise", 0.0);
    REPRISE_CHECK(m.router_jitter_noise == 0, c.where(), ": field \"router_jitter_noise\" is ",
                  m.router_jitter_noise, "; reprise supports only 0");
  }
  if (p.sigmoid_scoring) {
    if (const std::optional<std::string> v = c.text("scoring_func")) {
      REPRISE_CHECK(*v == "softmax" || *v == "sigmoid", c.where(), ": field \"scoring_func\" is \"",
                    *v, "\"; expected \"softmax\" or \"sigmoid\"");
      m.scoring_func = *v == "softmax" ? RouterScoring::softmax : RouterScoring::sigmoid;
    }
  }
  if (p.shared_experts) m.n_shared_experts = c.integer("n_shared_experts", 0);
  if (p.expert_width) m.moe_intermediate_size = c.required_integer("moe_intermediate_size");
  if (p.sparse_layers) {
    m.decoder_sparse_step = c.integer("decoder_sparse_step", 1);
    m.mlp_only_layers = c.integers("mlp_only_layers");
  }
  if (p.gated_shared_expert) {
    m.shared_expert_intermediate_size = c.required_integer("shared_expert_intermediate_size");
    m.shared_expert_gate = m.shared_expert_intermediate_size > 0;
  }
  if (p.deepseek_routing) {
    m.scoring_func = RouterScoring::sigmoid;
    if (p.routing_method_fields) {
      c.require_text("scoring_func", "sigmoid", "DeepSeek-V3's routing");
      c.require_text("topk_method", "noaux_tc", "DeepSeek-V3's group-limited routing");
      REPRISE_CHECK(c.integer("moe_layer_freq", 1) == 1, c.where(),
                    ": field \"moe_layer_freq\" other than 1 is not supported");
    }
    m.score_correction_bias = true;
    m.n_shared_experts = c.integer("n_shared_experts", d.n_shared_experts);
    m.n_group = c.integer("n_group", d.n_group);
    m.topk_group = c.integer("topk_group", d.topk_group);
    m.routed_scaling_factor = c.real("routed_scaling_factor", d.routed_scaling_factor);
    m.first_k_dense_replace = c.integer("first_k_dense_replace", d.first_k_dense_replace);
  }
  m.router_bias = m.expert_bias = p.biases;
  if (p.clamped_swiglu) {
    m.clamped_swiglu = true;
    m.swiglu_alpha = c.real("swiglu_alpha", d.swiglu_alpha);
    m.swiglu_limit = c.real("swiglu_limit", d.swiglu_limit);
  }
  return m;
}

void write_moe(const LlamaConfig& l, json::Value& c) {
  const ExpertPieces& p = l.info().experts;
  const MoeConfig& m = *l.moe;
  c.set("num_experts_per_tok", m.num_experts_per_tok);
  if (p.norm_topk_field) c.set("norm_topk_prob", m.norm_topk_prob);
  c.set("output_router_logits", false);
  // A field the family's config lacks (DeepSeek-V3's; its default, 0, is
  // read back when absent) is written when set, so that the config reads
  // back the same.
  if (l.info().defaults.aux_loss_coef != 0 || m.router_aux_loss_coef != 0)
    c.set("router_aux_loss_coef", m.router_aux_loss_coef);
  c.set(p.experts_field, m.num_local_experts);
  if (p.jitter_field) c.set("router_jitter_noise", m.router_jitter_noise);
  if (p.sigmoid_scoring && m.scoring_func != RouterScoring::softmax)
    c.set("scoring_func", router_scoring_name(m.scoring_func));
  if (p.shared_experts && m.n_shared_experts != 0) c.set("n_shared_experts", m.n_shared_experts);
  if (p.expert_width) c.set("moe_intermediate_size", m.moe_intermediate_size);
  if (p.sparse_layers) {
    c.set("decoder_sparse_step", m.decoder_sparse_step);
    json::Array only;
    for (int64_t i : m.mlp_only_layers) only.emplace_back(i);
    c.set("mlp_only_layers", only);
  }
  if (p.gated_shared_expert)
    c.set("shared_expert_intermediate_size", m.shared_expert_intermediate_size);
  if (p.routing_method_fields) {
    c.set("scoring_func", "sigmoid");
    c.set("topk_method", "noaux_tc");
  }
  if (p.clamped_swiglu) {
    c.set("swiglu_alpha", m.swiglu_alpha);
    c.set("swiglu_limit", m.swiglu_limit);
  }
  if (p.deepseek_routing) {
    c.set("n_shared_experts", m.n_shared_experts);
    c.set("n_group", m.n_group);
    c.set("topk_group", m.topk_group);
    c.set("routed_scaling_factor", m.routed_scaling_factor);
    c.set("first_k_dense_replace", m.first_k_dense_replace);
  }
  write_reprise_moe(m, c);
}

MlaConfig read_mla(Fields& c) {
  MlaConfig m;
  // Absent and null differ: DeepSeek-V3's default is 1536, null means q_proj.
  m.q_lora_rank = c.present("q_lora_rank") ? c.integer("q_lora_rank", 0) : 1536;
  m.kv_lora_rank = c.integer("kv_lora_rank", 512);
  m.qk_nope_head_dim = c.integer("qk_nope_head_dim", 128);
  m.qk_rope_head_dim = c.integer("qk_rope_head_dim", 64);
  m.v_head_dim = c.integer("v_head_dim", 128);
  m.rope_interleave = c.flag("rope_interleave", true);
  c.skip({"qk_head_dim", "head_dim"});  // derived: qk_nope + qk_rope, and qk_rope
  return m;
}

}  // namespace

// ---- config.json ----------------------------------------------------------------

namespace {

// A vision-language config (FamilyInfo::vision_wrapper): its text model's
// config from text_config, with the top level's tie_word_embeddings (the
// head the whole model ties); the vision fields are left alone, the rest
// reported as unknown.
ModelConfigFile read_nested_text_config(Fields& c, const FamilyInfo& family,
                                        const std::string& where) {
  const json::Value* text = c.get("text_config");
  REPRISE_CHECK(text != nullptr && text->is_object(), where, ": model_type \"",
                family.vision_wrapper, "\" needs a \"text_config\" object (its ", family.model_type,
                " text model)");
  REPRISE_CHECK(text->find("model_type") == nullptr ||
                    (text->at("model_type").is_string() &&
                     text->at("model_type").as_string() == family.model_type),
                where, ": \"text_config\" of a ", family.vision_wrapper, " model must be a ",
                family.model_type, " config");
  json::Value own = *text;
  own.set("model_type", family.model_type);
  ModelConfigFile file = read_model_config(own, where + " text_config");
  file.config.tie_word_embeddings = c.flag("tie_word_embeddings", file.config.tie_word_embeddings);
  skip_common(c);
  c.skip({"vision_config", "image_token_id", "video_token_id", "vision_start_token_id",
          "vision_end_token_id"});
  for (std::string& f : c.unread()) file.unknown.push_back(std::move(f));
  return file;
}

}  // namespace

ModelConfigFile read_model_config(const json::Value& json, const std::string& where) {
  Fields c(json, where);
  const std::optional<std::string> type = c.text("model_type");
  REPRISE_CHECK(type.has_value(), where, ": missing \"model_type\" (reprise supports ",
                supported_model_types(), ")");
  if (const FamilyInfo* nested = family_nested_in(*type)) {
    return read_nested_text_config(c, *nested, where);
  }
  const FamilyInfo* family = family_named(*type);
  REPRISE_CHECK(family != nullptr, where, ": model_type is \"", *type, "\"; reprise supports ",
                supported_model_types());
  const FamilyDefaults& d = family->defaults;
  skip_common(c);
  REPRISE_CHECK(!c.has("quantization_config"), where,
                ": the weights are quantized (quantization_config); reprise reads f32, bf16 and "
                "f16 weights only");
  REPRISE_CHECK(c.real("clip_qkv", 0) == 0, where,
                ": field \"clip_qkv\" is set; reprise's attention does not clip q, k, v");
  LlamaConfig l;
  l.family = family->family;
  l.hidden_act = read_activation(c, *family);
  l.vocab_size = c.required_integer("vocab_size");
  l.hidden_size = c.required_integer("hidden_size");
  l.intermediate_size = c.required_integer("intermediate_size");
  l.num_hidden_layers = c.required_integer("num_hidden_layers");
  l.num_attention_heads = c.required_integer("num_attention_heads");
  l.num_key_value_heads =
      c.integer("num_key_value_heads", d.kv_heads > 0 ? d.kv_heads : l.num_attention_heads);
  l.max_position_embeddings = c.integer("max_position_embeddings", d.max_position_embeddings);
  l.rms_norm_eps = c.real("rms_norm_eps", d.rms_norm_eps);
  l.initializer_range = c.real("initializer_range", l.initializer_range);
  l.tie_word_embeddings = c.flag("tie_word_embeddings", d.tie_word_embeddings);
  l.pad_token_id = read_pad_token_id(c, l.vocab_size, d);
  l.attention_dropout = c.real("attention_dropout", 0.0);
  l.dropout = c.real("reprise_dropout", 0.0);
  read_rope(c, l, d);
  read_biases(c, l);
  read_nope_layers(c, l);
  read_window(c, l, d);
  read_linear_attention(c, l, d);
  settle_sliding_rope(l);
  read_gemma_pieces(c, l, d);
  l.qk_norm = family->qk_norm_field == nullptr || c.flag(family->qk_norm_field, false)
                  ? family->qk_norm
                  : QkNorm::none;
  for (const char* field : family->unread_fields) c.skip({field});
  l.norm_placement = family->norm_placement;
  l.attention_sinks = family->attention_sinks;
  l.attention_output_gate = family->attention_output_gate;
  if (family->mla) {
    l.mla = read_mla(c);
  } else {
    // transformers writes head_dim explicitly; keep 0 when it is the
    // derived one, so that configs compare equal whichever way they were made.
    const int64_t head_dim = c.integer("head_dim", d.head_dim);
    int64_t width = 0;  // checked: the product of two fields of the file may overflow
    const bool derived =
        !__builtin_mul_overflow(head_dim, l.num_attention_heads, &width) && width == l.hidden_size;
    if (head_dim != 0 && l.num_attention_heads > 0 && !derived) l.head_dim = head_dim;
  }
  if (family->experts.moe) l.moe = read_moe(c, *family);
  try {
    l.validate();
  } catch (const Error& e) {
    REPRISE_FAIL(where, ": ", e.what());
  }
  return {.config = std::move(l), .unknown = c.unread()};
}

std::string unknown_fields_warning(const ModelConfigFile& file, const std::string& where) {
  if (file.unknown.empty()) return "";
  std::string fields;
  for (const std::string& f : file.unknown) fields += (fields.empty() ? "" : ", ") + f;
  return where + ": fields reprise does not read (" + file.config.info().architecture +
         " ignores them too): " + fields;
}

LlamaConfig llama_config_from_json(const json::Value& config, const std::string& where) {
  return read_model_config(config, where).config;
}

namespace {

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
  REPRISE_FAIL("config.json: weights can be written as f32, bf16 or f16, not ", dtype_name(dtype));
}

}  // namespace

json::Value llama_config_to_json(const LlamaConfig& l, DType dtype) {
  l.validate();
  const FamilyInfo& f = l.info();
  json::Value c = json::Object{};
  c.set("architectures", json::Array{f.architecture});
  c.set("model_type", f.model_type);
  c.set(f.activation_field, activation_name(l.hidden_act));
  c.set("vocab_size", l.vocab_size);
  c.set("hidden_size", l.hidden_size);
  c.set("intermediate_size", l.intermediate_size);
  c.set("num_hidden_layers", l.num_hidden_layers);
  c.set("num_attention_heads", l.num_attention_heads);
  c.set("num_key_value_heads", l.num_key_value_heads);
  c.set("head_dim", l.mla ? l.mla->qk_rope_head_dim : l.resolved_head_dim());
  c.set("max_position_embeddings", l.max_position_embeddings);
  c.set("rms_norm_eps", l.rms_norm_eps);
  write_rope(l, c);
  c.set("initializer_range", l.initializer_range);
  c.set("tie_word_embeddings", l.tie_word_embeddings);
  c.set("pad_token_id", l.pad_token_id ? json::Value(*l.pad_token_id) : json::Value());
  c.set("attention_dropout", l.attention_dropout);
  if (l.dropout != 0) c.set("reprise_dropout", l.dropout);
  write_biases(l, c);
  if (f.qk_norm_field != nullptr) c.set(f.qk_norm_field, l.qk_norm != QkNorm::none);
  write_nope_layers(l, c);
  write_window(l, c);
  write_linear_attention(l, c);
  if (f.query_pre_attn_scalar) c.set("query_pre_attn_scalar", l.query_pre_attn_scalar);
  if (f.final_logit_softcapping) {
    c.set("final_logit_softcapping",
          l.final_logit_softcapping > 0 ? json::Value(l.final_logit_softcapping) : json::Value());
    c.set("attn_logit_softcapping", json::Value());
  }
  if (l.mla) {
    const MlaConfig& m = *l.mla;
    c.set("q_lora_rank", m.q_lora_rank > 0 ? json::Value(m.q_lora_rank) : json::Value());
    c.set("kv_lora_rank", m.kv_lora_rank);
    c.set("qk_nope_head_dim", m.qk_nope_head_dim);
    c.set("qk_rope_head_dim", m.qk_rope_head_dim);
    c.set("v_head_dim", m.v_head_dim);
    c.set("rope_interleave", m.rope_interleave);
  }
  if (l.moe) write_moe(l, c);
  c.set("torch_dtype", torch_dtype_name(dtype));
  c.set("dtype", torch_dtype_name(dtype));
  return c;
}

// ---- files ----------------------------------------------------------------------

namespace {

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
    // read_model_config_file's message names the file.
    REPRISE_CHECK(text.size() <= kMaxConfigBytes, "more than ", kMaxConfigBytes,
                  " bytes; a config.json has a few thousand");
  }
  REPRISE_CHECK(!in.bad(), path, ": read failed");
  return text;
}

}  // namespace

ModelConfigFile read_model_config_file(const std::string& dir) {
  const std::string path =
      dir.empty() || dir.back() == '/' ? dir + "config.json" : dir + "/config.json";
  json::Value v;
  try {
    v = json::parse(read_config_text(path));
  } catch (const Error& e) {
    REPRISE_FAIL("read_llama_config: ", path, ": ", e.what());
  }
  return read_model_config(v, path);
}

LlamaConfig read_llama_config(const std::string& dir) { return read_model_config_file(dir).config; }

}  // namespace reprise::nn
