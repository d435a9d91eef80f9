// Checkpoint regions with dropout: recorded replay is exact under every
// policy and nesting with nothing stashed; stash mode (PyTorch's
// preserve_rng_state=True) is exact at a cost; fresh mode (False) gives
// different gradients and the bitwise verifier names the dropout node.
#include <gtest/gtest.h>

#include <memory>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "ops/binary.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "tests/support/gradcheck.h"

namespace reprise::autograd {
namespace {

using testing::uniform;

// h = x + dropout(tanh(x * w), 0.3) * silu(dropout(x + b, 0.2))
Tensor dropout_block(const Tensor& x, const Tensor& w, const Tensor& b, rng::Generator& gen) {
  Tensor a = ops::dropout(ops::tanh(ops::mul(x, w)), 0.3, gen);
  Tensor g = ops::silu(ops::dropout(ops::add(x, b), 0.2, gen));
  return ops::add(x, ops::mul(a, g));
}

struct Model {
  std::vector<Tensor> w, b;
  std::shared_ptr<rng::Generator> gen = std::make_shared<rng::Generator>(1234);
  Model(int layers, int64_t width) {
    for (int i = 0; i < layers; ++i) {
      w.push_back(uniform({width}, -1, 1, 500 + i, DType::f32).requires_grad(true));
      b.push_back(uniform({width}, -1, 1, 600 + i, DType::f32).requires_grad(true));
    }
  }
  using Wrap = std::function<Tensor(int, const std::function<Tensor()>&)>;
  // One step from a fixed generator state; returns every gradient.
  std::vector<std::vector<float>> step(const Tensor& x, const Wrap& wrap) {
    gen->manual_seed(1234);
    for (auto& t : w) t.set_grad(Tensor());
    for (auto& t : b) t.set_grad(Tensor());
    Tensor h = x;
    for (int i = 0; i < int(w.size()); ++i) {
      h = wrap(i, [&, i, in = h] { return dropout_block(in, w[size_t(i)], b[size_t(i)], *gen); });
    }
    // Randomness after the regions too: replay must not disturb it.
    backward(ops::sum(ops::mul(ops::dropout(h, 0.1, *gen), h)));
    std::vector<std::vector<float>> g;
    for (auto& t : w) g.push_back(t.grad().to_vector<float>());
    for (auto& t : b) g.push_back(t.grad().to_vector<float>());
    return g;
  }
};

Model::Wrap unwrapped() {
  return [](int, const std::function<Tensor()>& f) { return f(); };
}
Model::Wrap regions(const Policy& p, CheckpointOptions o = {}) {
  return [p, o](int i, const std::function<Tensor()>& f) {
    return checkpoint("layers." + std::to_string(i), p, f, o);
  };
}

TEST(CheckpointRng, RecordedReplayIsBitwiseEqualForEveryPolicy) {
  Model m(4, 129);
  Tensor x = uniform({3, 129}, -1, 1, 21, DType::f32);
  auto expected = m.step(x, unwrapped());
  for (const Policy& p :
       {policies::full(), policies::save_ops({"dropout"}), policies::save_all(),
        policies::save_every_nth("mul", 2),
        policies::combine({policies::save_scopes("layers.2"), policies::full()})}) {
    int64_t stashed = recompute_stats().rng_bytes_stashed;
    EXPECT_EQ(m.step(x, regions(p)), expected) << p.name();
    EXPECT_EQ(recompute_stats().rng_bytes_stashed, stashed) << "recorded mode stashes nothing";
  }
}

TEST(CheckpointRng, NestedRegionsWithDropoutAreBitwiseEqual) {
  Model m(4, 65);
  Tensor x = uniform({2, 65}, -1, 1, 22, DType::f32);
  auto expected = m.step(x, unwrapped());
  // Layers 0-1 and 2-3 in outer regions, each layer in an inner one.
  auto nested = [&](int i, const std::function<Tensor()>& f) {
    return checkpoint("outer", i % 2 ? policies::save_all() : policies::full(), [&] {
      return checkpoint("inner." + std::to_string(i), policies::full(), f);
    });
  };
  EXPECT_EQ(m.step(x, nested), expected);
}

TEST(CheckpointRng, StashModeIsExactAndCostsBytes) {
  Model m(3, 65);
  Tensor x = uniform({2, 65}, -1, 1, 23, DType::f32);
  auto expected = m.step(x, unwrapped());
  int64_t stashed = recompute_stats().rng_bytes_stashed;
  CheckpointOptions stash{.rng = RngReplay::stash, .generator = m.gen};
  EXPECT_EQ(m.step(x, regions(policies::full(), stash)), expected);
  EXPECT_GT(recompute_stats().rng_bytes_stashed, stashed);
}

TEST(CheckpointRng, FreshModeGivesWrongGradientsAndTheVerifierNamesDropout) {
  Model m(2, 65);
  Tensor x = uniform({2, 65}, -1, 1, 24, DType::f32);
  auto expected = m.step(x, unwrapped());
  CheckpointOptions fresh{.rng = RngReplay::fresh, .generator = m.gen};
  EXPECT_NE(m.step(x, regions(policies::full(), fresh)), expected);

  fresh.verify = Verify::bitwise;
  try {
    m.step(x, regions(policies::full(), fresh));
    FAIL() << "expected a verifier error";
  } catch (const Error& e) {
    std::string msg = e.what();
    // The first replayed node that differs is the first dropout of the last region.
    EXPECT_NE(msg.find("dropout at 'layers.1'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element(s) differ"), std::string::npos) << msg;
  }
}

// A stash or fresh region shares its generator: the caller's handle may be
// gone before backward replays it.
TEST(CheckpointRng, ARegionKeepsItsGeneratorAlive) {
  for (RngReplay mode : {RngReplay::stash, RngReplay::fresh}) {
    SCOPED_TRACE(rng_replay_name(mode));
    auto run = [&](bool keep) {
      Tensor x = uniform({3, 17}, -1, 1, 41, DType::f32).requires_grad(true);
      std::shared_ptr<rng::Generator> gen = std::make_shared<rng::Generator>(8);
      const std::weak_ptr<rng::Generator> watch = gen;
      const CheckpointOptions options{.rng = mode, .generator = gen};
      Tensor y = checkpoint(
          "r", policies::full(), [&] { return ops::tanh(ops::dropout(x, 0.4, *gen)); }, options);
      if (!keep) gen.reset();
      EXPECT_FALSE(watch.expired());  // the region holds it
      backward(ops::sum(ops::mul(y, y)));
      return x.grad().to_vector<float>();
    };
    EXPECT_EQ(run(false), run(true));
  }
}

TEST(CheckpointRng, GradcheckThroughARegionWithDropout) {
  rng::Generator gen(77);
  EXPECT_TRUE(testing::gradcheck(
      [&](const testing::Inputs& in) {
        gen.manual_seed(77);  // the same reservation at every evaluation
        return checkpoint("g", policies::full(),
                          [&] { return dropout_block(in[0], in[1], in[2], gen); });
      },
      {testing::param({2, 5}, 31), testing::param({5}, 32), testing::param({5}, 33)}));
}

}  // namespace
}  // namespace reprise::autograd
