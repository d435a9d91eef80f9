// io/safetensors: bitwise round trips, reading a file written by Python's
// safetensors, one test per malformed-file check, a truncation/corruption
// sweep (run it under ASan too), the atomicity of writes, reads of one
// file from several threads (run under TSan by scripts/tsan.sh), and
// read_into's dtype conversions, checks and chunked copies.

#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/support/bits.h"

namespace reprise::io {
namespace {

using testing::same_bytes;

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("reprise_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Files in the test directory, to check that no temporary is left.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

std::string read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A safetensors file from a header (taken verbatim) and a data buffer.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint8_t(n >> (8 * i)));
  return out + header + data;
}

// The message of the Error that `fn` raises; fails the test when none.
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no reprise::Error raised";
  return "";
}

// A tensor of `dtype` and `shape` whose bytes are a fixed pseudo-random
// pattern, legal for the dtype (bool bytes are 0 or 1); floats include NaN
// payloads and signed zeros, which a bitwise round trip must keep.
Tensor pattern(DType dtype, const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  std::mt19937 gen(seed);
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = uint8_t(gen());
  if (dtype == DType::boolean) {
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
  }
  return t;
}

TEST_F(SafetensorsTest, RoundTripEveryDTypeBitwise) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", pattern(DType::f32, {3, 5, 7}, 1)},   {"f64", pattern(DType::f64, {257}, 2)},
      {"bf16", pattern(DType::bf16, {2, 129}, 3)},  {"f16", pattern(DType::f16, {259}, 4)},
      {"i32", pattern(DType::i32, {5, 1, 3}, 5)},   {"i64", pattern(DType::i64, {7}, 6)},
      {"bool", pattern(DType::boolean, {13}, 7)},   {"scalar", Tensor::scalar(-1.5, DType::f64)},
      {"empty", Tensor::empty({0, 4}, DType::f32)},
  };
  // Special float bits survive: NaN payload, -0, infinity, subnormal.
  float* f = tensors[0].second.data<float>();
  f[0] = std::bit_cast<float>(0x7fc01234u);
  f[1] = -0.0f;
  f[2] = -INFINITY;
  f[3] = std::bit_cast<float>(0x00000001u);
  // A non-contiguous view is written contiguous.
  Tensor base = pattern(DType::f32, {4, 6}, 8);
  tensors.emplace_back("transposed", base.transpose(0, 1));

  std::map<std::string, std::string> metadata = {
      {"format", "test"}, {"quote\"and\\slash", "line\nbreak \xC3\xA9 \xF0\x9F\x98\x80"}};
  write_safetensors(path("all.safetensors"), tensors, metadata);

  SafetensorsFile file = read_safetensors(path("all.safetensors"));
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.names().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(file.names()[i], tensors[i].first);  // the order we gave
    Tensor back = file.get(tensors[i].first);
    EXPECT_TRUE(back.is_contiguous());
    EXPECT_TRUE(same_bytes(back, tensors[i].second)) << tensors[i].first;
  }
  EXPECT_EQ(file.info("transposed").shape, (Shape{6, 4}));
  EXPECT_EQ(file.info("bf16").dtype_name, "BF16");
}

// 4 threads, each reading every tensor 20 times, starting at a different
// one: how many reads `matches(name, written)` rejected.
int concurrent_mismatches(
    const std::vector<std::pair<std::string, Tensor>>& tensors,
    const std::function<bool(const std::string& name, const Tensor& written)>& matches) {
  std::atomic<int> mismatches{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < tensors.size(); ++i) {
          const auto& [name, written] = tensors[(i + size_t(r)) % tensors.size()];
          mismatches += matches(name, written) ? 0 : 1;
        }
      }
    });
  }
  for (std::thread& t : readers) t.join();
  return mismatches.load();
}

// One SafetensorsFile read by several std::threads at once (a data loader's
// workers, parallel weight loading): every get() returns the written bytes.
TEST_F(SafetensorsTest, ConcurrentGetsOfOneFile) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (uint32_t i = 0; i < 8; ++i)
    tensors.emplace_back(std::string(1, char('a' + i)),
                         pattern(DType::f32, {17, int64_t(i) + 3}, i));
  write_safetensors(path("shared.safetensors"), tensors);
  const SafetensorsFile file = read_safetensors(path("shared.safetensors"));
  EXPECT_EQ(concurrent_mismatches(tensors,
                                  [&](const std::string& name, const Tensor& written) {
                                    return same_bytes(file.get(name), written);
                                  }),
            0);
}

TEST_F(SafetensorsTest, WritesTheReferenceLayout) {
  Tensor a = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  Tensor b = Tensor::from_vector<int32_t>({7}, {});
  write_safetensors(path("x.safetensors"), {{"a", a}, {"b", b}}, {{"k", "v"}});
  std::string bytes = read_bytes(path("x.safetensors"));
  std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I32","shape":[],"data_offsets":[8,12]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // padded with spaces to 8 bytes
  std::string data(12, '\0');
  std::memcpy(data.data(), a.raw_data(), 8);
  std::memcpy(data.data() + 8, b.raw_data(), 4);
  EXPECT_EQ(bytes, file_bytes(header, data));
  EXPECT_EQ((bytes.size() - data.size()) % 8, 0u);

  // No metadata: no __metadata__ entry, as the reference writer does.
  write_safetensors(path("y.safetensors"), {{"b", b}});
  std::string y = read_bytes(path("y.safetensors"));
  EXPECT_EQ(y.find("__metadata__"), std::string::npos);
}

TEST(Safetensors, ReadsWhatPythonSafetensorsWrites) {
  // tests/fixtures/make_io_fixtures.py wrote this with safetensors.torch.
  SafetensorsFile file =
      read_safetensors(std::string(REPRISE_FIXTURES_DIR) + "/io_torch.safetensors");
  EXPECT_EQ(file.metadata().at("generator"), "tests/fixtures/make_io_fixtures.py");
  EXPECT_EQ(file.names().size(), 10u);

  Tensor f32 = file.get("f32");
  ASSERT_EQ(f32.describe(), "f32[3, 4] cpu");
  std::vector<float> v = f32.to_vector<float>();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[size_t(i)], float(i) / 4 - 1) << i;

  Tensor f64 = file.get("f64");
  ASSERT_EQ(f64.describe(), "f64[2, 2] cpu");
  EXPECT_EQ(f64.to_vector<double>(),
            (std::vector<double>{std::numbers::pi, -1e300, 4.9406564584124654e-324, 0.1}));

  // torch's bf16/f16 roundings agree bit for bit with engine/half.h.
  std::vector<float> src = file.get("half_src").to_vector<float>();
  ASSERT_EQ(src.size(), 15u);
  Tensor bf16 = file.get("bf16");
  Tensor f16 = file.get("f16");
  ASSERT_EQ(bf16.describe(), "bf16[15] cpu");
  ASSERT_EQ(f16.describe(), "f16[15] cpu");
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(bf16.data<bfloat16>()[i].bits, bfloat16(src[i]).bits) << "bf16 of " << src[i];
    EXPECT_EQ(f16.data<float16>()[i].bits, float16(src[i]).bits) << "f16 of " << src[i];
  }
  EXPECT_EQ(bf16.data<bfloat16>()[0].bits, 0x3f80);  // 1.0
  EXPECT_EQ(f16.data<float16>()[8].bits, 0x7bff);    // 65504, the largest half
  EXPECT_EQ(f16.data<float16>()[9].bits, 0x7c00);    // 65520 rounds to infinity

  EXPECT_EQ(file.get("i64").to_vector<int64_t>(),
            (std::vector<int64_t>{0, -1, (int64_t(1) << 40) + 1, INT64_MIN, INT64_MAX}));
  EXPECT_EQ(file.get("i32").to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MIN, 7, INT32_MAX, 0}));
  EXPECT_EQ(file.get("bool").to_vector<bool>(), (std::vector<bool>{true, false, true}));
  Tensor scalar = file.get("scalar");
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<float>(), 2.5f);
  EXPECT_EQ(file.get("empty").describe(), "f32[0, 3] cpu");
}

// ---- Malformed files: each check gives an Error naming the file, the
// tensor where there is one, and the problem. ----

class MalformedTest : public SafetensorsTest {
 protected:
  // Writes a file with `header` and `data`, reads it (and gets every tensor),
  // and returns the Error message.
  std::string load_error(const std::string& header, const std::string& data) {
    write_bytes(path("bad.safetensors"), file_bytes(header, data));
    std::string e = error_of([&] { load_safetensors(path("bad.safetensors")); });
    EXPECT_NE(e.find(path("bad.safetensors")), std::string::npos) << "file not named: " << e;
    return e;
  }
};

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST_F(MalformedTest, TruncatedFile) {
  write_bytes(path("bad.safetensors"), std::string("\x10\x00\x00", 3));
  std::string e = error_of([&] { read_safetensors(path("bad.safetensors")); });
  EXPECT_HAS(e, "truncated file: 3 bytes");
}

TEST_F(MalformedTest, HeaderLengthBeyondFile) {
  std::string bytes =
      file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "1234");
  bytes[0] = char(0xff);  // header length 255 + ...
  write_bytes(path("bad.safetensors"), bytes);
  std::string e = error_of([&] { read_safetensors(path("bad.safetensors")); });
  EXPECT_HAS(e, "runs past the end of the file");
  // The largest possible length, which must not overflow the check.
  write_bytes(path("bad.safetensors"), std::string(8, char(0xff)) + "{}");
  e = error_of([&] { read_safetensors(path("bad.safetensors")); });
  EXPECT_HAS(e, "header length 18446744073709551615 runs past the end");
}

TEST_F(MalformedTest, HeaderLongerThanTheFormatAllows) {
  // A sparse file just over the 100 MB header limit costs no disk.
  std::string bytes = file_bytes("{}", "");
  uint64_t n = 100'000'001;
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint8_t(n >> (8 * i)));
  write_bytes(path("bad.safetensors"), bytes.substr(0, 8));
  fs::resize_file(path("bad.safetensors"), 8 + n);
  std::string e = error_of([&] { read_safetensors(path("bad.safetensors")); });
  EXPECT_HAS(e, "exceeds the format's limit");
}

TEST_F(MalformedTest, BadHeaderJson) {
  std::string e = load_error(R"({"a":{"dtype":"F32",,}})", "");
  EXPECT_HAS(e, "bad header JSON");
  EXPECT_HAS(e, "line 1, column 21 (byte 20): expected a string key");
  e = load_error("{\"a\xFF\":{}}", "");
  EXPECT_HAS(e, "valid UTF-8");
  e = load_error("[1, 2]", "");
  EXPECT_HAS(e, "header must be a JSON object, got array");
  e = load_error("", "");
  EXPECT_HAS(e, "bad header JSON");
}

TEST_F(MalformedTest, UnknownDType) {
  std::string e = load_error(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "1234");
  EXPECT_HAS(e, "tensor 'w': unknown dtype \"F33\"");
  e = load_error(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", "1234");
  EXPECT_HAS(e, "tensor 'w': dtype must be a string, got integer");
}

TEST_F(MalformedTest, FormatDTypeWithoutRepriseType) {
  // U8 is valid safetensors: the file opens, listing works, get() explains.
  write_bytes(path("u8.safetensors"),
              file_bytes(R"({"u":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", "abc"));
  SafetensorsFile file = read_safetensors(path("u8.safetensors"));
  EXPECT_FALSE(file.info("u").dtype.has_value());
  std::string e = error_of([&] { file.get("u"); });
  EXPECT_HAS(e, "tensor 'u' has dtype U8, which reprise cannot load");
}

TEST_F(MalformedTest, ShapeAndOffsetSizeMismatch) {
  std::string e = load_error(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                             std::string(20, 'x'));
  EXPECT_HAS(e, "tensor 'w': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20");
  // An element count whose byte size overflows 64 bits.
  e = load_error(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                 "");
  EXPECT_HAS(e, "tensor 'w': shape [4294967296,4294967296] has too many elements");
}

TEST_F(MalformedTest, NonNumericOrNegativeShape) {
  std::string e = load_error(R"({"w":{"dtype":"F32","shape":["3"],"data_offsets":[0,12]}})",
                             std::string(12, 'x'));
  EXPECT_HAS(e, "tensor 'w': shape [\"3\"]: expected a non-negative integer, got string");
  e = load_error(R"({"w":{"dtype":"F32","shape":[-3],"data_offsets":[0,12]}})",
                 std::string(12, 'x'));
  EXPECT_HAS(e, "expected a non-negative integer, got -3");
  e = load_error(R"({"w":{"dtype":"F32","shape":[3.0],"data_offsets":[0,12]}})",
                 std::string(12, 'x'));
  EXPECT_HAS(e, "expected a non-negative integer, got real number 3.0");
  e = load_error(R"({"w":{"dtype":"F32","shape":3,"data_offsets":[0,12]}})", std::string(12, 'x'));
  EXPECT_HAS(e, "tensor 'w': shape must be an array of integers, got integer");
}

TEST_F(MalformedTest, BadOffsets) {
  std::string e = load_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "1234");
  EXPECT_HAS(e, "tensor 'w': data_offsets must be an array [begin, end], got [0]");
  e = load_error(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", "1234");
  EXPECT_HAS(e, "tensor 'w': data_offsets [4, 0] end before they begin");
  e = load_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", "1234");
  EXPECT_HAS(e, "tensor 'w': data_offsets: expected a non-negative integer, got string");
}

TEST_F(MalformedTest, OffsetsOutOfRange) {
  std::string e = load_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234");
  EXPECT_HAS(e, "tensor 'w' data_offsets [0, 8] are out of range: the data buffer has 4 bytes");
}

TEST_F(MalformedTest, OverlappingTensors) {
  std::string e = load_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             std::string(12, 'x'));
  EXPECT_HAS(e, "tensor 'b' [4, 12) overlaps tensor 'a' [0, 8)");
  // Two names for the same bytes.
  e = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                 "1234");
  EXPECT_HAS(e, "overlaps tensor 'a'");
}

TEST_F(MalformedTest, HolesInTheBuffer) {
  std::string e = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                             std::string(12, 'x'));
  EXPECT_HAS(e, "bytes [4, 8) of the data buffer belong to no tensor (a hole before tensor 'b')");
  e = load_error(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, 'x'));
  EXPECT_HAS(e, "bytes [0, 4) of the data buffer belong to no tensor");
  // Trailing bytes past the last tensor.
  e = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "12345678");
  EXPECT_HAS(e, "the tensors cover 4 bytes but the data buffer has 8");
}

TEST_F(MalformedTest, DuplicateNames) {
  std::string e = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             std::string(8, 'x'));
  EXPECT_HAS(e, "duplicate key \"a\"");
}

TEST_F(MalformedTest, FieldsAndMetadata) {
  std::string e = load_error(R"({"w":{"dtype":"F32","shape":[1]}})", "1234");
  EXPECT_HAS(e, "tensor 'w': missing field \"data_offsets\"");
  e = load_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", "1234");
  EXPECT_HAS(e, "tensor 'w': unexpected field \"x\"");
  e = load_error(R"({"w":[1]})", "");
  EXPECT_HAS(e, "tensor 'w': expected an object with dtype, shape and data_offsets, got array");
  e = load_error(R"({"__metadata__":{"step":3}})", "");
  EXPECT_HAS(e, "__metadata__ entry \"step\" must be a string, got integer");
  e = load_error(R"({"__metadata__":[]})", "");
  EXPECT_HAS(e, "__metadata__ must be an object of strings, got array");
}

TEST_F(MalformedTest, BoolBytesOtherThanZeroOrOne) {
  std::string e = load_error(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                             std::string("\x01\x00\x02", 3));
  EXPECT_HAS(e, "BOOL tensor 'm' has byte value 2 at element 2");
}

TEST_F(SafetensorsTest, MissingTensorNamesItAndSomeThatExist) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int i = 0; i < 7; ++i) tensors.emplace_back("layer" + std::to_string(i), Tensor::zeros({1}));
  write_safetensors(path("m.safetensors"), tensors);
  SafetensorsFile file = read_safetensors(path("m.safetensors"));
  EXPECT_FALSE(file.contains("layer9"));
  std::string e = error_of([&] { file.get("layer9"); });
  EXPECT_HAS(e,
             "no tensor 'layer9'; the file has 7 tensors: 'layer0', 'layer1', 'layer2', "
             "'layer3', 'layer4', ...");
  EXPECT_HAS(e, path("m.safetensors"));
}

TEST_F(SafetensorsTest, MissingFileAndFileShrunkAfterOpen) {
  std::string e = error_of([&] { read_safetensors(path("nope.safetensors")); });
  EXPECT_HAS(e, "cannot open " + path("nope.safetensors") + ": No such file or directory");
  e = error_of([&] { read_safetensors(dir_.string()); });
  EXPECT_HAS(e, "is not a regular file");

  write_safetensors(path("s.safetensors"), {{"w", Tensor::zeros({100})}});
  SafetensorsFile file = read_safetensors(path("s.safetensors"));
  fs::resize_file(path("s.safetensors"), fs::file_size(path("s.safetensors")) - 10);
  e = error_of([&] { file.get("w"); });
  EXPECT_HAS(e, "tensor 'w' failed: the file is shorter than when it was opened");
}

// ---- Corruption sweep: never a crash or an out-of-bounds read. Run this
// under ASan+UBSan (-DREPRISE_SANITIZE=ON) to make "never" mean something. ----

TEST_F(SafetensorsTest, TruncatedAndCorruptedVariantsFailCleanly) {
  write_safetensors(path("ok.safetensors"),
                    {{"w", pattern(DType::f32, {3, 5}, 1)},
                     {"b", pattern(DType::bf16, {5}, 2)},
                     {"m", pattern(DType::boolean, {4}, 3)},
                     {"i", pattern(DType::i64, {2}, 4)}},
                    {{"k", "v"}});
  const std::string good = read_bytes(path("ok.safetensors"));
  // Thousands of small files: on tmpfs when there is one, it is much faster.
  const std::string variant =
      fs::is_directory("/dev/shm")
          ? "/dev/shm/reprise_io_variant_" + std::to_string(::getpid()) + ".safetensors"
          : path("variant.safetensors");

  // Loads everything; true when it worked, false on an Error.
  auto loads = [&](const std::string& bytes) {
    write_bytes(variant, bytes);
    try {
      std::map<std::string, Tensor> all = load_safetensors(variant);
      return !all.empty();
    } catch (const Error&) {
      return false;
    }
  };

  ASSERT_TRUE(loads(good));
  // Every truncation fails: the buffer no longer matches the header.
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(loads(good.substr(0, len))) << "truncated to " << len << " bytes";
  }
  // Random flips of 1-4 bytes, fixed seed; flips in the data buffer of a
  // float tensor are valid files, so count only that nothing crashed.
  std::mt19937 gen(20261202);
  int failed = 0, loaded = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    int flips = 1 + int(gen() % 4);
    for (int k = 0; k < flips; ++k) {
      // Half the flips land in the length and header, where the checks are.
      size_t limit = trial % 2 ? bytes.size() : std::min<size_t>(bytes.size(), 8 + 200);
      bytes[gen() % limit] ^= char(1 + gen() % 255);
    }
    (loads(bytes) ? loaded : failed)++;
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(loaded, 0);
  // Random garbage in place of the header, keeping every length right.
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint8_t(good[size_t(i)]);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes = good;
    for (size_t k = 8; k < 8 + header_len; ++k) bytes[k] = char(gen());
    EXPECT_FALSE(loads(bytes));
  }
  fs::remove(variant);
}

// ---- Atomic writes ----

TEST_F(SafetensorsTest, WriteLeavesNoTemporaryAndReplacesAtomically) {
  write_safetensors(path("w.safetensors"), {{"a", Tensor::ones({3})}});
  EXPECT_EQ(listing(), (std::vector<std::string>{"w.safetensors"}));
  write_safetensors(path("w.safetensors"), {{"b", Tensor::full({2}, 4.0)}});
  EXPECT_EQ(listing(), (std::vector<std::string>{"w.safetensors"}));
  SafetensorsFile file = read_safetensors(path("w.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(file.get("b").to_vector<float>(), (std::vector<float>{4.0f, 4.0f}));
  // A relative path works too (directory ".").
  fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  write_safetensors("rel.safetensors", {{"a", Tensor::ones({1})}});
  fs::current_path(cwd);
  EXPECT_TRUE(fs::exists(path("rel.safetensors")));
}

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryFailsCleanly) {
  std::string target = path("no/such/dir/w.safetensors");
  std::string e = error_of([&] { write_safetensors(target, {{"a", Tensor::ones({3})}}); });
  EXPECT_HAS(e, "cannot create a temporary file in " + path("no/such/dir"));
  EXPECT_EQ(listing(), std::vector<std::string>{});
}

TEST_F(SafetensorsTest, FailedWriteMidFileKeepsTheOldFile) {
  write_safetensors(path("w.safetensors"), {{"old", Tensor::ones({3})}});
  const std::string before = read_bytes(path("w.safetensors"));
  // A file-size limit makes write() fail part way, as a full disk would.
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string e = error_of([&] {
    write_safetensors(path("w.safetensors"), {{"big", Tensor::ones({100000})}});
  });
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  EXPECT_HAS(e, "failed: File too large");
  EXPECT_EQ(read_bytes(path("w.safetensors")), before);
  EXPECT_EQ(listing(), (std::vector<std::string>{"w.safetensors"}));
}

TEST_F(SafetensorsTest, FailedRenameRemovesTheTemporary) {
  // A directory where the file should go: everything up to rename succeeds.
  fs::create_directory(path("target"));
  std::string e = error_of([&] { write_safetensors(path("target"), {{"a", Tensor::ones({3})}}); });
  EXPECT_HAS(e, "rename from");
  EXPECT_EQ(listing(), (std::vector<std::string>{"target"}));
  EXPECT_TRUE(fs::is_directory(path("target")));
}

TEST_F(SafetensorsTest, ReadOnlyDirectoryKeepsTheOldFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  write_safetensors(path("w.safetensors"), {{"old", Tensor::ones({3})}});
  const std::string before = read_bytes(path("w.safetensors"));
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  std::string e = error_of([&] {
    write_safetensors(path("w.safetensors"), {{"new", Tensor::ones({3})}});
  });
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_HAS(e, "Permission denied");
  EXPECT_EQ(read_bytes(path("w.safetensors")), before);
  EXPECT_EQ(listing(), (std::vector<std::string>{"w.safetensors"}));
}

TEST_F(SafetensorsTest, WriteRejectsBadTensorLists) {
  std::string e = error_of([&] {
    write_safetensors(path("d.safetensors"), {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}});
  });
  EXPECT_HAS(e, "duplicate tensor name 'a'");
  e = error_of([&] {
    write_safetensors(path("d.safetensors"), {{"__metadata__", Tensor::ones({1})}});
  });
  EXPECT_HAS(e, "cannot be named __metadata__");
  e = error_of([&] { write_safetensors(path("d.safetensors"), {{"u", Tensor()}}); });
  EXPECT_HAS(e, "tensor 'u' is undefined");
  EXPECT_EQ(listing(), std::vector<std::string>{});
}

// ---- Limits on untrusted files: each is an Error naming the file, raised
// before anything of the claimed size is allocated. ----

TEST_F(MalformedTest, HeaderLengthOfTwoToTheSixtyIsAnErrorNotAnAllocation) {
  std::string bytes = file_bytes("{}", "");
  const uint64_t n = uint64_t(1) << 60;
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint8_t(n >> (8 * i)));
  write_bytes(path("bad.safetensors"), bytes);
  EXPECT_EQ(error_of([&] { read_safetensors(path("bad.safetensors")); }),
            "safetensors: " + path("bad.safetensors") +
                ": header length 1152921504606846976 runs past the end of the file (10 bytes; "
                "truncated file?)");
}

TEST_F(MalformedTest, ShapesOfAtMost64Dimensions) {
  // 64 dimensions of 1: one U8 element, one byte.
  std::string ones = "1";
  for (int i = 1; i < 64; ++i) ones += ",1";
  write_bytes(
      path("ok.safetensors"),
      file_bytes(R"({"t":{"dtype":"U8","shape":[)" + ones + R"(],"data_offsets":[0,1]}})", "x"));
  EXPECT_EQ(read_safetensors(path("ok.safetensors")).info("t").shape.size(), 64u);
  EXPECT_EQ(
      load_error(R"({"t":{"dtype":"U8","shape":[)" + ones + R"(,1],"data_offsets":[0,1]}})", "x"),
      "safetensors: " + path("bad.safetensors") +
          ": tensor 't': shape has 65 dimensions; reprise reads at most 64");
}

TEST_F(MalformedTest, AtMost131072TensorsAndMetadataEntries) {
  // Empty tensors all at offset 0 tile an empty buffer, so only the count is wrong.
  std::string header = "{";
  for (size_t i = 0; i <= kMaxSafetensorsTensors; ++i) {
    header += (i ? ",\"" : "\"") + std::to_string(i) +
              R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  }
  EXPECT_EQ(load_error(header + R"(,"__metadata__":{}})", ""),
            "safetensors: " + path("bad.safetensors") +
                ": the header lists 131073 tensors; reprise reads at most 131072 per file");

  std::string metadata = R"({"__metadata__":{)";
  for (size_t i = 0; i <= 131072; ++i)
    metadata += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"\"";
  EXPECT_EQ(load_error(metadata + "}}", ""),
            "safetensors: " + path("bad.safetensors") +
                ": __metadata__ has 131073 entries; reprise reads at most 131072");
}

TEST_F(MalformedTest, HeaderJsonOfMoreThan2097152ValuesStopsWhereTheBudgetEnds) {
  // 2^21 shape dimensions: parsed whole, they would take 80 MB or more
  // before the rank could be checked.
  std::string zeros = "0";
  for (size_t i = 1; i < (size_t(1) << 21); ++i) zeros += ",0";
  const std::string header =
      R"({"t":{"dtype":"U8","shape":[)" + zeros + R"(],"data_offsets":[0,0]}})";
  EXPECT_EQ(load_error(header, ""),
            "safetensors: " + path("bad.safetensors") +
                ": bad header JSON: json: at line 1, column 4194325 (byte 4194324): expected no "
                "more than 2097152 values in the document, found '0'");
}

TEST_F(SafetensorsTest, DataBytesIsTheSizeOfTheTensorsTogether) {
  write_safetensors(path("w.safetensors"),
                    {{"a", Tensor::ones({3})}, {"b", Tensor::ones({2, 2}, DType::f64)}});
  EXPECT_EQ(read_safetensors(path("w.safetensors")).data_bytes(), 3u * 4 + 4u * 8);
}

// ---- read_into: into a caller's tensor, converting between float dtypes ----

constexpr DType kFloatDTypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16};

// n elements of `dtype`: random bytes (NaN payloads included), then signed
// zeros, infinities, values at bf16 and f16 rounding ties, subnormals of
// every width and values past the 16-bit ranges at the front.
Tensor float_values(DType dtype, int64_t n, uint32_t seed) {
  Tensor t = pattern(dtype, {n}, seed);
  const std::vector<double> special = {
      0.0,           -0.0,      INFINITY,       -INFINITY,      NAN,    1.0 + 0x1p-8, 1.0 + 3e-3,
      1.0 + 0x1p-11, 1.0 / 3.0, 0x1p-140,       0x1p-1074,      6e-8,   65504.0,      65520.0,
      3.0e38,        1e300,     -1.5 * 0x1p-24, 0x1.fffffep127, 1e-310, -2.5};
  Tensor front = Tensor::from_vector<double>(special, {int64_t(special.size())}).to(dtype);
  std::memcpy(t.raw_data(), front.raw_data(), front.nbytes());
  return t;
}

TEST_F(SafetensorsTest, ReadIntoConvertsBetweenFloatDTypesAsTensorToDoes) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (DType from : kFloatDTypes)
    tensors.emplace_back(dtype_name(from),
                         float_values(from, 3 * 257, uint32_t(from)).view({3, 257}));
  write_safetensors(path("floats.safetensors"), tensors);
  const SafetensorsFile file = read_safetensors(path("floats.safetensors"));
  for (const auto& [name, stored] : tensors) {
    for (DType to : kFloatDTypes) {
      Tensor dst = Tensor::zeros({3, 257}, to);
      file.read_into(name, dst);
      EXPECT_TRUE(same_bytes(dst, stored.to(to))) << name << " into " << dtype_name(to);
    }
  }
}

TEST_F(SafetensorsTest, ReadIntoWidensEvery16BitPatternExactly) {
  Tensor bf16 = Tensor::empty({65536}, DType::bf16), f16 = Tensor::empty({65536}, DType::f16);
  for (uint32_t i = 0; i < 65536; ++i) {
    bf16.data<bfloat16>()[i].bits = uint16_t(i);
    f16.data<float16>()[i].bits = uint16_t(i);
  }
  write_safetensors(path("h.safetensors"), {{"bf16", bf16}, {"f16", f16}});
  const SafetensorsFile file = read_safetensors(path("h.safetensors"));
  Tensor wide = Tensor::empty({65536}, DType::f32);
  file.read_into("bf16", wide);
  for (uint32_t i = 0; i < 65536; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide.data<float>()[i]), i << 16) << "bf16 bits " << i;
  // Exact: every f16 that is not NaN comes back from its f32 unchanged.
  file.read_into("f16", wide);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float v = wide.data<float>()[i];
    if (std::isnan(v)) {
      EXPECT_GT(i & 0x7fffu, 0x7c00u) << "f16 bits " << i << " are not a NaN";
    } else {
      ASSERT_EQ(float16(v).bits, i) << "f16 bits " << i;
    }
  }
}

TEST_F(SafetensorsTest, ReadIntoNarrowsF32ToBf16AsTensorToDoes) {
  // 1 + 2^-8 is a tie that rounds to even (1.0); 1 + 3 * 2^-8 a tie that
  // rounds up; 1 + 2^-8 + 2^-20 lies above the tie.
  Tensor f32 = Tensor::from_vector<float>(
      {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -0.0f, 3.4e38f}, {5});
  write_safetensors(path("n.safetensors"), {{"w", f32}});
  Tensor dst = Tensor::empty({5}, DType::bf16);
  read_safetensors(path("n.safetensors")).read_into("w", dst);
  EXPECT_TRUE(same_bytes(dst, f32.to(DType::bf16)));
  const bfloat16* b = dst.data<bfloat16>();
  EXPECT_EQ(b[0].bits, 0x3f80);
  EXPECT_EQ(b[1].bits, 0x3f82);
  EXPECT_EQ(b[2].bits, 0x3f81);
  EXPECT_EQ(b[3].bits, 0x8000);
  EXPECT_EQ(b[4].bits, 0x7f80);  // past bf16's largest finite value: infinity
}

TEST_F(SafetensorsTest, ReadIntoTheSameDTypeCopiesTheBytes) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"i64", pattern(DType::i64, {9}, 1)},        {"i32", pattern(DType::i32, {2, 5}, 2)},
      {"bool", pattern(DType::boolean, {7}, 3)},   {"f32", pattern(DType::f32, {11}, 4)},
      {"bf16", pattern(DType::bf16, {13}, 5)},     {"empty", Tensor::empty({0, 4}, DType::f16)},
      {"scalar", Tensor::scalar(-2.0, DType::f64)}};
  write_safetensors(path("same.safetensors"), tensors);
  const SafetensorsFile file = read_safetensors(path("same.safetensors"));
  for (const auto& [name, written] : tensors) {
    Tensor dst = Tensor::zeros(written.shape(), written.dtype());
    const uint64_t version = dst.version();
    file.read_into(name, dst);
    EXPECT_TRUE(same_bytes(dst, written)) << name;
    EXPECT_GT(dst.version(), version) << name << ": an in-place write bumps the version";
  }
}

TEST_F(SafetensorsTest, ReadIntoRefusesADestinationThatDoesNotFit) {
  write_safetensors(path("f.safetensors"), {{"w", Tensor::ones({3, 5})},
                                            {"i", Tensor::from_vector<int64_t>({1, 2}, {2})},
                                            {"m", Tensor::zeros({2}, DType::boolean)}});
  write_bytes(path("u8.safetensors"),
              file_bytes(R"({"u":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", "abc"));
  const SafetensorsFile file = read_safetensors(path("f.safetensors"));
  const std::string at = "safetensors: " + path("f.safetensors") + ": tensor ";

  Tensor wrong_shape = Tensor::zeros({5, 3});
  EXPECT_EQ(error_of([&] { file.read_into("w", wrong_shape); }),
            at + "'w' is F32[3, 5] but the destination is f32[5, 3] cpu: the shapes differ");
  const std::string rule =
      ": read_into converts between F32, F64, BF16 and F16 (into f32, f64, bf16 or f16) and "
      "reads I64, I32 and BOOL only into their own dtype";
  Tensor f32 = Tensor::zeros({2});
  EXPECT_EQ(error_of([&] { file.read_into("i", f32); }),
            at + "'i' is I64[2] but the destination is f32[2] cpu" + rule);
  EXPECT_EQ(error_of([&] { file.read_into("m", f32); }),
            at + "'m' is BOOL[2] but the destination is f32[2] cpu" + rule);
  Tensor i32 = Tensor::zeros({3, 5}, DType::i32);
  EXPECT_EQ(error_of([&] { file.read_into("w", i32); }),
            at + "'w' is F32[3, 5] but the destination is i32[3, 5] cpu" + rule);
  EXPECT_EQ(i32.to_vector<int32_t>(), std::vector<int32_t>(15, 0)) << "a refused dst is untouched";

  Tensor transposed = Tensor::zeros({5, 3}).transpose(0, 1);
  EXPECT_EQ(error_of([&] { file.read_into("w", transposed); }),
            at + "'w' (F32[3, 5]): read_into needs a contiguous CPU destination, got f32[3, 5] "
                 "cpu with strides [1, 3]");
  Tensor undefined;
  EXPECT_EQ(error_of([&] { file.read_into("w", undefined); }),
            at + "'w': read_into: the destination tensor is undefined");
  EXPECT_HAS(error_of([&] { file.read_into("nope", f32); }), "no tensor 'nope'; the file has 3");
  Tensor u8 = Tensor::zeros({3});
  EXPECT_HAS(error_of([&] { read_safetensors(path("u8.safetensors")).read_into("u", u8); }),
             "tensor 'u' has dtype U8, which reprise cannot load");
}

// The buffer starts wherever the header ends: a header whose length is not
// a multiple of 8 (the format allows it) puts every tensor at an odd
// address. Run under UBSan, a misaligned load would be reported here.
TEST_F(SafetensorsTest, ReadIntoReadsABufferAtAnyOffset) {
  const std::vector<float> values = {1.5f, -2.0f, 0x1p-149f};
  std::string data(12, '\0');
  std::memcpy(data.data(), values.data(), 12);
  for (int pad = 0; pad < 8; ++pad) {
    const std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})" +
                               std::string(size_t(pad), ' ');
    write_bytes(path("odd.safetensors"), file_bytes(header, data));
    const SafetensorsFile file = read_safetensors(path("odd.safetensors"));
    Tensor f32 = Tensor::empty({3}), f64 = Tensor::empty({3}, DType::f64);
    file.read_into("w", f32);
    file.read_into("w", f64);
    EXPECT_EQ(f32.to_vector<float>(), values) << "header of " << header.size() << " bytes";
    EXPECT_EQ(f64.to_vector<double>(), (std::vector<double>{1.5, -2.0, 0x1p-149}));
  }
}

// read_into copies a few megabytes at a time; tensors longer than that
// convert and validate across the pieces as one.
TEST_F(SafetensorsTest, ReadIntoTensorsOfManyMegabytes) {
  const Tensor bf16 = float_values(DType::bf16, 3'000'001, 9);  // 6 MB
  const Tensor f32 = float_values(DType::f32, 1'500'007, 10);   // 6 MB
  Tensor mask = Tensor::zeros({5'000'000}, DType::boolean);
  write_safetensors(path("big.safetensors"), {{"bf16", bf16}, {"f32", f32}, {"mask", mask}});
  {
    const SafetensorsFile file = read_safetensors(path("big.safetensors"));
    Tensor wide = Tensor::empty(bf16.shape(), DType::f32);
    file.read_into("bf16", wide);
    EXPECT_TRUE(same_bytes(wide, bf16.to(DType::f32)));
    Tensor narrow = Tensor::empty(f32.shape(), DType::f16);
    file.read_into("f32", narrow);
    EXPECT_TRUE(same_bytes(narrow, f32.to(DType::f16)));
  }
  // A bad BOOL byte past the first piece is found and named by its element.
  std::string bytes = read_bytes(path("big.safetensors"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint8_t(bytes[size_t(i)]);
  bytes[8 + header_len + bf16.nbytes() + f32.nbytes() + 4'700'000] = 2;
  write_bytes(path("big.safetensors"), bytes);
  EXPECT_HAS(error_of([&] { read_safetensors(path("big.safetensors")).get("mask"); }),
             "BOOL tensor 'mask' has byte value 2 at element 4700000 (expected 0 or 1)");
}

TEST_F(SafetensorsTest, ReadIntoAfterAMoveAndAfterTheFileGrew) {
  write_safetensors(path("g.safetensors"), {{"w", Tensor::full({4}, 3.0)}});
  SafetensorsFile opened = read_safetensors(path("g.safetensors"));
  const SafetensorsFile file = std::move(opened);  // the mapping moves with it
  Tensor dst = Tensor::empty({4}, DType::f64);
  file.read_into("w", dst);
  EXPECT_EQ(dst.to_vector<double>(), std::vector<double>(4, 3.0));
  const uintmax_t size = fs::file_size(path("g.safetensors"));
  fs::resize_file(path("g.safetensors"), size + 100);
  EXPECT_EQ(error_of([&] { file.read_into("w", dst); }),
            "safetensors: " + path("g.safetensors") +
                ": reading tensor 'w' failed: the file is longer than when it was opened (" +
                std::to_string(size) + " bytes then, " + std::to_string(size + 100) +
                " now); another process is rewriting it in place");
}

// Several threads converting out of one mapping, each releasing pages that
// the others may be reading (run under TSan by scripts/tsan.sh).
TEST_F(SafetensorsTest, ConcurrentReadIntoWithConversion) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (uint32_t i = 0; i < 6; ++i)
    tensors.emplace_back(std::string(1, char('a' + i)), float_values(DType::bf16, 1000 + i, i));
  write_safetensors(path("c.safetensors"), tensors);
  const SafetensorsFile file = read_safetensors(path("c.safetensors"));
  EXPECT_EQ(concurrent_mismatches(tensors,
                                  [&](const std::string& name, const Tensor& written) {
                                    Tensor dst = Tensor::empty(written.shape(), DType::f32);
                                    file.read_into(name, dst);
                                    return same_bytes(dst, written.to(DType::f32));
                                  }),
            0);
}

}  // namespace
}  // namespace reprise::io
