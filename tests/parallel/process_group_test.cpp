// What a Trainer asks of its processes: gathers in the order one process
// lists its state, the replica check, and a Trainer on one process that
// takes the parallel path giving the bits of one that does not.
#include "parallel/process_group.h"

#include <gtest/gtest.h>

#include "engine/grad_mode.h"
#include "engine/memory_stats.h"
#include "parallel/single_process.h"
#include "tests/parallel/test_world.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tiny_train.h"

namespace reprise::parallel {
namespace {

using testing::world;

TEST(ProcessGroup, AllGatherConcatenatesInRankOrder) {
  ProcessGroup group(world(), {});
  const std::vector<double> all = group.all_gather({double(group.rank()), 0.5});
  ASSERT_EQ(all.size(), size_t(2 * group.size()));
  for (int r = 0; r < group.size(); ++r) EXPECT_EQ(all[size_t(2 * r)], double(r));
}

TEST(ProcessGroup, GatherNamedSplicesEachRanksExpertsInRankOrder) {
  ProcessGroup group(world(), {.expert_parallel = true});
  const int R = group.size(), me = group.rank();
  // Two layers' experts 2r and 2r + 1 on rank r, replicated entries around them.
  auto expert = [](int layer, int e) {
    return "model.layers." + std::to_string(layer) + ".block_sparse_moe.experts." +
           std::to_string(e) + ".w1.weight";
  };
  std::vector<std::pair<std::string, Tensor>> local{{"embed", Tensor::full({2}, 1.0)}};
  for (int layer = 0; layer < 2; ++layer) {
    local.emplace_back("gate" + std::to_string(layer), Tensor::full({1}, double(layer)));
    for (int e = 2 * me; e < 2 * me + 2; ++e) {
      local.emplace_back(expert(layer, e), Tensor::full({3}, double(100 * layer + e)));
    }
  }
  local.emplace_back("head", Tensor::full({1}, 7.0));
  std::vector<std::string> names{"embed"};
  for (int layer = 0; layer < 2; ++layer) {
    names.push_back("gate" + std::to_string(layer));
    for (int e = 0; e < 2 * R; ++e) names.push_back(expert(layer, e));
  }
  names.push_back("head");
  for (const bool everyone : {false, true}) {
    const auto merged = group.gather_named(local, everyone);
    if (!everyone && me != 0) {
      EXPECT_TRUE(merged.empty());
      continue;
    }
    ASSERT_EQ(merged.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(merged[i].first, names[i]);
    EXPECT_EQ(merged[2 + 2 * R - 1].second.to_vector<float>(),
              std::vector<float>(3, float(2 * R - 1)));
  }
}

TEST(ProcessGroup, ReplicaCheckNamesAParameterThatDiffers) {
  ProcessGroup group(world(), {});
  Tensor w = Tensor::ones({5}).requires_grad(true);
  group.attach({{"w", w}}, {0});
  group.check_replicas();  // equal replicas pass
  if (group.size() < 2) GTEST_SKIP() << "a difference needs 2 ranks";
  {
    NoGradGuard no_grad;
    if (group.rank() == 1) w.fill_(2.0);
  }
  testing::expect_error([&] { group.check_replicas(); },
                        {"replica check", "differ from rank 0's", "'w' (rank 1)"});
}

// A Trainer of one process through the parallel path (buckets, gathers,
// sample slices) gives the bits of one without a group, with gradient
// accumulation and dropout.
TEST(ProcessGroup, OneProcessTrainerGivesTheBitsOfAPlainOne) {
  nn::TrainConfig c = testing::tiny_train_config(32, 64, 2, 2, 16);
  c.grad_accum = 2;
  c.model.dropout = 0.1;
  c.model.attention_dropout = 0.1;
  const auto data = testing::builtin_corpus(1 << 16);
  nn::Trainer plain(c, data);
  nn::Trainer grouped(c, data,
                      std::make_shared<ProcessGroup>(std::make_shared<SingleProcessCommunicator>(),
                                                     ProcessGroupOptions{.bucket_bytes = 4096}));
  for (int step = 0; step < 2; ++step) {
    const nn::Trainer::StepStats a = plain.step(), b = grouped.step();
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.grad_norm, b.grad_norm);
  }
  const auto pa = plain.model().parameters(), pb = grouped.model().parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].value.to_vector<float>(), pb[i].value.to_vector<float>()) << pa[i].name;
  }
  EXPECT_EQ(plain.generator().state(), grouped.generator().state());
  EXPECT_EQ(plain.evaluate(2), grouped.evaluate(2));
}

// The optimizer state split over the processes (ZeRO-1), the gradients too
// (ZeRO-2) and the parameters too (ZeRO-3, with and without full
// checkpointing) give the bits of replicated state: the same losses,
// clipped norms, weights and (gathered) optimizer state, with dropout and
// gradient accumulation, each process keeping the state of its blocks
// only. One process: a no-op.
TEST(ProcessGroup, ShardedStateGivesTheBitsOfReplicatedState) {
  nn::TrainConfig c = testing::tiny_train_config(32, 64, 3, 2, 16);
  c.model.dropout = 0.1;
  c.grad_accum = 2;
  c.grad_clip = 0.05;  // below the norms: every step clips
  const auto data = testing::builtin_corpus(1 << 16);
  const int R = world()->size();
  nn::Trainer replicated(c, data, std::make_shared<ProcessGroup>(world(), ProcessGroupOptions{}));
  std::vector<nn::Trainer::StepStats> expected;
  for (int step = 0; step < 3; ++step) expected.push_back(replicated.step());
  const auto pa = replicated.model().parameters();
  const auto sa = replicated.optimizer().state();
  struct Case {
    ShardMode mode;
    const char* policy;
  };
  for (const Case& k : {Case{ShardMode::optimizer, "none"}, Case{ShardMode::gradients, "none"},
                        Case{ShardMode::parameters, "none"}, Case{ShardMode::parameters, "full"}}) {
    SCOPED_TRACE(std::string(shard_mode_name(k.mode)) + " under " + k.policy);
    nn::TrainConfig ck = c;
    ck.checkpointing.set_policy(k.policy);
    const ProcessGroupOptions options{.shard = k.mode, .bucket_bytes = 16384};
    const int64_t before = memory_stats::snapshot()[MemoryKind::optimizer_state].live;
    nn::Trainer sharded(ck, data, std::make_shared<ProcessGroup>(world(), options));
    const int64_t kept = memory_stats::snapshot()[MemoryKind::optimizer_state].live - before;
    const nn::AdamW& adam = sharded.optimizer();
    EXPECT_EQ(adam.shard().has_value(), R > 1);
    EXPECT_EQ(sharded.parameter_shards() != nullptr, R > 1 && k.mode == ShardMode::parameters);
    // Two f32 moments per element it keeps: its blocks.
    EXPECT_EQ(kept, 8 * adam.kept_elements());
    if (R > 1) {
      int64_t blocks = 0;
      for (const nn::ShardLayout::Bucket& b : adam.shard()->layout.buckets) blocks += b.block;
      EXPECT_EQ(adam.kept_elements(), blocks);
    }
    for (int step = 0; step < 3; ++step) {
      const nn::Trainer::StepStats b = sharded.step();
      EXPECT_EQ(expected[size_t(step)].loss, b.loss);
      EXPECT_EQ(expected[size_t(step)].grad_norm, b.grad_norm);
      EXPECT_GT(b.grad_norm, c.grad_clip);
    }
    {
      const nn::ParameterShards::Whole whole(sharded.parameter_shards());
      const auto pb = sharded.model().parameters();
      for (size_t i = 0; i < pa.size(); ++i) {
        EXPECT_EQ(pa[i].value.to_vector<float>(), pb[i].value.to_vector<float>()) << pa[i].name;
      }
    }
    const auto sb = adam.state();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].first, sb[i].first);
      EXPECT_TRUE(testing::same_bits(sa[i].second, sb[i].second)) << sa[i].first;
    }
    EXPECT_EQ(replicated.evaluate(2), sharded.evaluate(2));
    // A state loaded into a fresh sharded run gathers back to itself.
    nn::Trainer loaded(ck, data, std::make_shared<ProcessGroup>(world(), options));
    std::map<std::string, Tensor> state(sa.begin(), sa.end());
    loaded.optimizer().load_state(state);
    const auto sc = loaded.optimizer().state();
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_TRUE(testing::same_bits(sa[i].second, sc[i].second)) << sa[i].first;
    }
  }
}

// With the parameters split, a decoder layer's parameters are whole only
// around their use: between steps every shared parameter's memory is given
// back, and reading one is an Error that says why.
TEST(ProcessGroup, SplitParametersAreGivenBackBetweenSteps) {
  if (world()->size() < 2) GTEST_SKIP() << "one process splits nothing";
  nn::TrainConfig c = testing::tiny_train_config(32, 64, 2, 2, 16);
  const auto data = testing::builtin_corpus(1 << 16);
  nn::Trainer t(
      c, data,
      std::make_shared<ProcessGroup>(world(), ProcessGroupOptions{.shard = ShardMode::parameters}));
  t.step();
  const nn::NamedParameter q = t.model().parameters()[1];
  EXPECT_FALSE(q.value.storage()->resident()) << q.name;
  testing::expect_error([&] { q.value.to_vector<float>(); },
                        {"was given back", q.name.empty() ? "" : "f32"});
  {
    const nn::ParameterShards::Whole whole(t.parameter_shards());
    EXPECT_TRUE(q.value.storage()->resident());
    EXPECT_EQ(q.value.to_vector<float>().size(), size_t(q.value.numel()));
  }
  EXPECT_FALSE(q.value.storage()->resident());
}

TEST(ProcessGroup, ShardModesParse) {
  for (const ShardMode m :
       {ShardMode::none, ShardMode::optimizer, ShardMode::gradients, ShardMode::parameters}) {
    EXPECT_EQ(parse_shard_mode(shard_mode_name(m)), m);
  }
  testing::expect_error([] { parse_shard_mode("all"); },
                        {"expected none, optimizer, gradients or parameters", "'all'"});
}

}  // namespace
}  // namespace reprise::parallel
