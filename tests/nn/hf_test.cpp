// nn/hf: Hugging Face model folders round trip bitwise, 16-bit weights load
// as f32, and malformed folders give errors that name the problem.
#include "nn/hf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"

namespace reprise::nn {
namespace {

namespace fs = std::filesystem;

LlamaConfig tiny(bool tied = false) {
  LlamaConfig c;
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 128;
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  return c;
}

// A fresh directory under the system temp dir, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("reprise_hf_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

using testing::error_of;

#define EXPECT_ERROR(stmt, part)                                                           \
  do {                                                                                     \
    std::string m_ = error_of([&] { stmt; });                                              \
    EXPECT_NE(m_.find(part), std::string::npos) << "expected '" << part << "' in: " << m_; \
  } while (false)

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::vector<std::pair<std::string, Tensor>> weights_of(const LlamaForCausalLM& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : m.named_parameters()) out.emplace_back(name, t.detach());
  return out;
}

TEST(HfFolder, RoundTripIsBitwise) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    rng::Generator gen(3);
    LlamaForCausalLM m(tiny(tied), gen);
    TempDir dir;
    save_model(m, dir.str());
    EXPECT_TRUE(fs::exists(dir.path / "config.json"));
    io::SafetensorsFile f = io::read_safetensors((dir.path / "model.safetensors").string());
    EXPECT_EQ(f.contains("lm_head.weight"), !tied);  // transformers' layout for tied weights
    auto back = load_model(dir.str());
    EXPECT_EQ(back->config(), m.config());
    auto a = m.named_parameters(), b = back->named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
      EXPECT_EQ(b[i].second.storage()->kind(), MemoryKind::parameter);
      EXPECT_TRUE(b[i].second.requires_grad());
    }
    // Saving over an existing folder replaces it.
    save_model(*back, dir.str());
    EXPECT_EQ(load_model(dir.str())->parameters()[0].value.to_vector<float>(),
              a[0].second.to_vector<float>());
  }
}

TEST(HfFolder, SixteenBitWeightsLoadAsTheirF32Values) {
  rng::Generator gen(4);
  LlamaForCausalLM m(tiny(), gen);
  for (DType d : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(d));
    TempDir dir;
    save_model(m, dir.str(), d);
    io::SafetensorsFile f = io::read_safetensors((dir.path / "model.safetensors").string());
    EXPECT_EQ(f.info("model.norm.weight").dtype, d);
    auto back = load_model(dir.str());
    for (const auto& [name, t] : m.named_parameters()) {
      EXPECT_EQ(back->parameter(name).dtype(), DType::f32);
      EXPECT_EQ(back->parameter(name).to_vector<float>(),
                t.detach().to(d).to(DType::f32).to_vector<float>())
          << name;
    }
    std::ifstream in(dir.path / "config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(json::parse(text).at("torch_dtype").as_string(),
              d == DType::bf16 ? "bfloat16" : "float16");
  }
  EXPECT_ERROR(save_model(m, TempDir().str(), DType::f64), "f32, bf16 or f16");
}

TEST(HfFolder, ConfigJsonRoundTripsAndReadsTransformersSpellings) {
  LlamaConfig c = tiny();
  c.attention_dropout = 0.125;
  c.dropout = 0.25;
  c.head_dim = 8;  // not hidden / heads: kept explicitly
  EXPECT_EQ(llama_config_from_json(llama_config_to_json(c)), c);
  // transformers 4 (top-level rope_theta, no num_key_value_heads, no head_dim).
  json::Value v4 = json::parse(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
      "rope_theta": 1234.5, "rope_scaling": null, "torch_dtype": "float32", "use_cache": true})");
  LlamaConfig l = llama_config_from_json(v4);
  EXPECT_EQ(l.num_key_value_heads, 2);
  EXPECT_EQ(l.resolved_head_dim(), 4);
  EXPECT_EQ(l.rope_theta, 1234.5);
  EXPECT_EQ(l.rms_norm_eps, 1e-6);
  EXPECT_FALSE(l.tie_word_embeddings);
  // transformers 5 (rope_parameters), with a head_dim equal to the default.
  json::Value v5 = json::parse(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 4,
      "rope_parameters": {"rope_theta": 99.0, "rope_type": "default"}, "dtype": "float32"})");
  l = llama_config_from_json(v5);
  EXPECT_EQ(l.rope_theta, 99.0);
  EXPECT_EQ(l.head_dim, 0);
}

TEST(HfFolder, BadConfigsNameTheField) {
  auto with = [](const char* key, json::Value value) {
    json::Value v = llama_config_to_json(tiny());
    v.set(key, std::move(value));
    return v;
  };
  EXPECT_ERROR(llama_config_from_json(json::parse("[]")), "expected a JSON object");
  json::Value missing = llama_config_to_json(tiny());
  auto& o = missing.as_object();
  for (auto it = o.begin(); it != o.end(); ++it) {
    if (it->first == "hidden_size") {
      o.erase(it);
      break;
    }
  }
  EXPECT_ERROR(llama_config_from_json(missing), "missing required field \"hidden_size\"");
  EXPECT_ERROR(llama_config_from_json(with("hidden_size", "64")),
               "\"hidden_size\" must be an integer");
  EXPECT_ERROR(llama_config_from_json(with("rms_norm_eps", true)),
               "\"rms_norm_eps\" must be a number");
  EXPECT_ERROR(llama_config_from_json(with("model_type", "gemma")),
               "model_type is \"gemma\"; reprise supports llama, mistral, qwen2");
  EXPECT_ERROR(llama_config_from_json(with("hidden_act", "gelu")),
               "\"hidden_act\" is \"gelu\"; reprise's gated MLP supports \"silu\" and "
               "\"gelu_pytorch_tanh\"");
  EXPECT_ERROR(llama_config_from_json(with("clip_qkv", 8.0)), "\"clip_qkv\" is set");
  EXPECT_ERROR(llama_config_from_json(with("quantization_config", json::Object{{"bits", 4}})),
               "quantization_config");
  EXPECT_ERROR(llama_config_from_json(with("pretraining_tp", 2)), "pretraining_tp");
  EXPECT_ERROR(
      llama_config_from_json(with("rope_scaling", json::parse(R"({"rope_type":"llama3"})"))),
      "rope_scaling");
  EXPECT_ERROR(llama_config_from_json(with("num_key_value_heads", 3)),
               "not a multiple of num_key_value_heads 3");
  EXPECT_ERROR(llama_config_from_json(with("num_hidden_layers", 0), "my/config.json"),
               "my/config.json: LlamaConfig: num_hidden_layers must be positive");
}

TEST(HfFolder, MalformedFoldersGiveClearErrors) {
  rng::Generator gen(5);
  LlamaForCausalLM m(tiny(), gen);
  TempDir dir;
  EXPECT_ERROR(load_model(dir.str()), "config.json: cannot open");
  save_model(m, dir.str());
  const fs::path weights = dir.path / "model.safetensors", config = dir.path / "config.json";

  write_file(config, "{\"hidden_size\": 16,");
  EXPECT_ERROR(load_model(dir.str()), "config.json");
  write_file(config, json::dump(llama_config_to_json(tiny())));

  auto rewrite = [&](std::vector<std::pair<std::string, Tensor>> w) {
    io::write_safetensors(weights.string(), w);
  };
  auto all = weights_of(m);

  auto w = all;
  w.erase(w.begin() + 3);
  rewrite(w);
  EXPECT_ERROR(load_model(dir.str()),
               "missing tensor 'model.layers.0.self_attn.v_proj.weight' (f32[4, 16] cpu)");

  w = all;
  w[1].second = Tensor::zeros({16, 15});
  rewrite(w);
  EXPECT_ERROR(load_model(dir.str()),
               "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [16, 15], expected "
               "[16, 16]");

  w = all;
  w[1].second = Tensor::zeros({16, 16}, DType::i64);
  rewrite(w);
  EXPECT_ERROR(load_model(dir.str()), "has dtype I64; expected F32, BF16 or F16");

  w = all;
  w.emplace_back("model.layers.0.self_attn.q_proj.bias", Tensor::zeros({16}));
  rewrite(w);
  EXPECT_ERROR(load_model(dir.str()), "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'");

  // A config that says tied next to untied weights: the head must then
  // equal the embedding, and a random one does not.
  rewrite(all);
  write_file(config, json::dump(llama_config_to_json(tiny(true))));
  EXPECT_ERROR(load_model(dir.str()), "differs from 'model.embed_tokens.weight' although");
  write_file(config, json::dump(llama_config_to_json(tiny())));

  // A truncated weights file is refused by the safetensors reader.
  rewrite(all);
  fs::resize_file(weights, fs::file_size(weights) - 7);
  EXPECT_ERROR(load_model(dir.str()), "model.safetensors");

  // Nothing is written to a model unless every tensor checks out.
  w = all;
  w.back().second = Tensor::zeros({3});
  rewrite(w);
  LlamaForCausalLM target(tiny(), gen);
  const std::vector<float> before = target.parameters()[0].value.to_vector<float>();
  EXPECT_THROW(load_weights(target, weights.string()), Error);
  EXPECT_EQ(target.parameters()[0].value.to_vector<float>(), before);
}

TEST(HfFolder, TiedFolderMayCarryAnEqualHead) {
  rng::Generator gen(6);
  LlamaForCausalLM m(tiny(true), gen);
  TempDir dir;
  save_model(m, dir.str());
  auto w = weights_of(m);
  w.emplace_back("lm_head.weight", m.model.embed_tokens.weight().detach());
  io::write_safetensors((dir.path / "model.safetensors").string(), w);
  EXPECT_EQ(load_model(dir.str())->parameters()[0].value.to_vector<float>(),
            m.parameters()[0].value.to_vector<float>());
  w.back().second = Tensor::zeros(m.model.embed_tokens.weight().shape());
  io::write_safetensors((dir.path / "model.safetensors").string(), w);
  EXPECT_ERROR(load_model(dir.str()), "'lm_head.weight' differs from 'model.embed_tokens.weight'");
}

// ---- Limits on untrusted folders ----

TEST(HfFolder, LlamaSizeCountsEveryParameterWithoutBuildingTheModel) {
  LlamaConfig mixtral = tiny();
  mixtral.family = Family::mixtral;
  mixtral.moe = MoeConfig{.num_local_experts = 3, .num_experts_per_tok = 2};
  LlamaConfig shared = mixtral;
  shared.moe->n_shared_experts = 2;
  for (const LlamaConfig& c : {tiny(), tiny(true), mixtral, shared}) {
    SCOPED_TRACE(c.describe());
    rng::Generator gen(8);
    const LlamaForCausalLM m(c, gen);
    int64_t elements = 0;
    for (const NamedParameter& p : m.parameters()) elements += p.value.numel();
    const LlamaSize size = llama_size(c);
    EXPECT_EQ(size.tensors, int64_t(m.parameters().size()));
    EXPECT_EQ(size.elements, elements);
  }
  // By hand for tiny(): 2 (V C) + C + 2 layers of 2 C + (4 + 1 + 1 + 4) D C + 3 F C.
  EXPECT_EQ(llama_size(tiny()).elements, 2 * 40 * 16 + 16 + 2 * (32 + 10 * 4 * 16 + 3 * 24 * 16));
  EXPECT_EQ(llama_size(tiny()).tensors, 21);
}

TEST(HfFolder, ConfigClaimingAFarLargerModelThanItsWeightsIsRefusedBeforeBuildingIt) {
  rng::Generator gen(9);
  TempDir dir;
  save_model(LlamaForCausalLM(tiny(), gen), dir.str());
  const std::string config = (dir.path / "config.json").string();
  // A vocabulary of 10^9 would allocate 2 x 64 GB of f32 before the tensor
  // list could refute it.
  LlamaConfig big = tiny();
  big.vocab_size = 1000000000;
  write_file(dir.path / "config.json", json::dump(llama_config_to_json(big)));
  EXPECT_EQ(error_of([&] { load_model(dir.str()); }),
            dir.str() + ": " + config +
                " describes a model of 32000003664 weights (llama, hidden 16, 2 layers, 4 "
                "heads (1 kv) of 4, ffn 24, vocab 1000000000), but its tensors hold 19776 "
                "bytes, fewer than 2 per weight");
  // 20000 layers: more tensors than any safetensors file may hold.
  LlamaConfig deep = tiny();
  deep.num_hidden_layers = 20000;
  write_file(dir.path / "config.json", json::dump(llama_config_to_json(deep)));
  EXPECT_EQ(error_of([&] { load_model(dir.str()); }),
            dir.str() + ": " + config +
                " describes a model of 180003 tensors (llama, hidden 16, 20000 layers, 4 "
                "heads (1 kv) of 4, ffn 24, vocab 40), more than it may hold (131072)");
}

TEST(HfFolder, HeadDimTimesHeadsThatOverflowsIsAnErrorNotUndefinedBehaviour) {
  rng::Generator gen(10);
  TempDir dir;
  save_model(LlamaForCausalLM(tiny(), gen), dir.str());
  json::Value c = llama_config_to_json(tiny());
  c.set("head_dim", int64_t(1) << 62);  // times 4 heads: 2^64
  write_file(dir.path / "config.json", json::dump(c));
  EXPECT_EQ(read_llama_config(dir.str()).head_dim, int64_t(1) << 62);
  EXPECT_EQ(error_of([&] { load_model(dir.str()); }),
            "llama_size: the model of config (llama, hidden 16, 2 layers, 4 heads (1 kv) of "
            "4611686018427387904, ffn 24, vocab 40) has more than 2^63 - 1 weights");
}

TEST(HfFolder, ConfigJsonOverOneMiBIsRefused) {
  TempDir dir;
  fs::create_directories(dir.path);
  const fs::path config = dir.path / "config.json";
  const std::string text = json::dump(llama_config_to_json(tiny()));
  write_file(config, text + std::string((1 << 20) - text.size(), ' '));
  EXPECT_EQ(read_llama_config(dir.str()), tiny());  // exactly 1 MiB
  write_file(config, text + std::string((1 << 20) - text.size() + 1, ' '));
  EXPECT_EQ(error_of([&] { read_llama_config(dir.str()); }),
            "read_llama_config: " + config.string() +
                ": more than 1048576 bytes; a config.json has a few thousand");
}

// Qwen3.5's vision-language folder (tests/fixtures/nested_text_model.py:
// the qwen3_5_text case's weights inside Qwen3_5ForConditionalGeneration)
// loads as its text model: the config from text_config, the weights from
// model.language_model., the vision tower left alone.
TEST(HfFolder, AVisionLanguageFolderLoadsItsTextModel) {
  const std::string dir = testing::fixture_path("nested/qwen3_5");
  const LoadedModel nested = load_model_folder(dir);
  auto text = load_model(testing::fixture_path("families/qwen3_5_text"));
  EXPECT_EQ(nested.model->config(), text->config());
  EXPECT_TRUE(nested.unknown_config_fields.empty());
  const auto ours = nested.model->named_state(), theirs = text->named_state();
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].first, theirs[i].first);
    EXPECT_EQ(ours[i].second.to_vector<float>(), theirs[i].second.to_vector<float>())
        << ours[i].first;
  }
  json::Value bare = json::Object{};
  bare.set("model_type", "qwen3_5");
  testing::expect_error([&] { read_model_config(bare, "config.json"); },
                        {"config.json: model_type \"qwen3_5\" needs a \"text_config\" object (its "
                         "qwen3_5_text text model)"});
}

}  // namespace
}  // namespace reprise::nn
