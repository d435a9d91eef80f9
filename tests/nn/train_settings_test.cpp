// The run settings' rows (nn/train_settings.h): for every row, what the
// row generates (the JSON field, its reading back, the resume difference,
// the check and, for a newer field, the default an older file reads as)
// holds for that row's member and no other.

#include "nn/train_settings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "io/json.h"
#include "nn/train_config.h"
#include "tests/support/expect_error.h"

namespace reprise::nn {
namespace {

using testing::expect_error;

// A valid value other than the default.
int64_t other_value(int64_t v) { return v + 3; }
double other_value(double v) { return v == 0 ? 0.25 : v / 2; }
uint64_t other_value(uint64_t v) { return v ^ 0xF000000000000001ull; }  // beyond int64
DType other_value(DType v) { return v == DType::f32 ? DType::bf16 : DType::f32; }

// A value the row's check refuses.
int64_t refused_value(int64_t) { return -1; }
double refused_value(double) { return -0.5; }
DType refused_value(DType) { return DType::f16; }

json::Value without(json::Value v, const std::string& key) {
  std::erase_if(v.as_object(), [&](const auto& member) { return member.first == key; });
  return v;
}

struct Row {
  std::string name;
  bool kept, defaulted;
};

std::vector<Row> rows() {
  std::vector<Row> out;
#define REPRISE_LIST_SETTING(type, name, default_value, check, on_resume, if_absent, ...) \
  out.push_back(                                                                          \
      {#name, OnResume::on_resume == OnResume::kept, IfAbsent::if_absent == IfAbsent::defaulted});
  REPRISE_TRAIN_SETTINGS(REPRISE_LIST_SETTING)
#undef REPRISE_LIST_SETTING
  return out;
}

TEST(TrainSettings, EveryRowIsStoredReadBackAndComparedAsItself) {
  const TrainConfig base;
  base.validate();
  const json::Value stored = base.to_json();
  const std::vector<Row> all = rows();
  size_t seen = 0;
#define REPRISE_TRY_SETTING(type, name, ...)                                                    \
  {                                                                                             \
    SCOPED_TRACE(#name);                                                                        \
    TrainConfig changed = base;                                                                 \
    changed.name = other_value(base.name);                                                      \
    changed.validate();                                                                         \
    const json::Value v = json::parse(json::dump(changed.to_json()));                           \
    const TrainConfig back = TrainConfig::from_json(v, "cfg");                                  \
    EXPECT_TRUE(back.name == changed.name);                                                     \
    EXPECT_TRUE(back.run_differences(changed).empty());                                         \
    const Row& row = all[seen++];                                                               \
    const std::vector<std::string> diffs = base.run_differences(changed);                       \
    if (row.kept) {                                                                             \
      ASSERT_EQ(diffs.size(), 1u);                                                              \
      EXPECT_EQ(diffs[0].rfind(#name " ", 0), 0u) << diffs[0];                                  \
    } else {                                                                                    \
      EXPECT_TRUE(diffs.empty());                                                               \
    }                                                                                           \
    const json::Value older = without(v, #name);                                                \
    if (row.defaulted) {                                                                        \
      EXPECT_TRUE(TrainConfig::from_json(older, "cfg").name == base.name);                      \
    } else {                                                                                    \
      expect_error([&] { TrainConfig::from_json(older, "cfg"); },                               \
                   {"cfg", "missing field \"" #name "\""});                                     \
    }                                                                                           \
    json::Value wrong_kind = v;                                                                 \
    wrong_kind.set(#name, json::Array{});                                                       \
    expect_error([&] { TrainConfig::from_json(wrong_kind, "cfg"); }, {"cfg", "\"" #name "\""}); \
  }
  REPRISE_TRAIN_SETTINGS(REPRISE_TRY_SETTING)
#undef REPRISE_TRY_SETTING
  EXPECT_EQ(seen, all.size());
  EXPECT_EQ(stored.as_object().size(), all.size() + 1 /* model */ + 6 /* checkpointing */);
}

// Unless the row takes any value: a refused one is an error naming it.
template <class T, class Check>
void expect_refused(T TrainConfig::*field, const std::string& name, Check) {
  if constexpr (!std::is_same_v<Check, train_setting::AnyValue>) {
    SCOPED_TRACE(name);
    TrainConfig bad;
    bad.*field = refused_value(bad.*field);
    expect_error([&] { bad.validate(); }, {"TrainConfig: " + name + " must be"});
  }
}

TEST(TrainSettings, EveryCheckedRowRefusesAValueOutOfRangeNamingItself) {
#define REPRISE_REFUSE_SETTING(type, name, default_value, check, ...) \
  expect_refused(&TrainConfig::name, #name, train_setting::check);
  REPRISE_TRAIN_SETTINGS(REPRISE_REFUSE_SETTING)
#undef REPRISE_REFUSE_SETTING
}

TEST(TrainSettings, ChecksSayTheRangeAndTheValue) {
  TrainConfig c;
  c.beta2 = 1;
  expect_error([&] { c.validate(); }, {"TrainConfig: beta2 must be in [0, 1), got 1"});
  c = TrainConfig{};
  c.lr = 0;
  expect_error([&] { c.validate(); }, {"TrainConfig: lr must be > 0, got 0"});
  c.lr = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { c.validate(); }, {"TrainConfig: lr must be > 0"});
  c = TrainConfig{};
  c.min_lr = 2 * c.lr;  // within its row's range, beyond lr
  expect_error([&] { c.validate(); }, {"min_lr must be at most lr"});
  c = TrainConfig{};
  c.seq = c.model.max_position_embeddings + 1;
  expect_error([&] { c.validate(); }, {"seq must be at most the model's max_position_embeddings"});
}

}  // namespace
}  // namespace reprise::nn
