// The per-process files of a split optimizer state: pieces of each
// parameter's moments, read back across file boundaries exactly, with
// every way the set can be wrong (a gap, an overlap, another step, a file
// missing, renamed or corrupted) an Error that names it.

#include "nn/train_state_shards.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"

namespace reprise::nn {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

// Elements [begin, end) of a parameter of `numel`, its moments
// exp_avg[i] = i and exp_avg_sq[i] = -i.
AdamW::MomentSlice slice(const std::string& param, int64_t begin, int64_t end, int64_t numel) {
  std::vector<float> avg, sq;
  for (int64_t i = begin; i < end; ++i) {
    avg.push_back(float(i));
    sq.push_back(-float(i));
  }
  return {param,
          begin,
          end,
          numel,
          Tensor::from_vector(avg, {end - begin}),
          Tensor::from_vector(sq, {end - begin})};
}

// Two processes' files of parameters "a" (10 elements, split at `cut`,
// rank 1 starting at `second`) and "b" (3, whole on rank 0), at step 7.
std::vector<uint64_t> write_two(const std::string& dir, int64_t cut, int64_t second) {
  fs::create_directories(dir);
  return {write_moment_shard(dir, 0, 2, 7, {slice("a", 0, cut, 10), slice("b", 0, 3, 3)}),
          write_moment_shard(dir, 1, 2, 7, {slice("a", second, 10, 10)})};
}

TEST(MomentShards, ReadsAnyRangeAcrossTheFiles) {
  const std::string dir = testing::fresh_temp_dir("moment_shards");
  const std::vector<uint64_t> hashes = write_two(dir, 6, 6);
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / moment_shard_name(r, 2, hashes[size_t(r)])));
  const MomentShards shards(dir, hashes, 7);
  EXPECT_EQ(shards.numels(), (std::map<std::string, int64_t>{{"a", 10}, {"b", 3}}));
  EXPECT_EQ(shards.read("a.exp_avg", 4, 9).to_vector<float>(), (std::vector<float>{4, 5, 6, 7, 8}));
  EXPECT_EQ(shards.read("a.exp_avg_sq", 0, 10).to_vector<float>()[9], -9.0f);
  EXPECT_EQ(shards.read("b.exp_avg", 1, 3).to_vector<float>(), (std::vector<float>{1, 2}));
  expect_error([&] { shards.read("c.exp_avg", 0, 1); }, {"no moment 'c.exp_avg'"});
  expect_error([&] { shards.read("a.exp_avg", 5, 11); }, {"[5, 11)", "which has 10"});
}

TEST(MomentShards, NamesAGapAnOverlapAnotherStepAndAMissingFile) {
  const std::string dir = testing::fresh_temp_dir("moment_shards_bad");
  expect_error([&] { MomentShards(dir + "/gap", write_two(dir + "/gap", 6, 7), 7); },
               {"no moments for elements [6, 7) of 'a'"});
  expect_error([&] { MomentShards(dir + "/overlap", write_two(dir + "/overlap", 6, 5), 7); },
               {"rank1-of-2", "elements [5, 6) of 'a' are in another rank's file too"});
  const std::vector<uint64_t> hashes = write_two(dir + "/ok", 6, 6);
  expect_error([&] { MomentShards(dir + "/ok", hashes, 8); },
               {"rank0-of-2", "at step 7", "at step 8"});
  // A file listed under another name than its contents' hash.
  fs::rename(fs::path(dir) / "ok" / moment_shard_name(1, 2, hashes[1]),
             fs::path(dir) / "ok" / moment_shard_name(1, 2, hashes[1] ^ 1));
  expect_error(
      [&] {
        MomentShards(dir + "/ok", {hashes[0], hashes[1] ^ 1}, 7);
      },
      {"does not have the hash the checkpoint lists"});
  expect_error([&] { MomentShards(dir + "/ok", hashes, 7); },
               {"no optimizer shard at", "rank 1 of 2"});
}

TEST(MomentShards, ACorruptedTensorIsNamedWhenItIsRead) {
  const std::string dir = testing::fresh_temp_dir("moment_shards_flip");
  const std::vector<uint64_t> hashes = write_two(dir, 6, 6);
  {
    std::fstream f(fs::path(dir) / moment_shard_name(1, 2, hashes[1]),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  const MomentShards shards(dir, hashes, 7);
  EXPECT_EQ(shards.read("a.exp_avg", 0, 6).to_vector<float>()[5], 5.0f);  // rank 0's
  expect_error([&] { shards.read("a.exp_avg_sq", 0, 10); },
               {"rank1-of-2", "'a.exp_avg_sq'", "is corrupted"});
}

TEST(MomentShards, RemovesWhatNoCheckpointListsAndTemporaries) {
  const std::string dir = testing::fresh_temp_dir("moment_shards_stale");
  const std::vector<uint64_t> old = write_two(dir, 6, 6);
  const std::vector<uint64_t> fresh = write_two(dir, 4, 4);
  std::ofstream(fs::path(dir) / "train_state.rank0-of-2.0.safetensors.tmp.12.0") << "torn";
  std::ofstream(fs::path(dir) / "notes.txt") << "kept";
  remove_train_state_temporaries(dir);
  remove_unlisted_moment_shards(dir, 2, fresh);
  std::set<std::string> left;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{moment_shard_name(0, 2, fresh[0]),
                                         moment_shard_name(1, 2, fresh[1]), "notes.txt"}));
  remove_unlisted_moment_shards(dir, 2, {});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace reprise::nn
