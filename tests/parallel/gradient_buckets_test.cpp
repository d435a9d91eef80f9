// The bucketed reducer: every gradient becomes the rank-ordered sum of the
// ranks' gradients, whatever the bucket cuts and the order backward
// finishes them in; a parameter no rank touched keeps no gradient. Reduced
// by scatter, each rank gets its blocks of the same sums.
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

const std::vector<Shape> kShapes{{7, 5}, {13}, {3, 3}, {2}, {6, 2}};

std::vector<nn::NamedParameter> make_params() {
  std::vector<nn::NamedParameter> params;
  for (size_t p = 0; p < kShapes.size(); ++p) {
    std::string name = "p";  // (not "p" + ...: GCC 12's -Wrestrict misfires on it)
    name += std::to_string(p);
    params.push_back({name, Tensor::zeros(kShapes[p]).requires_grad(true)});
  }
  return params;
}

// One backward of loss = sum_p <p, G_p>: parameter 2 only on rank 0,
// parameter 3 never.
void run_backward(GradientBuckets& buckets, const std::vector<nn::NamedParameter>& params,
                  int rank) {
  Tensor loss = Tensor::zeros({});
  for (size_t p = 0; p < kShapes.size(); ++p) {
    if (p == 3 || (p == 2 && rank != 0)) continue;
    loss = ops::add(loss, ops::sum(ops::mul(params[p].value, grad_of(rank, int(p), kShapes[p]))));
  }
  buckets.begin();
  autograd::backward(loss);
  buckets.finish();
}

// The sum over ranks of parameter p's gradients (undefined for p3).
Tensor expected_sum(size_t p, int ranks) {
  if (p == 3) return Tensor();
  Tensor expected = grad_of(0, int(p), kShapes[p]);
  for (int r = 1; r < ranks && p != 2; ++r) {
    expected = sum_of(expected, grad_of(r, int(p), kShapes[p]));
  }
  return expected;
}

TEST(GradientBuckets, EveryGradientIsTheRankOrderedSum) {
  Communicator& c = *testing::test_world().communicator();
  std::vector<nn::NamedParameter> params = make_params();
  // 32 bytes: most parameters in a bucket of their own, one bucket of two.
  GradientBuckets buckets(c.duplicate(), nn::ShardLayout::build(params, 32, 1, 1),
                          Reduction::all_reduce);
  EXPECT_GT(buckets.num_buckets(), size_t(2));
  for (int step = 0; step < 2; ++step) {
    run_backward(buckets, params, c.rank());
    for (size_t p = 0; p < kShapes.size(); ++p) {
      const Tensor g = params[p].value.grad();
      if (p == 3) {
        EXPECT_FALSE(g.defined()) << "no rank had a gradient of p3";
        continue;
      }
      ASSERT_TRUE(g.defined()) << params[p].name;
      EXPECT_EQ(g.to_vector<float>(), expected_sum(p, c.size()).to_vector<float>())
          << params[p].name;
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

// Reduced by scatter over blocks of 4 elements (most parameters cut across
// ranks), rank r holds block r of every bucket's sums, zeros in the
// padding, and the presence of every parameter; the gradients are gone.
TEST(GradientBuckets, ScatteredBlocksAreTheSumsThisRankOwns) {
  Communicator& c = *testing::test_world().communicator();
  const int R = c.size();
  std::vector<nn::NamedParameter> params = make_params();
  const nn::ShardLayout layout = nn::ShardLayout::build(params, 64, R, 4);
  GradientBuckets buckets(c.duplicate(), layout, Reduction::reduce_scatter);
  for (int step = 0; step < 2; ++step) {
    run_backward(buckets, params, c.rank());
    const nn::ShardGradients sums = buckets.take_gradients();
    ASSERT_EQ(sums.blocks.size(), layout.buckets.size());
    EXPECT_EQ(sums.present, (std::vector<bool>{true, true, true, false, true}));
    // Every element of this rank's blocks: a piece's sum, or padding.
    std::vector<std::vector<float>> blocks;
    for (size_t b = 0; b < layout.buckets.size(); ++b) {
      ASSERT_EQ(sums.blocks[b].numel(), layout.buckets[b].block);
      blocks.push_back(std::vector<float>(size_t(layout.buckets[b].block), 0.0f));
    }
    for (const nn::ShardLayout::Piece& piece : layout.pieces(c.rank())) {
      const std::vector<float> whole =
          piece.param == 3 ? std::vector<float>(size_t(params[3].value.numel()), 0.0f)
                           : expected_sum(piece.param, R).to_vector<float>();
      std::copy(whole.begin() + piece.begin, whole.begin() + piece.end,
                blocks[piece.bucket].begin() + piece.at);
    }
    for (size_t b = 0; b < layout.buckets.size(); ++b) {
      EXPECT_EQ(sums.blocks[b].to_vector<float>(), blocks[b]) << "bucket " << b;
    }
    for (const nn::NamedParameter& p : params) EXPECT_FALSE(p.value.grad().defined()) << p.name;
    EXPECT_TRUE(buckets.take_gradients().blocks.empty()) << "handed over once";
  }
}

// A bucket that one gradient fills exactly is reduce-scattered from the
// gradient itself; its sums are the same.
TEST(GradientBuckets, AGradientThatFillsItsBucketIsSentAsItIs) {
  Communicator& c = *testing::test_world().communicator();
  const int R = c.size();
  // 1-byte buckets: each parameter alone. "whole" (8 R elements) fills
  // its bucket of R blocks of 8; "padded" (5) does not.
  std::vector<nn::NamedParameter> params{
      {"padded", Tensor::zeros({5}).requires_grad(true)},
      {"whole", Tensor::zeros({2, 4 * int64_t(R)}).requires_grad(true)}};
  const nn::ShardLayout layout = nn::ShardLayout::build(params, 1, R, 4);
  GradientBuckets buckets(c.duplicate(), layout, Reduction::reduce_scatter);
  Tensor loss = ops::add(ops::sum(ops::mul(params[0].value, grad_of(c.rank(), 0, {5}))),
                         ops::sum(ops::mul(params[1].value, grad_of(c.rank(), 1, {2, 4 * R}))));
  buckets.begin();
  autograd::backward(loss);
  buckets.finish();
  const nn::ShardGradients sums = buckets.take_gradients();
  for (const nn::ShardLayout::Piece& piece : layout.pieces(c.rank())) {
    const Shape shape = params[piece.param].value.shape();
    Tensor expected = grad_of(0, int(piece.param), shape);
    for (int r = 1; r < R; ++r) expected = sum_of(expected, grad_of(r, int(piece.param), shape));
    const std::vector<float> whole = expected.to_vector<float>();
    const std::vector<float> got = sums.blocks[piece.bucket].to_vector<float>();
    for (int64_t e = piece.begin; e < piece.end; ++e) {
      EXPECT_EQ(got[size_t(piece.at + e - piece.begin)], whole[size_t(e)])
          << params[piece.param].name << "[" << e << "]";
    }
  }
  EXPECT_EQ(sums.present, (std::vector<bool>{true, true}));
}

TEST(GradientBuckets, RefusesWhatItCannotReduce) {
  Communicator& c = *testing::test_world().communicator();
  const Tensor f64 = Tensor::zeros({3}, DType::f64).requires_grad(true);
  testing::expect_error(
      [&] {
        nn::ShardLayout::build({{"w", f64}}, 1024, 1, 1);
      },
      {"ShardLayout", "'w'", "f32"});
  const Tensor w = Tensor::zeros({3}).requires_grad(true);
  GradientBuckets buckets(c.duplicate(), nn::ShardLayout::build({{"w", w}}, 1024, 1, 1),
                          Reduction::all_reduce);
  testing::expect_error([&] { buckets.finish(); }, {"begin() was not called"});
}

}  // namespace
}  // namespace reprise::parallel
