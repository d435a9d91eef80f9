#include "nn/hf.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/grad_mode.h"
#include "io/write_file.h"
#include "nn/hf_layout.h"

namespace reprise::nn {

// ---- sizes --------------------------------------------------------------------

namespace {

// Checked int64 arithmetic: a config read from a file may describe a model
// whose counts overflow.
class Count {
 public:
  // `n` tensors of `elements` each.
  void add(int64_t n, int64_t elements) {
    int64_t e = 0;
    overflow_ = overflow_ || __builtin_mul_overflow(n, elements, &e) ||
                __builtin_add_overflow(size_.elements, e, &size_.elements) ||
                __builtin_add_overflow(size_.tensors, n, &size_.tensors);
  }
  // A product of sizes, flagging overflow.
  int64_t product(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow_ = overflow_ || __builtin_mul_overflow(a, b, &r);
    return r;
  }
  // A Linear (out, in), with a bias (out) when `bias`.
  void linear(int64_t out, int64_t in, bool bias = false) {
    add(1, product(out, in));
    if (bias) add(1, out);
  }
  bool overflow() const { return overflow_; }
  const LlamaSize& size() const { return size_; }

 private:
  LlamaSize size_;
  bool overflow_ = false;
};

// Shapes as nn/llama.cpp and nn/moe.cpp build them (a test compares with
// the built models of every family).
void count_attention(const LlamaConfig& c, Count& n) {
  const int64_t C = c.hidden_size, H = c.num_attention_heads;
  if (c.mla) {
    const MlaConfig& m = *c.mla;
    const int64_t q_width = n.product(H, m.qk_head_dim());
    if (m.q_lora_rank > 0) {
      n.linear(m.q_lora_rank, C);
      n.add(1, m.q_lora_rank);  // q_a_layernorm
      n.linear(q_width, m.q_lora_rank);
    } else {
      n.linear(q_width, C);
    }
    n.linear(m.kv_lora_rank + m.qk_rope_head_dim, C);
    n.add(1, m.kv_lora_rank);  // kv_a_layernorm
    n.linear(n.product(H, m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank);
    n.linear(C, n.product(H, m.v_head_dim));
    return;
  }
  const int64_t D = c.resolved_head_dim(), Hkv = c.num_key_value_heads;
  // With an output gate q_proj gives each head its gate too.
  n.linear(n.product(n.product(H, D), c.attention_output_gate ? 2 : 1), C, c.qkv_bias);
  n.linear(n.product(Hkv, D), C, c.qkv_bias);
  n.linear(n.product(Hkv, D), C, c.qkv_bias);
  n.linear(C, n.product(H, D), c.o_bias);
  if (c.attention_sinks) n.add(1, H);
  if (c.qk_norm == QkNorm::per_head) n.add(2, D);
  if (c.qk_norm == QkNorm::projection) {
    n.add(1, n.product(H, D));
    n.add(1, n.product(Hkv, D));
  }
}

// A gated DeltaNet layer (nn/gated_deltanet.h).
void count_linear_attention(const LlamaConfig& c, Count& n) {
  const LinearAttentionConfig& a = *c.linear_attention;
  const int64_t C = c.hidden_size, K = n.product(a.key_heads, a.key_head_dim);
  const int64_t V = n.product(a.value_heads, a.value_head_dim);
  if (a.split_projections) {
    n.linear(n.product(2, K) + V, C);       // in_proj_qkv
    n.linear(V, C);                         // in_proj_z
    n.add(2, n.product(a.value_heads, C));  // in_proj_b, in_proj_a
  } else {
    n.linear(n.product(2, K) + n.product(2, V), C);  // in_proj_qkvz
    n.linear(n.product(2, a.value_heads), C);        // in_proj_ba
  }
  n.add(1, n.product(a.conv_dim(), a.conv_kernel));  // conv1d
  n.add(2, a.value_heads);                           // dt_bias, A_log
  n.add(1, a.value_head_dim);                        // norm
  n.linear(C, V);                                    // out_proj
}

void count_swiglu(int64_t C, int64_t F, bool bias, Count& n) {
  n.linear(F, C, bias);
  n.linear(F, C, bias);
  n.linear(C, F, bias);
}

}  // namespace

LlamaSize llama_size(const LlamaConfig& c) {
  c.validate();
  const int64_t C = c.hidden_size;
  Count n;
  n.add(c.tie_word_embeddings ? 1 : 2, n.product(c.vocab_size, C));  // embedding, head
  n.add(1, C);                                                       // the final norm
  for (int64_t i = 0; i < c.num_hidden_layers && !n.overflow(); ++i) {
    n.add(c.norm_placement == NormPlacement::both ? 4 : 2, C);  // the layer's norms
    if (c.is_linear_layer(i)) {
      count_linear_attention(c, n);
    } else {
      count_attention(c, n);
    }
    if (!c.is_moe_layer(i)) {
      count_swiglu(C, c.intermediate_size, c.mlp_bias, n);
      continue;
    }
    const MoeConfig& m = *c.moe;
    const int64_t E = m.num_local_experts, F = m.expert_intermediate_size(c.intermediate_size);
    n.add(1, n.product(E, C));                 // the router
    if (m.router_bias) n.add(1, E);            // its bias
    if (m.score_correction_bias) n.add(1, E);  // its score bias
    n.add(n.product(3, E), n.product(F, C));   // E experts' three projections
    if (m.expert_bias) {                       // and their biases
      n.add(n.product(2, E), F);
      n.add(E, C);
    }
    const int64_t S = m.shared_intermediate_size(c.intermediate_size);
    if (S > 0) count_swiglu(C, S, false, n);
    if (m.shared_expert_gate) n.linear(1, C);
  }
  REPRISE_CHECK(!n.overflow(), "llama_size: the model of config (", c.describe(),
                ") has more than 2^63 - 1 weights");
  return n.size();
}

namespace {

// `source` (a folder or a file) holds `data_bytes` of tensors, at most
// `max_tensors` of them.
void check_fit(const LlamaConfig& config, const std::string& source, uint64_t data_bytes,
               uint64_t max_tensors, uint64_t bytes_per_weight, const std::string& what) {
  const LlamaSize size = llama_size(config);
  REPRISE_CHECK(uint64_t(size.tensors) <= max_tensors, source, ": ", what, " describes a model of ",
                size.tensors, " tensors (", config.describe(), "), more than it may hold (",
                max_tensors, ")");
  REPRISE_CHECK(uint64_t(size.elements) <= data_bytes / bytes_per_weight, source, ": ", what,
                " describes a model of ", size.elements, " weights (", config.describe(),
                "), but its tensors hold ", data_bytes, " bytes, fewer than ", bytes_per_weight,
                " per weight");
}

}  // namespace

void check_weights_fit(const LlamaConfig& config, const io::SafetensorsFolder& folder,
                       uint64_t bytes_per_weight, const std::string& what) {
  // Each file holds at most kMaxSafetensorsTensors.
  const uint64_t max_tensors = std::min<uint64_t>(
      io::kMaxSafetensorsFolderTensors, folder.files().size() * io::kMaxSafetensorsTensors);
  check_fit(config, folder.dir(), folder.data_bytes(), max_tensors, bytes_per_weight, what);
}

void check_weights_fit(const LlamaConfig& config, const io::SafetensorsFile& file,
                       uint64_t bytes_per_weight, const std::string& what) {
  check_fit(config, file.path(), file.data_bytes(), io::kMaxSafetensorsTensors, bytes_per_weight,
            what);
}

// ---- loading ------------------------------------------------------------------

namespace {

std::string join(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

void check_weight_dtype(const io::SafetensorsFolder& folder, const io::TensorInfo& info) {
  REPRISE_CHECK(info.dtype && (*info.dtype == DType::f32 || *info.dtype == DType::bf16 ||
                               *info.dtype == DType::f16),
                folder.file_of(info.name), ": tensor '", info.name, "' has dtype ", info.dtype_name,
                "; expected F32, BF16 or F16");
}

// Tensors some writers keep that a model derives: the rotary tables of old
// Llama checkpoints (transformers ignores them on load too).
bool derived_tensor(const std::string& name) {
  constexpr std::string_view suffix = ".rotary_emb.inv_freq";
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A vision-language folder (FamilyInfo::vision_wrapper) keeps its text
// model's weights under model.language_model. (the head stays lm_head),
// beside the vision tower's and any other part, which reprise leaves alone.
constexpr std::string_view kNestedTextModel = "model.language_model.";

bool nested_folder(const io::SafetensorsFolder& folder, const LlamaConfig& config) {
  return config.info().vision_wrapper != nullptr &&
         folder.contains(std::string(kNestedTextModel) + "embed_tokens.weight");
}

void read_weights(LlamaForCausalLM& model, const io::SafetensorsFolder& folder) {
  std::vector<HfTensor> layout = hf_layout(model.named_state(), model.config());
  const bool nested = nested_folder(folder, model.config());
  if (nested) {
    for (HfTensor& t : layout) {
      if (t.name.rfind("model.", 0) == 0) t.name = std::string(kNestedTextModel) + t.name.substr(6);
    }
  }
  const bool tied = model.config().tie_word_embeddings;
  const Tensor& embedding = model.model.embed_tokens.weight();
  std::set<std::string> expected;
  // Check names, shapes and dtypes of everything before reading any data.
  for (const HfTensor& t : layout) {
    const std::string& name = t.name;
    expected.insert(name);
    REPRISE_CHECK(folder.contains(name), folder.dir(), ": missing tensor '", name, "' (",
                  t.packing == HfPacking::plain ? t.parts[0].describe()
                                                : "the experts' " + to_string(t.shape),
                  ")");
    const io::TensorInfo& info = folder.info(name);
    REPRISE_CHECK(info.shape == t.shape, folder.file_of(name), ": tensor '", name, "' has shape ",
                  to_string(info.shape), ", expected ", to_string(t.shape),
                  " (does config.json match the weights?)");
    check_weight_dtype(folder, info);
  }
  // A tied checkpoint may still carry the head (transformers drops it,
  // other writers may not); it must then equal the embedding.
  const bool head_too = tied && folder.contains("lm_head.weight");
  for (const std::string& name : folder.names()) {
    if (expected.count(name) != 0 || derived_tensor(name)) continue;
    if (nested && name.rfind(kNestedTextModel, 0) != 0 && name != "lm_head.weight") continue;
    REPRISE_CHECK(head_too && name == "lm_head.weight", folder.file_of(name),
                  ": unexpected tensor '", name, "' (not part of a ",
                  model.config().info().model_type, " model of this config)");
    const io::TensorInfo& info = folder.info(name);
    REPRISE_CHECK(info.shape == embedding.shape(), folder.file_of(name),
                  ": tensor 'lm_head.weight' has shape ", to_string(info.shape),
                  ", expected the embedding's ", to_string(embedding.shape()));
    check_weight_dtype(folder, info);
  }
  NoGradGuard no_grad;
  for (const HfTensor& t : layout) {
    Tensor dst = t.parts.at(0);
    if (t.packing == HfPacking::plain && dst.device().is_cpu() && dst.is_contiguous()) {
      folder.read_into(t.name, dst);  // straight from the mapped file
      continue;
    }
    const bool plain = t.packing == HfPacking::plain;
    Tensor staged = Tensor::empty(t.shape, plain ? dst.dtype() : DType::f32);
    folder.read_into(t.name, staged);
    if (plain) {
      dst.copy_(staged);
    } else {
      unpack(t, staged);
    }
  }
  if (head_too) {
    Tensor head = Tensor::empty(embedding.shape(), DType::f32);
    folder.read_into("lm_head.weight", head);
    REPRISE_CHECK(head.to_vector<float>() == embedding.to(Device::cpu()).to_vector<float>(),
                  folder.file_of("lm_head.weight"),
                  ": 'lm_head.weight' differs from 'model.embed_tokens.weight' although "
                  "tie_word_embeddings is true");
  }
}

}  // namespace

void load_weights(LlamaForCausalLM& model, const std::string& dir) {
  read_weights(model, io::read_safetensors_folder(dir));
}

LoadedModel load_model_folder(const std::string& dir) {
  ModelConfigFile config = read_model_config_file(dir);
  const io::SafetensorsFolder folder = io::read_safetensors_folder(dir);
  check_weights_fit(config.config, folder, 2, join(dir, "config.json"));  // BF16 or F16 at least
  // The weights come from the files: no initialisation.
  auto model = std::make_unique<LlamaForCausalLM>(config.config, nullptr);
  read_weights(*model, folder);
  return {.model = std::move(model), .unknown_config_fields = std::move(config.unknown)};
}

std::unique_ptr<LlamaForCausalLM> load_model(const std::string& dir) {
  return load_model_folder(dir).model;
}

// ---- saving -------------------------------------------------------------------

void save_model(const LlamaForCausalLM& model, const std::string& dir, DType dtype,
                uint64_t max_shard_bytes) {
  const json::Value config = llama_config_to_json(model.config(), dtype);  // checks dtype
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const HfTensor& t : hf_layout(model.named_state(), model.config())) {
    const Tensor host = pack(t).detach().to(Device::cpu());
    tensors.emplace_back(t.name, dtype == host.dtype() ? host : host.to(dtype));
  }
  io::write_safetensors_folder(dir, tensors, {{"format", "pt"}}, max_shard_bytes);
  io::write_text_atomic(join(dir, "config.json"), json::dump(config, 2) + "\n");
}

}  // namespace reprise::nn
