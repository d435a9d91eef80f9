// io/safetensors_folder: round trips through one file and through shards cut
// by huggingface_hub's rule (boundaries exactly at the limit, a tensor over
// it), a folder written by Python's safetensors and huggingface_hub
// (tests/fixtures/sharded_tiny), links as in the Hub's cache, the removal of
// an earlier save's layout, one test per error of read_safetensors_folder
// with its message, and the limits on untrusted indexes.

#include "io/safetensors_folder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/support/bits.h"
#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"

namespace reprise::io {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_error;
using testing::same_bytes;

using Tensors = std::vector<std::pair<std::string, Tensor>>;

const std::map<std::string, std::string> kPt = {{"format", "pt"}};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// n pseudo-random values in [-4, 4) stored as `dtype`.
Tensor values(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(size_t(numel(shape)));
  for (float& x : v) x = dist(gen);
  return Tensor::from_vector<float>(v, shape).to(dtype);
}

class SafetensorsFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_temp_dir(std::string("folder_") +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // Every tensor of `tensors` reads back from the folder with its bytes.
  void expect_reads_back(const SafetensorsFolder& folder, const Tensors& tensors) {
    ASSERT_EQ(folder.names().size(), tensors.size());
    for (const auto& [name, written] : tensors)
      EXPECT_TRUE(same_bytes(folder.get(name), written)) << name;
  }

  std::string dir_;
};

// ---- Writing and reading back ----

TEST_F(SafetensorsFolderTest, OneFileWhenTheTensorsFitTheLimit) {
  const Tensors tensors = {{"b", values(DType::f32, {3, 5}, 1)},
                           {"a", values(DType::bf16, {7}, 2)},
                           {"c", Tensor::arange(4)}};
  write_safetensors_folder(dir_, tensors, kPt, 60 + 14 + 32);  // exactly their bytes
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});

  SafetensorsFolder opened = read_safetensors_folder(dir_);
  const SafetensorsFolder folder = std::move(opened);
  EXPECT_EQ(folder.dir(), dir_);
  EXPECT_EQ(folder.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(folder.files(), std::vector<std::string>{path("model.safetensors")});
  EXPECT_EQ(folder.file_of("c"), path("model.safetensors"));
  EXPECT_TRUE(folder.contains("a"));
  EXPECT_FALSE(folder.contains("d"));
  EXPECT_EQ(folder.info("b").shape, (Shape{3, 5}));
  EXPECT_EQ(folder.data_bytes(), 106u);
  expect_reads_back(folder, tensors);
  const SafetensorsFile file = read_safetensors(path("model.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"b", "a", "c"}));  // the given order
  EXPECT_EQ(file.metadata(), kPt);
}

// huggingface_hub's cut at 100 bytes per shard: a and b fill one exactly; c
// starts the next; d, over the limit, goes alone and is closed at once,
// before the shard c is in; e fills c's shard exactly; f, exactly the limit,
// is not over it and starts a shard, which the empty g joins.
TEST_F(SafetensorsFolderTest, ShardsAsHuggingFaceHubCutsThem) {
  const Tensors tensors = {{"a", values(DType::f32, {10}, 1)}, {"b", values(DType::f32, {3, 5}, 2)},
                           {"c", values(DType::f32, {1}, 3)},  {"d", values(DType::f32, {50}, 4)},
                           {"e", values(DType::f32, {24}, 5)}, {"f", values(DType::bf16, {50}, 6)},
                           {"g", Tensor::empty({0, 3})}};
  write_safetensors_folder(dir_, tensors, kPt, 100);
  const std::string s1 = "model-00001-of-00004.safetensors",
                    s2 = "model-00002-of-00004.safetensors",
                    s3 = "model-00003-of-00004.safetensors",
                    s4 = "model-00004-of-00004.safetensors";
  EXPECT_EQ(listing(), (std::vector<std::string>{s1, s2, s3, s4, "model.safetensors.index.json"}));
  EXPECT_EQ(read_text(path("model.safetensors.index.json")),
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_parameters\": 150,\n"
            "    \"total_size\": 500\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"a\": \"" +
                s1 +
                "\",\n"
                "    \"b\": \"" +
                s1 +
                "\",\n"
                "    \"c\": \"" +
                s3 +
                "\",\n"
                "    \"d\": \"" +
                s2 +
                "\",\n"
                "    \"e\": \"" +
                s3 +
                "\",\n"
                "    \"f\": \"" +
                s4 +
                "\",\n"
                "    \"g\": \"" +
                s4 +
                "\"\n"
                "  }\n"
                "}\n");
  for (const auto& [file, names] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {s1, {"a", "b"}}, {s2, {"d"}}, {s3, {"c", "e"}}, {s4, {"f", "g"}}}) {
    const SafetensorsFile shard = read_safetensors(path(file));
    EXPECT_EQ(shard.names(), names) << file;
    EXPECT_EQ(shard.metadata(), kPt) << file;
  }

  const SafetensorsFolder folder = read_safetensors_folder(dir_);
  // In the order the (sorted) index first names them: a, c, d, f.
  EXPECT_EQ(folder.files(), (std::vector<std::string>{path(s1), path(s3), path(s2), path(s4)}));
  EXPECT_EQ(folder.file_of("e"), path(s3));
  EXPECT_EQ(folder.data_bytes(), 500u);
  expect_reads_back(folder, tensors);
}

TEST_F(SafetensorsFolderTest, OneShardIsOneFileWhateverItsSize) {
  const Tensors two = {{"a", Tensor::ones({4})}, {"b", Tensor::ones({4})}};  // 16 + 16 bytes
  write_safetensors_folder(dir_, two, kPt, 32);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  write_safetensors_folder(dir_, two, kPt, 31);
  EXPECT_EQ(listing(), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                 "model-00002-of-00002.safetensors",
                                                 "model.safetensors.index.json"}));
  // A lone tensor over the limit is one shard, hence one file.
  write_safetensors_folder(dir_, {{"big", Tensor::ones({100})}}, kPt, 8);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(read_safetensors_folder(dir_).data_bytes(), 400u);
  write_safetensors_folder(dir_, {}, kPt, 8);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(read_safetensors_folder(dir_).names().empty());
}

TEST_F(SafetensorsFolderTest, ReadIntoConvertsAcrossShards) {
  Tensors tensors;
  for (uint32_t i = 0; i < 5; ++i)
    tensors.emplace_back("layer" + std::to_string(i), values(DType::bf16, {17, 3}, i));
  write_safetensors_folder(dir_, tensors, kPt, 200);
  const SafetensorsFolder folder = read_safetensors_folder(dir_);
  ASSERT_EQ(folder.files().size(), 5u);
  for (const auto& [name, written] : tensors) {
    EXPECT_EQ(folder.info(name).dtype_name, "BF16");
    Tensor dst = Tensor::empty({17, 3}, DType::f32);
    folder.read_into(name, dst);
    EXPECT_TRUE(same_bytes(dst, written.to(DType::f32))) << name;
  }
}

TEST_F(SafetensorsFolderTest, ANewSaveRemovesTheWeightsOfTheOldLayoutOnly) {
  const Tensors tensors = {
      {"a", Tensor::ones({4})}, {"b", Tensor::ones({4})}, {"c", Tensor::full({4}, 2.0)}};
  // Files that are not this save's weights stay, whatever they look like.
  write_text(path("config.json"), "{}");
  write_text(path("model-extra.safetensors"), "");
  write_text(path("model-1-of-2.safetensors"), "");
  fs::create_directory(path("model-00009-of-00009.safetensors"));
  const std::vector<std::string> others = {"config.json", "model-00009-of-00009.safetensors",
                                           "model-1-of-2.safetensors", "model-extra.safetensors"};
  auto with_others = [&](std::vector<std::string> names) {
    names.insert(names.end(), others.begin(), others.end());
    std::sort(names.begin(), names.end());
    return names;
  };

  write_safetensors_folder(dir_, tensors, kPt, 16);
  EXPECT_EQ(listing(),
            with_others({"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                         "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  write_safetensors_folder(dir_, tensors, kPt, 32);
  EXPECT_EQ(listing(),
            with_others({"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                         "model.safetensors.index.json"}));
  expect_reads_back(read_safetensors_folder(dir_), tensors);
  write_safetensors_folder(dir_, tensors, kPt, 48);
  EXPECT_EQ(listing(), with_others({"model.safetensors"}));
  expect_reads_back(read_safetensors_folder(dir_), tensors);
  write_safetensors_folder(dir_, tensors, kPt, 16);
  EXPECT_EQ(listing(),
            with_others({"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                         "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  expect_reads_back(read_safetensors_folder(dir_), tensors);
}

TEST_F(SafetensorsFolderTest, CreatesTheFolder) {
  const std::string nested = path("a/b/model");
  write_safetensors_folder(nested, {{"w", Tensor::ones({2})}}, {}, 4);
  EXPECT_TRUE(fs::is_regular_file(nested + "/model.safetensors"));
  EXPECT_TRUE(read_safetensors(nested + "/model.safetensors").metadata().empty());
}

TEST_F(SafetensorsFolderTest, WriterRefusesBadTensorListsBeforeWritingAnything) {
  const std::string target = path("out");
  const std::string at = "safetensors folder: writing " + target + ": ";
  EXPECT_EQ(error_of([&] {
              write_safetensors_folder(target, {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}},
                                       kPt, 1);
            }),
            at + "duplicate tensor name 'a'");
  EXPECT_EQ(error_of([&] {
              write_safetensors_folder(target, {{"__metadata__", Tensor::ones({1})}}, kPt, 1);
            }),
            at + "a tensor cannot be named __metadata__");
  EXPECT_EQ(error_of([&] {
              write_safetensors_folder(target, {{"u", Tensor()}}, kPt, 1);
            }),
            at + "tensor 'u' is undefined");
  EXPECT_FALSE(fs::exists(target));
}

// ---- What the Hub writes ----

// (i - n/2) / 4 for i = 0..n-1, as tests/fixtures/make_sharded_fixture.py fills its floats.
std::vector<double> ramp(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((double(i) - double(n) / 2) / 4);
  return v;
}

TEST(SafetensorsFolder, ReadsWhatHuggingFaceHubAndPythonSafetensorsWrite) {
  const std::string dir = std::string(REPRISE_FIXTURES_DIR) + "/sharded_tiny";
  const SafetensorsFolder folder = read_safetensors_folder(dir);
  auto shard = [&](int i) {
    return dir + "/model-0000" + std::to_string(i) + "-of-00004.safetensors";
  };
  EXPECT_EQ(folder.names(), (std::vector<std::string>{
                                "lm_head.weight", "model.embed_tokens.weight",
                                "model.layers.0.input_layernorm.weight", "model.layers.0.mask",
                                "model.layers.0.mlp.down_proj.weight", "model.layers.0.positions",
                                "model.layers.0.self_attn.o_proj.weight", "model.norm.weight"}));
  EXPECT_EQ(folder.files(), (std::vector<std::string>{shard(2), shard(1), shard(3), shard(4)}));
  EXPECT_EQ(folder.data_bytes(), 821u);
  EXPECT_EQ(folder.file_of("model.layers.0.mask"), shard(3));

  const std::vector<std::pair<std::string, Shape>> floats = {
      {"lm_head.weight", {8, 12}},
      {"model.embed_tokens.weight", {8, 4}},
      {"model.layers.0.input_layernorm.weight", {4}},
      {"model.layers.0.mlp.down_proj.weight", {4, 12}},
      {"model.layers.0.self_attn.o_proj.weight", {2, 3}},
      {"model.norm.weight", {4}}};
  for (const auto& [name, shape] : floats) {
    Tensor dst = Tensor::empty(shape, DType::f64);
    folder.read_into(name, dst);  // from F32, F16 and F64: every ramp value is exact in each
    EXPECT_EQ(dst.to_vector<double>(), ramp(numel(shape))) << name;
  }
  EXPECT_EQ(folder.info("model.norm.weight").dtype_name, "F16");
  EXPECT_EQ(folder.get("model.layers.0.positions").to_vector<int64_t>(),
            (std::vector<int64_t>{0, -1, (int64_t(1) << 40) + 1, INT64_MIN, INT64_MAX, 7}));
  EXPECT_EQ(folder.get("model.layers.0.mask").to_vector<bool>(),
            (std::vector<bool>{true, false, true, true, false}));

  // The same tensors in the script's order, cut at its 256 bytes, give
  // the same shards and the same index, byte for byte.
  Tensors tensors;
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.0.mlp.down_proj.weight", "lm_head.weight", "model.layers.0.positions",
        "model.layers.0.mask", "model.layers.0.self_attn.o_proj.weight", "model.norm.weight"})
    tensors.emplace_back(name, folder.get(name));
  const std::string out = testing::fresh_temp_dir("folder_rewrite_sharded_tiny");
  write_safetensors_folder(out, tensors, kPt, 256);
  EXPECT_EQ(read_text(out + "/model.safetensors.index.json"),
            read_text(dir + "/model.safetensors.index.json"));
  const SafetensorsFolder again = read_safetensors_folder(out);
  for (const std::string& name : folder.names()) {
    EXPECT_EQ(fs::path(again.file_of(name)).filename(), fs::path(folder.file_of(name)).filename())
        << name;
    EXPECT_TRUE(same_bytes(again.get(name), folder.get(name))) << name;
  }
  fs::remove_all(out);
}

// A Hub cache snapshot holds links to blobs named by their hashes.
TEST_F(SafetensorsFolderTest, ReadsLinksAsInTheHubCache) {
  const Tensors tensors = {{"a", Tensor::ones({4})}, {"b", Tensor::full({4}, 3.0)}};
  const std::string blobs = path("blobs"), snapshot = path("snapshot");
  write_safetensors_folder(blobs, tensors, kPt, 16);
  fs::create_directory(snapshot);
  for (const auto& e : fs::directory_iterator(blobs))
    fs::create_symlink(fs::path("../blobs") / e.path().filename(),
                       fs::path(snapshot) / e.path().filename());
  const SafetensorsFolder folder = read_safetensors_folder(snapshot);
  expect_reads_back(folder, tensors);
  EXPECT_EQ(folder.file_of("b"), snapshot + "/model-00002-of-00002.safetensors");

  // A dangling link is there, but cannot be opened.
  fs::remove(path("blobs/model-00002-of-00002.safetensors"));
  EXPECT_EQ(error_of([&] { read_safetensors_folder(snapshot); }),
            "safetensors: cannot open " + snapshot +
                "/model-00002-of-00002.safetensors: No such file or directory");
}

// ---- Errors of read_safetensors_folder, each naming the file ----

class FolderErrorTest : public SafetensorsFolderTest {
 protected:
  std::string index() const { return path("model.safetensors.index.json"); }
  void write_index(const std::string& text) const { write_text(index(), text); }
  // The Error that opening the folder raises.
  std::string open_error() const {
    return error_of([&] { read_safetensors_folder(dir_); });
  }
};

TEST_F(FolderErrorTest, NotAFolderNoWeightsOrBothLayouts) {
  EXPECT_EQ(error_of([&] { read_safetensors_folder(path("nope")); }),
            "safetensors folder " + path("nope") + ": no such directory");
  write_text(path("file"), "");
  EXPECT_EQ(error_of([&] { read_safetensors_folder(path("file")); }),
            "safetensors folder " + path("file") + ": not a directory");
  fs::remove(path("file"));
  EXPECT_EQ(open_error(),
            "safetensors folder: no model.safetensors or model.safetensors.index.json in " + dir_);
  write_safetensors(path("model.safetensors"), {{"a", Tensor::ones({1})}});
  write_index(R"({"weight_map": {"a": "model.safetensors"}})");
  EXPECT_EQ(open_error(), "safetensors folder " + dir_ +
                              ": both model.safetensors and model.safetensors.index.json are "
                              "present, so which one holds the weights is ambiguous (remove the "
                              "stale one)");
}

TEST_F(FolderErrorTest, IndexThatIsNotAWeightMap) {
  const std::string at = "safetensors index " + index();
  write_index(R"({"weight_map": {"a": "s.safetensors",}})");
  expect_error([&] { read_safetensors_folder(dir_); },
               {at + ": bad JSON: ", "line 1, column 38 (byte 37)"});
  write_index("[1]");
  EXPECT_EQ(open_error(), at + ": expected a JSON object, got array");
  write_index(R"({"metadata": {"total_size": 0}})");
  EXPECT_EQ(open_error(), at + ": no \"weight_map\"");
  write_index(R"({"weight_map": ["a"]})");
  EXPECT_EQ(open_error(),
            at + ": \"weight_map\" must be an object from tensor names to shard files, got array");
  write_index(R"({"weight_map": {"a": 3}})");
  EXPECT_EQ(open_error(),
            at + ": weight_map entry 'a' must be a shard file name (a string), got integer");
  write_safetensors(path("s.safetensors"), {{"a", Tensor::ones({1})}});
  write_index(R"({"metadata": 1, "weight_map": {"a": "s.safetensors"}})");
  EXPECT_EQ(open_error(), at + ": \"metadata\" must be an object, got integer");
}

TEST_F(FolderErrorTest, ShardNamesOutsideTheFolder) {
  fs::create_directory(path("sub"));
  write_safetensors(path("sub/s.safetensors"), {{"a", Tensor::ones({1})}});
  for (const std::string& name :
       {std::string("../s.safetensors"), std::string("sub/s.safetensors"),
        std::string("/etc/passwd"), std::string(".."), std::string("."), std::string("")}) {
    write_index(R"({"weight_map": {"a": ")" + name + R"("}})");
    EXPECT_EQ(open_error(), "safetensors index " + index() + ": tensor 'a' is mapped to \"" + name +
                                "\", which is not a plain file name inside " + dir_);
  }
  write_index(R"({"weight_map": {"a": "s.safetensors\u0000x"}})");
  EXPECT_EQ(open_error(), "safetensors index " + index() +
                              ": tensor 'a' is mapped to \"s.safetensors\\u0000x\", which is not a "
                              "plain file name inside " +
                              dir_);
}

TEST_F(FolderErrorTest, MissingShard) {
  write_safetensors(path("model-00001-of-00002.safetensors"), {{"a", Tensor::ones({1})}});
  write_index(
      R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
      R"( "b": "model-00002-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  EXPECT_EQ(open_error(), "safetensors index " + index() +
                              ": shard model-00002-of-00002.safetensors (of tensor 'b') is "
                              "missing from " +
                              dir_);
}

TEST_F(FolderErrorTest, IndexAndShardsDisagree) {
  write_safetensors(path("s1.safetensors"), {{"a", Tensor::ones({1})}});
  write_safetensors(path("s2.safetensors"), {{"a", Tensor::ones({1})}, {"b", Tensor::ones({1})}});
  // A tensor the index maps to a shard that does not hold it.
  write_index(R"({"weight_map": {"a": "s1.safetensors", "zz": "s1.safetensors"}})");
  EXPECT_EQ(open_error(), "safetensors index " + index() + " maps tensor 'zz' to " +
                              path("s1.safetensors") + ", which does not hold it");
  // A tensor in a shard that the index does not list.
  write_index(R"({"weight_map": {"b": "s2.safetensors"}})");
  EXPECT_EQ(open_error(), "safetensors shard " + path("s2.safetensors") +
                              " holds tensor 'a', which the index " + index() + " does not list");
  // A tensor in two shards.
  write_index(R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  EXPECT_EQ(open_error(), "safetensors shard " + path("s2.safetensors") +
                              " holds tensor 'a', which the index " + index() + " maps to " +
                              path("s1.safetensors") + " (a tensor in two shards)");
}

TEST_F(FolderErrorTest, TotalSizeMustMatchTheShards) {
  write_safetensors(path("s.safetensors"), {{"a", Tensor::ones({2})}});  // 8 bytes
  const std::string at = "safetensors index " + index();
  auto with_total = [&](const std::string& total) {
    write_index(R"({"metadata": {"total_size": )" + total +
                R"(}, "weight_map": {"a": "s.safetensors"}})");
  };
  with_total("7");
  EXPECT_EQ(open_error(), at + ": metadata.total_size is 7 bytes but the shards' tensors hold 8");
  for (const auto& [total, got] : std::vector<std::pair<std::string, std::string>>{
           {"\"8\"", "string"}, {"-8", "integer -8"}, {"8.5", "real number 8.5"}}) {
    with_total(total);
    EXPECT_EQ(
        open_error(),
        at + ": metadata.total_size must be a non-negative whole number of bytes, got " + got);
  }
  with_total("8.0");
  EXPECT_EQ(read_safetensors_folder(dir_).data_bytes(), 8u);
  write_index(R"({"weight_map": {"a": "s.safetensors"}})");  // no total_size: nothing to check
  EXPECT_EQ(read_safetensors_folder(dir_).data_bytes(), 8u);
}

TEST_F(FolderErrorTest, BadShardFileIsNamed) {
  write_text(path("s.safetensors"), std::string("\x10\x00\x00", 3));
  write_index(R"({"weight_map": {"a": "s.safetensors"}})");
  EXPECT_EQ(open_error(), "safetensors: " + path("s.safetensors") +
                              ": truncated file: 3 bytes, fewer than the 8-byte header length");
}

TEST_F(FolderErrorTest, AbsentTensorNamesTheFolder) {
  write_safetensors_folder(dir_, {{"a", Tensor::ones({1})}, {"b", Tensor::ones({1})}}, kPt, 4);
  const SafetensorsFolder folder = read_safetensors_folder(dir_);
  const std::string e =
      "safetensors folder " + dir_ + ": no tensor 'nope'; the folder has 2 tensors: 'a', 'b'";
  EXPECT_EQ(error_of([&] { folder.info("nope"); }), e);
  EXPECT_EQ(error_of([&] { folder.file_of("nope"); }), e);
  EXPECT_EQ(error_of([&] { folder.get("nope"); }), e);
  Tensor dst = Tensor::empty({1});
  EXPECT_EQ(error_of([&] { folder.read_into("nope", dst); }), e);
}

// ---- Limits on untrusted indexes ----

TEST_F(FolderErrorTest, IndexOfMoreThan100MBIsRefusedUnread) {
  write_index("{}");
  fs::resize_file(index(), kMaxSafetensorsIndexBytes + 1);  // sparse: costs no disk
  EXPECT_EQ(open_error(), index() +
                              ": 100000001 bytes, more than the 100000000 accepted for a "
                              "safetensors index");
}

TEST_F(FolderErrorTest, AtMost1048576TensorsAnd8192Shards) {
  std::string text = R"({"weight_map": {)";
  for (size_t i = 0; i <= kMaxSafetensorsFolderTensors; ++i)
    text += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"s\"";
  write_index(text + "}}");
  EXPECT_EQ(open_error(), "safetensors index " + index() +
                              ": weight_map has 1048577 entries; reprise reads at most 1048576");

  // Refused before any shard is looked for: none of these exists.
  text = R"({"weight_map": {)";
  for (size_t i = 0; i <= kMaxSafetensorsShards; ++i)
    text += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"s" + std::to_string(i) + "\"";
  write_index(text + "}}");
  EXPECT_EQ(open_error(),
            "safetensors index " + index() +
                ": weight_map names more than 8192 shards; reprise reads at most 8192");
}

}  // namespace
}  // namespace reprise::io
