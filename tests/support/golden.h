#pragma once
// PyTorch golden files: safetensors files under tests/fixtures/, made by the
// golden_<family>.py script beside them (see tests/fixtures/README.md), and
// a tolerance comparison that reports the worst element.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/tensor.h"

namespace reprise::testing {

// Every tensor of tests/fixtures/<file>, by name. Raises an Error when the
// file is missing or malformed, or its metadata lacks
// "format": "reprise-golden-v1".
std::map<std::string, Tensor> load_golden(const std::string& file);

// golden.at(name), raising an Error that names the missing tensor.
const Tensor& golden_tensor(const std::map<std::string, Tensor>& golden, const std::string& name);

// tests/fixtures/<name>.
std::string fixture_path(const std::string& name);

// A model's golden file and the fixture folder of the tiny Hugging Face
// model it was made from. The file is loaded on first use and kept for the
// rest of the test program.
struct GoldenModel {
  std::string file;    // under tests/fixtures/
  std::string folder;  // under tests/fixtures/

  const std::map<std::string, Tensor>& tensors() const;
  const Tensor& get(const std::string& name) const { return golden_tensor(tensors(), name); }
  std::string dir() const { return fixture_path(folder); }
};

// The largest |element| of an f32 tensor: the scale of a gradient, for
// tolerances relative to it.
double max_abs(const Tensor& t);

// Passes when actual and expected have the same shape and every element
// satisfies |a - e| <= atol + rtol * |e| (compared as doubles; NaN matches
// NaN, an infinity only the same infinity). On failure the message gives
// the number of failing elements and the worst one: its index, both values
// and the allowed difference. Dtypes may differ (an f32 result against an
// f64 golden value, say).
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol,
                                     double rtol);

}  // namespace reprise::testing
