// Checkpoints of a run whose optimizer state is split over the processes:
// each process saves its own moments, no process gathers them, and a run
// that splits its state in any other way (or not at all) resumes with the
// bits of the run that never stopped. A corrupted file on one process is
// an Error on every process.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "nn/train_state.h"
#include "parallel/process_group.h"
#include "tests/parallel/test_world.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_train.h"

namespace reprise::parallel {
namespace {

namespace fs = std::filesystem;

using testing::world;

// fresh_temp_dir for every process: rank 0 clears it, then all use it.
std::string shared_fresh_dir(const std::string& name) {
  if (world()->rank() == 0) testing::fresh_temp_dir(name);
  world()->barrier();
  return (fs::path(::testing::TempDir()) / ("reprise_" + name)).string();
}

// The per-process files in `dir`.
std::vector<std::string> shard_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("train_state.rank")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

nn::TrainConfig config() {
  nn::TrainConfig c = testing::tiny_train_config(32, 64, 4, 2, 16);
  c.model.dropout = 0.1;
  c.grad_clip = 0.05;
  return c;
}

std::shared_ptr<ProcessGroup> group(ShardMode mode) {
  return std::make_shared<ProcessGroup>(world(),
                                        ProcessGroupOptions{.shard = mode, .bucket_bytes = 16384});
}

TEST(ShardedTrainState, EachProcessSavesItsMomentsAndEveryShardModeResumesThem) {
  const int R = world()->size();
  const auto data = testing::builtin_corpus(1 << 16);
  const std::string dir = shared_fresh_dir("sharded_train_state");
  nn::Trainer run(config(), data, group(ShardMode::gradients));
  run.step();
  nn::save_train_state(run, dir);
  run.step();
  nn::save_train_state(run, dir);  // over the first: its files go
  const auto saved = run.optimizer().state();
  std::vector<nn::Trainer::StepStats> expected;
  for (int step = 0; step < 2; ++step) expected.push_back(run.step());
  const auto final_state = run.optimizer().state();

  // One file per process beside the main file, which holds no moments.
  world()->barrier();
  EXPECT_EQ(shard_files(dir).size(), size_t(R > 1 ? R : 0));
  const io::SafetensorsFile main = io::read_safetensors(nn::train_state_path(dir));
  for (const std::string& name : main.names())
    EXPECT_EQ(R > 1 && name.ends_with(".exp_avg"), false) << name;
  // Put together, the files hold the state one process would have saved.
  const auto whole = nn::read_train_state_tensors(dir);
  size_t k = 0;
  for (const auto& [name, value] : whole) {
    if (!name.starts_with("optimizer.")) continue;
    ASSERT_LT(k, saved.size());
    EXPECT_EQ(name, "optimizer." + saved[k].first);
    EXPECT_TRUE(testing::same_bits(value, saved[k].second)) << name;
    ++k;
  }
  EXPECT_EQ(k, saved.size());

  for (const ShardMode mode :
       {ShardMode::none, ShardMode::optimizer, ShardMode::gradients, ShardMode::parameters}) {
    SCOPED_TRACE(std::string("resumed with --shard ") + shard_mode_name(mode));
    nn::Trainer resumed(config(), data, group(mode));
    nn::load_train_state(resumed, dir);
    for (int step = 0; step < 2; ++step) {
      const nn::Trainer::StepStats b = resumed.step();
      EXPECT_EQ(expected[size_t(step)].loss, b.loss);
      EXPECT_EQ(expected[size_t(step)].grad_norm, b.grad_norm);
    }
    const auto state = resumed.optimizer().state();
    ASSERT_EQ(state.size(), final_state.size());
    for (size_t i = 0; i < state.size(); ++i)
      EXPECT_TRUE(testing::same_bits(state[i].second, final_state[i].second)) << state[i].first;
  }
}

TEST(ShardedTrainState, ACorruptedFileOfOneProcessIsAnErrorOnEvery) {
  const int R = world()->size();
  if (R < 2) GTEST_SKIP() << "one process keeps its moments in the main file";
  const auto data = testing::builtin_corpus(1 << 16);
  const std::string dir = shared_fresh_dir("sharded_train_state_corrupt");
  nn::Trainer run(config(), data, group(ShardMode::optimizer));
  run.step();
  nn::save_train_state(run, dir);
  world()->barrier();
  // The last process's file: a byte of its last tensor flipped.
  const std::vector<std::string> files = shard_files(dir);
  ASSERT_EQ(files.size(), size_t(R));
  const std::string last = files.back();
  ASSERT_TRUE(last.starts_with("train_state.rank" + std::to_string(R - 1) + "-of-")) << last;
  if (world()->rank() == 0) {
    std::fstream f((fs::path(dir) / last).string(),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  world()->barrier();

  nn::Trainer resumed(config(), data, group(ShardMode::optimizer));
  const auto before = resumed.optimizer().state();
  // The process that reads it names the tensor; the others name that process.
  const std::string e = testing::error_of([&] { nn::load_train_state(resumed, dir); });
  if (world()->rank() == R - 1) {
    EXPECT_NE(e.find(last), std::string::npos) << e;
    EXPECT_NE(e.find("is corrupted"), std::string::npos) << e;
  } else {
    EXPECT_NE(e.find("rank " + std::to_string(R - 1) + " of " + std::to_string(R) + " failed"),
              std::string::npos)
        << e;
  }
  // Nothing changed anywhere.
  const auto after = resumed.optimizer().state();
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(testing::same_bits(before[i].second, after[i].second)) << before[i].first;
}

}  // namespace
}  // namespace reprise::parallel
