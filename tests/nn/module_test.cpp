// nn/module and nn/layers: dotted names, parameter accounting, training
// mode, and the layers' forwards against their ops.
#include "nn/module.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/backward.h"
#include "engine/memory_stats.h"
#include "nn/layers.h"
#include "ops/reduce.h"

namespace reprise::nn {
namespace {

struct Block : Module {
  Linear proj{"proj", 3, 2};
  RMSNorm norm{"norm", 2, 1e-5};
  explicit Block(std::string name) : Module(std::move(name)) {
    register_module(proj);
    register_module(norm);
  }
};

struct Net : Module {
  Tensor scale = register_parameter("scale", {2});
  Embedding embed{"embed", 5, 3};
  ModuleList<Block> blocks{"blocks"};
  Net() : Module("") {
    register_module(embed);
    register_module(blocks);
    blocks.append(std::make_unique<Block>("0"));
    blocks.append(std::make_unique<Block>("1"));
  }
};

TEST(Module, NamesAreDottedPathsInRegistrationOrder) {
  Net net;
  std::vector<std::string> names;
  std::vector<bool> decay;
  for (const NamedParameter& p : net.parameters()) {
    names.push_back(p.name);
    decay.push_back(p.decay);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"scale", "embed.weight", "blocks.0.proj.weight",
                                             "blocks.0.norm.weight", "blocks.1.proj.weight",
                                             "blocks.1.norm.weight"}));
  EXPECT_EQ(decay, (std::vector<bool>{true, false, true, false, true, false}));
  // A subtree names its parameters relative to itself, its own name first.
  EXPECT_EQ(net.blocks[1].parameters()[0].name, "1.proj.weight");
  EXPECT_EQ(net.num_parameters(), 2 + 15 + 2 * (6 + 2));
  EXPECT_TRUE(net.parameter("blocks.1.proj.weight").is_same(net.blocks[1].proj.weight()));
  try {
    net.parameter("blocks.1.proj.wieght");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closest: blocks.1.proj.weight"), std::string::npos)
        << e.what();
  }
}

TEST(Module, ParametersAreGradLeavesCountedAsParameterMemory) {
  const int64_t before = memory_stats::snapshot()[MemoryKind::parameter].live;
  {
    Linear l("l", 7, 5);
    EXPECT_EQ(memory_stats::snapshot()[MemoryKind::parameter].live - before, 7 * 5 * 4);
    EXPECT_TRUE(l.weight().requires_grad());
    EXPECT_TRUE(l.weight().is_leaf());
    EXPECT_EQ(l.weight().shape(), (Shape{5, 7}));
  }
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::parameter].live, before);
}

TEST(Module, BadNamesAndDuplicatesAreRejected) {
  struct Dup : Module {
    Linear a{"x", 1, 1}, b{"x", 1, 1};
    Dup() : Module("dup") {
      register_module(a);
      register_module(b);
    }
  };
  EXPECT_THROW(Dup(), Error);
  EXPECT_THROW(Linear("a.b", 1, 1), Error);
  EXPECT_THROW(Linear("a", 0, 1), Error);
  EXPECT_THROW(RMSNorm("n", 4, 0.0), Error);
  ModuleList<Linear> list("l");
  EXPECT_THROW(list.append(std::make_unique<Linear>("1", 1, 1)), Error);  // must be "0"
}

TEST(Module, TrainEvalAndZeroGradReachEveryDescendant) {
  Net net;
  EXPECT_TRUE(net.blocks[1].norm.training());
  net.eval();
  EXPECT_FALSE(net.blocks[1].norm.training());
  net.train();
  EXPECT_TRUE(net.blocks[0].proj.training());

  Tensor x = Tensor::ones({4, 3});
  autograd::backward(ops::sum(net.blocks[0].norm.forward(net.blocks[0].proj.forward(x))));
  EXPECT_TRUE(net.blocks[0].proj.weight().grad().defined());
  net.zero_grad();
  for (const NamedParameter& p : net.parameters()) EXPECT_FALSE(p.value.grad().defined()) << p.name;
}

TEST(Layers, ForwardsComputeTheirOps) {
  Linear l("l", 2, 3);
  Embedding e("e", 4, 2);
  RMSNorm n("n", 2, 1e-6);
  {
    NoGradGuard no_grad;
    Tensor(l.weight()).copy_(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
    Tensor(e.weight()).copy_(Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}));
    Tensor(n.weight()).copy_(Tensor::from_vector<float>({2, 0.5f}, {2}));
  }
  // x @ W^T with W (out, in), PyTorch's layout.
  EXPECT_EQ(l.forward(Tensor::from_vector<float>({1, -1}, {1, 2})).to_vector<float>(),
            (std::vector<float>{-1, -1, -1}));
  EXPECT_EQ(e.forward(Tensor::from_vector<int64_t>({3, 0, 3}, {3})).to_vector<float>(),
            (std::vector<float>{6, 7, 0, 1, 6, 7}));
  // rms of (3, 4) is sqrt(12.5).
  std::vector<float> y = n.forward(Tensor::from_vector<float>({3, 4}, {1, 2})).to_vector<float>();
  EXPECT_NEAR(y[0], 2 * 3 / std::sqrt(12.5 + 1e-6), 1e-6);
  EXPECT_NEAR(y[1], 0.5 * 4 / std::sqrt(12.5 + 1e-6), 1e-6);
  EXPECT_THROW(l.forward(Tensor::ones({1, 3})), Error);  // in_features mismatch
}

}  // namespace
}  // namespace reprise::nn
