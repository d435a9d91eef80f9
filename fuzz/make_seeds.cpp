// Writes the seed corpus of the fuzz targets: small valid inputs, one
// folder per target. Run from the repository root:
//
//   build/fuzz/fuzz/fuzz_make_seeds tests/fixtures tests/fuzz_corpus
//
// The output is the same on every run (fixed seeds, exact kernels), so the
// committed corpus can be checked by remaking it.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/threads.h"
#include "fuzz/seeds.h"
#include "io/safetensors.h"
#include "io/safetensors_folder.h"
#include "nn/hf.h"
#include "nn/train_state_shards.h"

using namespace reprise;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_seed(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw std::runtime_error("cannot write " + path.string());
  std::printf("%8zu  %s\n", bytes.size(), path.string().c_str());
}

// A one-layer Llama of hidden 4 with a vocabulary of 16: about 250 weights.
nn::LlamaConfig tiny_llama() {
  nn::LlamaConfig c;
  c.vocab_size = 16;
  c.hidden_size = 4;
  c.intermediate_size = 4;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 16;
  return c;
}

nn::MoeConfig tiny_moe() {
  nn::MoeConfig m;
  m.num_local_experts = 2;
  m.num_experts_per_tok = 1;
  m.n_shared_experts = 1;
  return m;
}

// The hf target's input for a folder: config.json, a NUL, model.safetensors.
std::string hf_seed(const nn::LlamaConfig& config, DType dtype, const fs::path& scratch) {
  rng::Generator gen(7);
  const nn::LlamaForCausalLM model(config, gen);
  nn::save_model(model, scratch.string(), dtype);
  return read_file(scratch / "config.json") + '\0' + read_file(scratch / "model.safetensors");
}

// The safetensors_index target's input for `tensors` cut into two shards:
// the index, a NUL, shard 1's length (4 bytes, little-endian), shard 1,
// shard 2. Half the bytes plus the largest tensor per shard makes exactly two.
std::string index_seed(const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const fs::path& scratch) {
  uint64_t total = 0, largest = 0;
  for (const auto& [name, t] : tensors) {
    total += t.nbytes();
    largest = std::max<uint64_t>(largest, t.nbytes());
  }
  io::write_safetensors_folder(scratch.string(), tensors, {{"format", "pt"}},
                               (total + 1) / 2 + largest);
  const fs::path second = scratch / "model-00002-of-00002.safetensors";
  if (!fs::exists(second))
    throw std::runtime_error("the seed is not two shards: " + second.string());
  const std::string first = read_file(scratch / "model-00001-of-00002.safetensors");
  std::string length(4, '\0');
  for (size_t i = 0; i < 4; ++i) length[i] = char(uint8_t(first.size() >> (8 * i)));
  return read_file(scratch / "model.safetensors.index.json") + '\0' + length + first +
         read_file(second);
}

// A checkpoint after one step of the seed run, with `config`'s model.
std::string train_state_seed(const nn::TrainConfig& config, const fs::path& scratch) {
  nn::Trainer trainer(config, fuzz::seed_dataset());
  trainer.step();
  nn::save_train_state(trainer, scratch.string());
  return read_file(nn::train_state_path(scratch.string()));
}

// One process's file of optimizer moments after one step of the seed run
// (an unsplit optimizer keeps every parameter whole).
std::string optimizer_shard_seed(const nn::TrainConfig& config, const fs::path& scratch) {
  nn::Trainer trainer(config, fuzz::seed_dataset());
  trainer.step();
  fs::create_directories(scratch);
  const uint64_t hash =
      nn::write_moment_shard(scratch.string(), 0, 1, 1, trainer.optimizer().kept_moments());
  return read_file(scratch / nn::moment_shard_name(0, 1, hash));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FIXTURES_DIR CORPUS_DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path fixtures = argv[1], out = argv[2];
    const fs::path scratch = fs::temp_directory_path() / "reprise_fuzz_make_seeds";
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    threads::set_num_threads(1);

    for (const char* name : {"llama_tiny", "mixtral_tiny"}) {
      write_seed(out / "json" / (std::string(name) + "_config.json"),
                 read_file(fixtures / name / "config.json"));
    }
    write_seed(out / "json" / "escapes_and_numbers.json",
               R"({"s": "a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00 \u0000", "n": [0, -0, -1, 1.5e-3, )"
               R"(1E+308, 9223372036854775807, 9223372036854775808, 4.9e-324], )"
               R"("l": [true, false, null, [], {}, [[{"k": []}]]]})");

    for (const char* name : {"io_golden", "io_torch"}) {
      const std::string file = std::string(name) + ".safetensors";
      write_seed(out / "safetensors" / file, read_file(fixtures / file));
    }

    nn::LlamaConfig tied = tiny_llama();
    tied.tie_word_embeddings = true;
    nn::LlamaConfig mixtral = tiny_llama();
    mixtral.family = nn::Family::mixtral;
    mixtral.moe = tiny_moe();
    write_seed(out / "hf" / "llama_f32", hf_seed(tiny_llama(), DType::f32, scratch / "llama"));
    write_seed(out / "hf" / "llama_tied_bf16", hf_seed(tied, DType::bf16, scratch / "tied"));
    write_seed(out / "hf" / "mixtral_f16", hf_seed(mixtral, DType::f16, scratch / "mixtral"));
    // The families whose config.json has the most pieces to read (a rope
    // per layer type, layer_types, Gemma's fields, pad_token_id; GPT-OSS's
    // fused experts), shrunk to a few KB: a fuzzer's inputs grow from its
    // seeds.
    for (const char* name : {"gemma3_text", "olmo3", "gpt_oss"}) {
      nn::LlamaConfig c = nn::read_llama_config((fixtures / "families" / name).string());
      c.vocab_size = 16;
      c.hidden_size = c.intermediate_size = 8;
      c.num_hidden_layers = 2;
      c.num_attention_heads = 2;
      c.num_key_value_heads = 1;
      c.head_dim = 4;
      c.sliding_window = 4;
      c.layer_types = {nn::LayerAttention::sliding, nn::LayerAttention::full};
      if (c.moe) {
        c.moe->num_local_experts = 2;
        c.moe->num_experts_per_tok = 1;
      }
      write_seed(out / "hf" / (std::string(name) + "_bf16"),
                 hf_seed(c, DType::bf16, scratch / name));
    }
    write_seed(out / "safetensors" / "llama_f32.safetensors",
               read_file(scratch / "llama" / "model.safetensors"));

    const std::map<std::string, Tensor> tied_weights =
        io::load_safetensors((scratch / "tied" / "model.safetensors").string());
    write_seed(out / "safetensors_index" / "llama_tied_bf16",
               index_seed({tied_weights.begin(), tied_weights.end()}, scratch / "index_llama"));
    const std::vector<std::pair<std::string, Tensor>> every_dtype = {
        {"f32", Tensor::full({2, 3}, -1.5)},
        {"f64", Tensor::full({3}, 0.25, DType::f64)},
        {"bf16", Tensor::full({5}, 3.0, DType::bf16)},
        {"f16", Tensor::full({4}, -0.5, DType::f16)},
        {"i64", Tensor::arange(3)},
        {"i32", Tensor::arange(4, DType::i32)},
        {"bool", Tensor::ones({3}, DType::boolean)},
        {"empty", Tensor::empty({0, 2})}};
    const std::string dtypes = index_seed(every_dtype, scratch / "index_dtypes");
    write_seed(out / "safetensors_index" / "every_dtype", dtypes);
    write_seed(out / "safetensors_index" / "index_only", dtypes.substr(0, dtypes.find('\0')));

    nn::TrainConfig moe_run = fuzz::seed_train_config();
    moe_run.model.family = nn::Family::mixtral;
    moe_run.model.moe = tiny_moe();
    const std::string dense_state = train_state_seed(fuzz::seed_train_config(), scratch / "dense");
    write_seed(out / "train_state" / "dense", dense_state);
    write_seed(out / "train_state" / "moe", train_state_seed(moe_run, scratch / "moe"));
    write_seed(out / "optimizer_shard" / "dense",
               optimizer_shard_seed(fuzz::seed_train_config(), scratch / "shard_dense"));
    write_seed(out / "optimizer_shard" / "moe",
               optimizer_shard_seed(moe_run, scratch / "shard_moe"));
    write_seed(out / "json" / "train_state.json",
               io::read_safetensors(nn::train_state_path((scratch / "dense").string()))
                   .metadata()
                   .at("reprise.train_state"));
    fs::remove_all(scratch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
