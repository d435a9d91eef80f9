// Writes the seed corpus of the fuzz targets: small valid inputs, one
// folder per target. Run from the repository root:
//
//   build/fuzz/fuzz/fuzz_make_seeds tests/fixtures tests/fuzz_corpus
//
// The output is the same on every run (fixed seeds, exact kernels), so the
// committed corpus can be checked by remaking it.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/threads.h"
#include "fuzz/seeds.h"
#include "io/safetensors.h"
#include "nn/hf.h"

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
  nn::save_llama(model, scratch.string(), dtype);
  return read_file(scratch / "config.json") + '\0' + read_file(scratch / "model.safetensors");
}

// A checkpoint after one step of the seed run, with `config`'s model.
std::string train_state_seed(const nn::TrainConfig& config, const fs::path& scratch) {
  nn::Trainer trainer(config, fuzz::seed_dataset());
  trainer.step();
  nn::save_train_state(trainer, scratch.string());
  return read_file(nn::train_state_path(scratch.string()));
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
    mixtral.moe = tiny_moe();
    write_seed(out / "hf" / "llama_f32", hf_seed(tiny_llama(), DType::f32, scratch / "llama"));
    write_seed(out / "hf" / "llama_tied_bf16", hf_seed(tied, DType::bf16, scratch / "tied"));
    write_seed(out / "hf" / "mixtral_f16", hf_seed(mixtral, DType::f16, scratch / "mixtral"));
    write_seed(out / "safetensors" / "llama_f32.safetensors",
               read_file(scratch / "llama" / "model.safetensors"));

    nn::TrainConfig moe_run = fuzz::seed_train_config();
    moe_run.model.moe = tiny_moe();
    const std::string dense_state = train_state_seed(fuzz::seed_train_config(), scratch / "dense");
    write_seed(out / "train_state" / "dense", dense_state);
    write_seed(out / "train_state" / "moe", train_state_seed(moe_run, scratch / "moe"));
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
