// softmax, log_softmax, cross_entropy, rmsnorm, layernorm and rotary in f32
// against PyTorch / Hugging Face (tests/fixtures/golden_nn_ops.py): forward
// values and the gradients of a fixed output weighting gy.
//
// Tolerances: both sides compute in f32 with the same formulas, so the
// differences are summation orders (torch's vectorised cascade sums vs our
// 16-lane row sums) and, for rotary, libm's cosf/sinf/powf vs torch's
// SLEEF versions (each within 1 ulp). Either gives a few f32 ulps on
// O(1) values: we allow atol 1e-6 and rtol 1e-5 (about 80 ulps), far below
// any formula error (a wrong eps, a missing term) and far above noise.
#include <string>

#include "autograd/backward.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/rotary.h"
#include "ops/softmax.h"
#include "tests/support/golden.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using reprise::Tensor;

constexpr double kAtol = 1e-6, kRtol = 1e-5;

const std::map<std::string, Tensor>& golden() {
  static const std::map<std::string, Tensor> g = load_golden("nn_ops.safetensors");
  return g;
}

Tensor get(const std::string& name) {
  auto it = golden().find(name);
  EXPECT_NE(it, golden().end()) << "golden file has no " << name;
  return it == golden().end() ? Tensor() : it->second;
}

// A fresh leaf that requires grad, with the golden tensor's values.
Tensor leaf(const std::string& name) { return get(name).clone().requires_grad(true); }

TEST(NnOpsGolden, RmsnormMatchesLlamaRmsNorm) {
  for (std::string c : {"rmsnorm_256", "rmsnorm_33"}) {
    SCOPED_TRACE(c);
    Tensor x = leaf(c + ".x"), w = leaf(c + ".w");
    Tensor y = ops::rmsnorm(x, w, get(c + ".eps").item<double>());
    autograd::backward(y, get(c + ".gy"));
    EXPECT_TRUE(all_close(y, get(c + ".y"), kAtol, kRtol));
    EXPECT_TRUE(all_close(x.grad(), get(c + ".dx"), kAtol, kRtol));
    // dw sums g * xhat over 20 or 15 rows: a longer sum, same tolerance.
    EXPECT_TRUE(all_close(w.grad(), get(c + ".dw"), kAtol, kRtol));
  }
}

TEST(NnOpsGolden, LayernormMatchesTorch) {
  for (std::string c : {"layernorm_bias", "layernorm_nobias"}) {
    SCOPED_TRACE(c);
    bool bias = c == "layernorm_bias";
    Tensor x = leaf(c + ".x"), w = leaf(c + ".w");
    Tensor b = bias ? leaf(c + ".b") : Tensor();
    Tensor y = ops::layernorm(x, w, b, 1e-5);
    autograd::backward(y, get(c + ".gy"));
    EXPECT_TRUE(all_close(y, get(c + ".y"), kAtol, kRtol));
    EXPECT_TRUE(all_close(x.grad(), get(c + ".dx"), kAtol, kRtol));
    EXPECT_TRUE(all_close(w.grad(), get(c + ".dw"), kAtol, kRtol));
    if (bias) {
      EXPECT_TRUE(all_close(b.grad(), get(c + ".db"), kAtol, kRtol));
    }
  }
}

TEST(NnOpsGolden, CrossEntropyMatchesTorch) {
  for (std::string c : {"ce_mean", "ce_sum"}) {
    SCOPED_TRACE(c);
    Tensor logits = leaf(c + ".logits");
    auto reduction = c == "ce_mean" ? ops::Reduction::mean : ops::Reduction::sum;
    Tensor loss = ops::cross_entropy(logits, get(c + ".targets"),
                                     get(c + ".ignore_index").item<int64_t>(), reduction);
    autograd::backward(loss, get(c + ".gy"));
    EXPECT_TRUE(all_close(loss, get(c + ".loss"), kAtol, kRtol));
    EXPECT_TRUE(all_close(logits.grad(), get(c + ".dlogits"), kAtol, kRtol));
  }
}

TEST(NnOpsGolden, SoftmaxMatchesTorch) {
  for (std::string c : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(c);
    Tensor x = leaf(c + ".x");
    Tensor y = c == "softmax" ? ops::softmax(x) : ops::log_softmax(x);
    autograd::backward(y, get(c + ".gy"));
    EXPECT_TRUE(all_close(y, get(c + ".y"), kAtol, kRtol));
    EXPECT_TRUE(all_close(x.grad(), get(c + ".dx"), kAtol, kRtol));
  }
}

TEST(NnOpsGolden, RotaryMatchesHfApplyRotaryPosEmb) {
  for (std::string c : {"rope_10k", "rope_500k"}) {
    SCOPED_TRACE(c);
    const double theta = get(c + ".theta").item<double>();
    Tensor positions = get(c + ".positions");  // (B, T), one row near position 2048
    for (std::string t : {"q", "k"}) {
      Tensor x = leaf(c + "." + t);
      Tensor y = ops::rotary(x, positions, theta);
      autograd::backward(y, get(c + ".g" + t));
      EXPECT_TRUE(all_close(y, get(c + "." + t + "_out"), kAtol, kRtol));
      EXPECT_TRUE(all_close(x.grad(), get(c + ".d" + t), kAtol, kRtol));
    }
  }
}

// Rotating one-hot vectors reads our cos/sin tables out exactly: head h of
// x = e_h gives y[h] = cos a_h and y[h + half] = sin a_h. inv_freq and the
// f32 angles pos * inv_freq match HF bit for bit (an angle off by one ulp
// near position 2048 would move cos by ~1e-4); the values differ by one ulp
// where torch's SLEEF cosf/sinf (1-ulp bound) and libm's (correctly rounded
// here) disagree, about 2-8% of entries. rtol 2^-23 allows that ulp only.
TEST(NnOpsGolden, RotaryTablesMatchHfLlamaRotaryEmbedding) {
  for (std::string c : {"rope_10k", "rope_500k"}) {
    SCOPED_TRACE(c);
    Tensor hf_cos = get(c + ".cos"), hf_sin = get(c + ".sin");  // (B, T, D), halves repeated
    const int64_t B = hf_cos.size(0), T = hf_cos.size(1), D = hf_cos.size(2), half = D / 2;
    Tensor x = Tensor::zeros({B, half, T, D});
    float* px = x.data<float>();
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < half; ++h) {
        for (int64_t t = 0; t < T; ++t) px[((b * half + h) * T + t) * D + h] = 1.0f;
      }
    }
    std::vector<float> y =
        ops::rotary(x, get(c + ".positions"), get(c + ".theta").item<double>()).to_vector<float>();
    Tensor cos = Tensor::empty({B, T, D}), sin = Tensor::empty({B, T, D});
    float* pc = cos.data<float>();
    float* ps = sin.data<float>();
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < D; ++i) {
          const int64_t h = i % half;
          const float* row = y.data() + ((b * half + h) * T + t) * D;
          pc[(b * T + t) * D + i] = row[h];
          ps[(b * T + t) * D + i] = row[h + half];
        }
      }
    }
    EXPECT_TRUE(all_close(cos, hf_cos, 0, 0x1p-23));
    EXPECT_TRUE(all_close(sin, hf_sin, 0, 0x1p-23));
  }
}

}  // namespace
}  // namespace reprise::testing
