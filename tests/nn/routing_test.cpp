// Routing records (nn/routing.h): from plain arrays, to a safetensors file
// and back bit for bit, and every malformed record or file an Error.
#include "nn/routing.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "io/safetensors.h"
#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"

namespace reprise::nn {
namespace {

using testing::expect_error;

const std::vector<std::string> kLayers{"model.layers.0.mlp", "model.layers.1.mlp"};

// P positions of 2 layers, top-2 of 300 experts (ids past 255: two bytes).
RoutingRecord record(int64_t P, int64_t seed) {
  std::vector<int64_t> experts, margin;
  for (int64_t i = 0; i < P * 2; ++i) {
    experts.push_back((i * 37 + seed) % 300);
    experts.push_back((i * 37 + seed + 1) % 300);
    margin.push_back(i * 1000 + seed);
  }
  return routing_record(kLayers, 300, Tensor::from_vector(experts, {P, 2, 2}),
                        Tensor::from_vector(margin, {P, 2}));
}

TEST(RoutingRecords, FromPlainArrays) {
  const RoutingRecord r = record(3, 5);
  EXPECT_EQ(r.positions, 3);
  EXPECT_EQ(r.k, 2);
  EXPECT_EQ(r.expert(1, 1, 0), (3 * 37 + 5) % 300);
  EXPECT_EQ(r.margin[3], 3005);
  // i32 ids and no margins do as well.
  const RoutingRecord plain =
      routing_record(kLayers, 4, Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3}, {1, 2, 2}));
  EXPECT_EQ(plain.margin, (std::vector<int64_t>{0, 0}));
  expect_error(
      [] {
        routing_record(kLayers, 4,
                       Tensor::from_vector(std::vector<int64_t>{0, 1, 4, 3}, {1, 2, 2}));
      },
      {"expert id 4", "[0, 4)"});
  expect_error(
      [] {
        routing_record(kLayers, 4,
                       Tensor::from_vector(std::vector<int64_t>{0, 1, 3, 3}, {1, 2, 2}));
      },
      {"position 0 of layer 'model.layers.1.mlp'", "expert 3 twice"});
  expect_error(
      [] {
        routing_record(kLayers, 4, Tensor::zeros({1, 3, 2}, DType::i64));
      },
      {"experts (P, L = 2, k)", "i64[1, 3, 2]"});
  expect_error([] { routing_record(kLayers, 4, Tensor::zeros({1, 2, 2})); }, {"integer dtype"});
}

TEST(RoutingCapture, NestsAndCloses) {
  EXPECT_EQ(current_routing_capture(), nullptr);
  {
    RoutingCapture outer;
    {
      RoutingCapture inner;
      EXPECT_EQ(current_routing_capture(), &inner);
      inner.close();
      EXPECT_EQ(current_routing_capture(), &outer);
      inner.close();  // again: nothing
      EXPECT_EQ(current_routing_capture(), &outer);
    }
    EXPECT_EQ(current_routing_capture(), &outer);
  }
  EXPECT_EQ(current_routing_capture(), nullptr);
}

// A guard may close out of order (a Python object collected late) or be
// destroyed on another thread: what stays open is still found, and nothing
// dangles.
TEST(RoutingCapture, ClosesInAnyOrderAndOnAnyThread) {
  auto outer = std::make_unique<RoutingCapture>();
  auto inner = std::make_unique<RoutingCapture>();
  outer.reset();
  EXPECT_EQ(current_routing_capture(), inner.get());
  inner.reset();
  EXPECT_EQ(current_routing_capture(), nullptr);

  auto here = std::make_unique<RoutingCapture>();
  std::thread([&] {
    EXPECT_EQ(current_routing_capture(), nullptr);  // another thread's own
    here.reset();
  }).join();
  EXPECT_EQ(current_routing_capture(), nullptr);
}

TEST(RoutingRecords, RoundTripThroughAFileBitForBit) {
  const std::string dir = testing::fresh_temp_dir("routing");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/records.safetensors";
  const std::vector<RoutingRecord> records{record(3, 5), record(7, 11), record(1, 2)};
  save_routing_records(path, records);
  const std::vector<RoutingRecord> back = load_routing_records(path);
  ASSERT_EQ(back.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(back[i].layers, records[i].layers);
    EXPECT_EQ(back[i].num_experts, 300);
    EXPECT_EQ(back[i].k, 2);
    EXPECT_EQ(back[i].positions, records[i].positions);
    EXPECT_EQ(back[i].experts, records[i].experts);
    EXPECT_EQ(back[i].margin, records[i].margin);
  }
  // The experts are U16, as plain arrays for any reader.
  const io::SafetensorsFile file = io::read_safetensors(path);
  EXPECT_EQ(file.info("1.experts").dtype_name, "U16");
  EXPECT_EQ(file.info("1.experts").shape, (Shape{7, 2, 2}));
  EXPECT_EQ(file.metadata().at("layers"), "model.layers.0.mlp,model.layers.1.mlp");
}

TEST(RoutingRecords, AFileThatIsNotOneIsAnError) {
  const std::string dir = testing::fresh_temp_dir("routing_bad");
  std::filesystem::create_directories(dir);
  const std::string weights = dir + "/weights.safetensors";
  io::write_safetensors(weights, {{"w", Tensor::zeros({2})}});
  expect_error([&] { load_routing_records(weights); },
               {"load_routing_records", "not a routing records file", "no format"});
  // Files written by hand: an id past E, then experts of another dtype.
  const std::map<std::string, std::string> kOneRecord{
      {"format", "reprise.routing_records"}, {"version", "1"},     {"sequences", "1"},
      {"layers", "model.layers.0.mlp"},      {"num_experts", "4"}, {"k", "2"}};
  const std::string bad = dir + "/bad.safetensors";
  io::write_safetensors(bad, {{"0.margin", Tensor::zeros({1, 1}, DType::i64)}},
                        {{"0.experts", io::RawTensor{"U16", {1, 1, 2}, {0, 0, 9, 0}}}}, kOneRecord);
  expect_error([&] { load_routing_records(bad); }, {bad, "record 0", "expert 9", "there are 4"});
  io::write_safetensors(bad, {{"0.margin", Tensor::zeros({1, 1}, DType::i64)}},
                        {{"0.experts", io::RawTensor{"U8", {1, 1, 2}, {0, 1}}}}, kOneRecord);
  expect_error([&] { load_routing_records(bad); }, {"experts are U8[1, 1, 2]", "U16[P, 1, 2]"});
  io::write_safetensors(bad, {}, {}, {{"format", "reprise.routing_records"}, {"version", "2"}});
  expect_error([&] { load_routing_records(bad); }, {"version 2"});
  const RoutingRecord other_layers =
      routing_record({"x"}, 300, Tensor::from_vector(std::vector<int64_t>{0, 1, 0, 1}, {2, 1, 2}));
  expect_error(
      [&] {
        save_routing_records(bad, {record(2, 1), other_layers});
      },
      {"save_routing_records", "record 1", "does not fit"});
  expect_error(
      [&] {
        io::write_safetensors(bad, {}, {{"e", io::RawTensor{"U16", {3}, {0, 0}}}});
      },
      {"U16[3]", "2 bytes"});
}

}  // namespace
}  // namespace reprise::nn
