// tests/support/golden: load_golden's format check and all_close's report.

#include "tests/support/golden.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.h"

namespace reprise::testing {
namespace {

std::string message(const ::testing::AssertionResult& r) { return r.message(); }

TEST(Golden, LoadsAVersionedFile) {
  std::map<std::string, Tensor> g = load_golden("io_golden.safetensors");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g.at("x").to_vector<double>(), (std::vector<double>{1.0, 2.0, 3.0}));
}

TEST(Golden, RefusesAFileWithoutTheFormatEntry) {
  try {
    load_golden("io_torch.safetensors");  // written by safetensors, but not a golden file
    FAIL() << "accepted a file without format metadata";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("io_torch.safetensors has metadata format \"(none)\", expected "
                     "\"reprise-golden-v1\""),
              std::string::npos)
        << m;
  }
  EXPECT_THROW(load_golden("no_such_file.safetensors"), Error);
}

TEST(Golden, AllCloseAcceptsWithinTolerance) {
  Tensor e = Tensor::from_vector<double>({1.0, -2.0, 100.0, NAN, INFINITY}, {5});
  Tensor a = Tensor::from_vector<float>({1.0f + 1e-7f, -2.0f, 100.001f, NAN, INFINITY}, {5});
  EXPECT_TRUE(all_close(a, e, 1e-6, 1e-5));
  EXPECT_TRUE(all_close(e, e, 0, 0));
}

TEST(Golden, AllCloseReportsTheWorstElement) {
  Tensor e = Tensor::zeros({2, 3}, DType::f64);
  Tensor a = Tensor::zeros({2, 3}, DType::f64);
  a.data<double>()[1] = 0.5;   // index [0, 1]
  a.data<double>()[5] = -2.0;  // index [1, 2], the worst
  ::testing::AssertionResult r = all_close(a, e, 1e-3, 0);
  ASSERT_FALSE(r);
  std::string m = message(r);
  EXPECT_NE(m.find("2 of 6 elements of f64[2, 3] cpu differ"), std::string::npos) << m;
  EXPECT_NE(m.find("worst at [1, 2]: actual -2, expected 0, |diff| 2, allowed 0.001"),
            std::string::npos)
      << m;
}

TEST(Golden, AllCloseTreatsNanAndInfinityStrictly) {
  Tensor e = Tensor::from_vector<double>({1.0, INFINITY}, {2});
  EXPECT_FALSE(all_close(Tensor::from_vector<double>({NAN, INFINITY}, {2}), e, 1, 1));
  EXPECT_FALSE(all_close(Tensor::from_vector<double>({1.0, -INFINITY}, {2}), e, 1, 1));
  EXPECT_FALSE(all_close(Tensor::from_vector<double>({1.0, 1e308}, {2}), e, 1, 1));
}

TEST(Golden, AllCloseRejectsShapeMismatch) {
  ::testing::AssertionResult r = all_close(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}), 1, 1);
  ASSERT_FALSE(r);
  EXPECT_NE(message(r).find("shape mismatch: actual f32[2, 3] cpu, expected f32[3, 2] cpu"),
            std::string::npos)
      << message(r);
}

}  // namespace
}  // namespace reprise::testing
