// The bucketed reducer: every gradient becomes the rank-ordered sum of the
// ranks' gradients, whatever the bucket cuts and the order backward
// finishes them in; a parameter no rank touched keeps no gradient.
#include "parallel/gradient_buckets.h"

#include <gtest/gtest.h>

#include "autograd/backward.h"
#include "engine/accumulate.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "tests/parallel/test_world.h"
#include "tests/support/expect_error.h"

namespace reprise::parallel {
namespace {

// Rank r's gradient for parameter p of `shape`: mixed magnitudes.
Tensor grad_of(int r, int p, const Shape& shape) {
  const int64_t n = numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[size_t(i)] = float((r % 2 ? 3e6 : -7e-4) * double(1 + (i + p) % 5) + 0.01 * double(r + i));
  }
  return Tensor::from_vector(v, shape);
}

TEST(GradientBuckets, EveryGradientIsTheRankOrderedSum) {
  Communicator& c = *testing::test_world().communicator();
  const std::vector<Shape> shapes{{7, 5}, {13}, {3, 3}, {2}, {6, 2}};
  std::vector<nn::NamedParameter> params;
  for (size_t p = 0; p < shapes.size(); ++p) {
    std::string name = "p";  // (not "p" + ...: GCC 12's -Wrestrict misfires on it)
    name += std::to_string(p);
    params.push_back({name, Tensor::zeros(shapes[p]).requires_grad(true)});
  }
  // 32 bytes: most parameters in a bucket of their own, one bucket of two.
  GradientBuckets buckets(c.duplicate(), params, 32);
  EXPECT_GT(buckets.num_buckets(), size_t(2));
  for (int step = 0; step < 2; ++step) {
    // loss = sum_p <p, G_p>: parameter 2 only on rank 0, parameter 3 never.
    Tensor loss = Tensor::zeros({});
    for (size_t p = 0; p < shapes.size(); ++p) {
      if (p == 3 || (p == 2 && c.rank() != 0)) continue;
      loss =
          ops::add(loss, ops::sum(ops::mul(params[p].value, grad_of(c.rank(), int(p), shapes[p]))));
    }
    buckets.begin();
    autograd::backward(loss);
    buckets.finish();
    for (size_t p = 0; p < shapes.size(); ++p) {
      const Tensor g = params[p].value.grad();
      if (p == 3) {
        EXPECT_FALSE(g.defined()) << "no rank had a gradient of p3";
        continue;
      }
      ASSERT_TRUE(g.defined()) << params[p].name;
      Tensor expected = p == 2 ? grad_of(0, 2, shapes[2]) : grad_of(0, int(p), shapes[p]);
      for (int r = 1; r < c.size() && p != 2; ++r) {
        expected = sum_of(expected, grad_of(r, int(p), shapes[p]));
      }
      EXPECT_EQ(g.to_vector<float>(), expected.to_vector<float>()) << params[p].name;
    }
    const GradientBuckets::Timing& t = buckets.last_timing();
    ASSERT_EQ(t.buckets.size(), buckets.num_buckets());
    for (const GradientBuckets::BucketTiming& b : t.buckets) {
      EXPECT_LE(b.start, b.end);
      EXPECT_LE(b.end, t.done);
    }
    EXPECT_LE(t.busy_during_backward(), t.busy());
    for (nn::NamedParameter& p : params) p.value.set_grad(Tensor());
  }
}

TEST(GradientBuckets, RefusesWhatItCannotReduce) {
  Communicator& c = *testing::test_world().communicator();
  const Tensor f64 = Tensor::zeros({3}, DType::f64).requires_grad(true);
  testing::expect_error(
      [&] {
        GradientBuckets(c.duplicate(), {{"w", f64}}, 1024);
      },
      {"GradientBuckets", "'w'", "f32"});
  const Tensor w = Tensor::zeros({3}).requires_grad(true);
  GradientBuckets buckets(c.duplicate(), {{"w", w}}, 1024);
  testing::expect_error([&] { buckets.finish(); }, {"begin() was not called"});
}

}  // namespace
}  // namespace reprise::parallel
