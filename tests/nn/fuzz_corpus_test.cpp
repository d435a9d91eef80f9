// The fuzz targets' seeds (tests/fuzz_corpus, written by fuzz/make_seeds.cpp)
// are valid inputs that each reader accepts in full, so the fuzzers start
// from the deepest paths; a format change that breaks them fails here.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/seeds.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/hf.h"
#include "nn/signed_metadata.h"
#include "nn/train_state_shards.h"
#include "tests/support/temp_dir.h"

namespace reprise::nn {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> seeds(const std::string& target) {
  const fs::path dir = fs::path(REPRISE_FIXTURES_DIR) / ".." / "fuzz_corpus" / target;
  std::vector<fs::path> out(fs::directory_iterator(dir), {});
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_seed(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_seed(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(FuzzCorpus, JsonAndSafetensorsSeedsRead) {
  EXPECT_EQ(seeds("json").size(), 4u);
  for (const fs::path& p : seeds("json")) EXPECT_NO_THROW(json::parse(read_seed(p))) << p;
  EXPECT_EQ(seeds("safetensors").size(), 3u);
  for (const fs::path& p : seeds("safetensors")) {
    EXPECT_GT(io::load_safetensors(p.string()).size(), 0u) << p;
  }
}

TEST(FuzzCorpus, HfSeedsAreFoldersThatLoad) {
  const std::string dir = testing::fresh_temp_dir("fuzz_corpus_hf");
  fs::create_directories(dir);
  EXPECT_EQ(seeds("hf").size(), 6u);
  for (const fs::path& p : seeds("hf")) {
    SCOPED_TRACE(p.string());
    // config.json, a NUL, model.safetensors (fuzz/hf.cpp).
    const std::string bytes = read_seed(p);
    const size_t nul = bytes.find('\0');
    ASSERT_NE(nul, std::string::npos);
    write_seed(fs::path(dir) / "config.json", bytes.substr(0, nul));
    write_seed(fs::path(dir) / "model.safetensors", bytes.substr(nul + 1));
    EXPECT_EQ(load_model(dir)->config(), read_llama_config(dir));
  }
}

TEST(FuzzCorpus, TrainStateSeedsLoadIntoTheTrainerTheyDescribe) {
  const std::string dir = testing::fresh_temp_dir("fuzz_corpus_train_state");
  fs::create_directories(dir);
  EXPECT_EQ(seeds("train_state").size(), 2u);
  for (const fs::path& p : seeds("train_state")) {
    SCOPED_TRACE(p.string());
    write_seed(train_state_path(dir), read_seed(p));
    const TrainStateInfo info = read_train_state_info(dir);
    Trainer trainer(info.config, fuzz::seed_dataset());
    load_train_state(trainer, dir);
    EXPECT_EQ(trainer.steps_done(), 1);
  }
}

TEST(FuzzCorpus, OptimizerShardSeedsOpenAndReadInFull) {
  const std::string dir = testing::fresh_temp_dir("fuzz_corpus_optimizer_shard");
  fs::create_directories(dir);
  EXPECT_EQ(seeds("optimizer_shard").size(), 2u);
  for (const fs::path& p : seeds("optimizer_shard")) {
    SCOPED_TRACE(p.string());
    // Named by its JSON's hash, as a checkpoint lists it (fuzz/optimizer_shard.cpp).
    const std::string bytes = read_seed(p);
    const std::string text =
        io::read_safetensors(p.string()).metadata().at("reprise.optimizer_shard");
    const uint64_t hash = fnv1a64(text);
    write_seed(fs::path(dir) / moment_shard_name(0, 1, hash), bytes);
    const MomentShards shards(dir, {hash}, 1);
    EXPECT_GT(shards.numels().size(), 2u);
    for (const auto& [param, numel] : shards.numels())
      EXPECT_EQ(shards.read(param + ".exp_avg_sq", 0, numel).numel(), numel) << param;
    fs::remove(fs::path(dir) / moment_shard_name(0, 1, hash));
  }
}

}  // namespace
}  // namespace reprise::nn
