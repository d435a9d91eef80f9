// Recompute on the GPU is bit-exact: Llama and MoE models with residual and
// attention dropout, trained on a CUDA device, give bitwise the same
// gradients with full and op-level SAC checkpointing as without, and the
// same bits on a second run; over 20 AdamW steps of an MoE with its router
// recomputed, the bitwise verifier finds no replayed value (routing
// decisions included) that differs from its forward, and the losses equal
// those of the run without checkpointing. All of it in f32, under bf16
// mixed precision (nn/autocast.h: bf16 products on cuBLASLt, whose
// pinned algorithms a replay runs again), and with attention in bf16 too
// (cuDNN's fused attention, its plan cached, its dropout keyed by the
// recorded reservation). Skips without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "nn/checkpointing.h"
#include "nn/device.h"
#include "nn/llama.h"
#include "nn/optim.h"
#include "tests/support/tiny_train.h"
#include "tests/support/tokens.h"

namespace reprise::nn {
namespace {

using testing::kGpu;

// The projections' dtype and attention's.
struct Precision {
  DType dtype, attention;
};

class GpuRecompute : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    if (!built_with_cuda()) GTEST_SKIP() << "built without CUDA";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  }
};

// A model on the GPU with its own generators, its layers' checkpointing,
// and a batch.
struct GpuModel {
  rng::Generator init{3};
  std::shared_ptr<rng::Generator> dropout = std::make_shared<rng::Generator>(5);
  LlamaForCausalLM model;
  LayerCheckpointing layers;
  Tensor ids;
  Precision precision;

  GpuModel(bool moe, CheckpointConfig ckpt, Precision precision)
      : model(testing::gpu_test_model(moe, 0.1), init),
        layers(std::move(ckpt), dropout, moe_scopes_of(model.config())),
        ids(testing::random_token_ids(4, 96, 96, 9).to(kGpu)),
        precision(precision) {
    to_device(model, kGpu);
    model.set_dropout_generator(dropout);
  }

  // One forward and backward: the loss and every gradient, as host bytes.
  std::vector<std::vector<unsigned char>> step() {
    model.zero_grad();
    Tensor loss;
    {
      const Autocast autocast(precision.dtype, precision.attention);
      loss = model.causal_lm_loss(model.forward(ids, layers.runner()), ids);
    }
    autograd::backward(loss);
    std::vector<std::vector<unsigned char>> out{bytes(loss)};
    for (const NamedParameter& p : model.parameters()) out.push_back(bytes(p.value.grad()));
    return out;
  }

  static std::vector<unsigned char> bytes(const Tensor& t) {
    const Tensor h = t.detach().contiguous().to(Device::cpu());
    const auto* p = static_cast<const unsigned char*>(h.raw_data());
    return std::vector<unsigned char>(p, p + h.nbytes());
  }
};

CheckpointConfig kind(CheckpointConfig::Kind k, bool save_router = true) {
  CheckpointConfig c;
  c.kind = k;
  c.save_router = save_router;
  c.verify = autograd::Verify::bitwise;
  return c;
}

TEST_P(GpuRecompute, CheckpointedGradientsAreBitwiseThoseWithoutCheckpointing) {
  const Precision dtype = GetParam();
  for (bool moe : {false, true}) {
    const auto reference = GpuModel(moe, kind(CheckpointConfig::Kind::none), dtype).step();
    EXPECT_EQ(GpuModel(moe, kind(CheckpointConfig::Kind::none), dtype).step(), reference)
        << (moe ? "moe" : "llama") << ": a second run gives other bits";
    for (auto k : {CheckpointConfig::Kind::full, CheckpointConfig::Kind::op_sac}) {
      const autograd::RecomputeStats before = autograd::recompute_stats();
      const auto got = GpuModel(moe, kind(k, /*save_router=*/false), dtype).step();
      const autograd::RecomputeStats d = autograd::recompute_stats() - before;
      EXPECT_GT(d.replays, 0);
      EXPECT_EQ(d.mismatches, 0);
      ASSERT_EQ(got.size(), reference.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i] == reference[i])
            << (moe ? "moe" : "llama") << ", policy " << int(k) << ", result " << i;
      }
    }
  }
}

TEST_P(GpuRecompute, NoTokenChangesExpertOnRecomputeOver20Steps) {
  auto train = [&](CheckpointConfig ckpt) {
    GpuModel m(true, std::move(ckpt), GetParam());
    AdamW opt(m.model.parameters(), {.lr = 3e-3});
    std::vector<std::vector<unsigned char>> losses;
    for (int s = 0; s < 20; ++s) {
      losses.push_back(m.step()[0]);
      opt.step();
    }
    return losses;
  };
  const auto plain = train(kind(CheckpointConfig::Kind::none));
  const autograd::RecomputeStats before = autograd::recompute_stats();
  const auto recomputed = train(kind(CheckpointConfig::Kind::full, /*save_router=*/false));
  const autograd::RecomputeStats d = autograd::recompute_stats() - before;
  EXPECT_EQ(d.replays, 20 * 2);
  EXPECT_EQ(d.mismatches, 0) << "a replayed value, routing included, differed from its forward";
  EXPECT_EQ(recomputed, plain);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuRecompute,
                         ::testing::Values(Precision{DType::f32, DType::f32},
                                           Precision{DType::bf16, DType::f32},
                                           Precision{DType::bf16, DType::bf16}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.dtype)) + "_attention_" +
                                  dtype_name(info.param.attention);
                         });

}  // namespace
}  // namespace reprise::nn
