// Rollouts on a CUDA device (nn/rollout.h): in the batch-invariant mode
// (engine/cuda_matmul.h: products as FMA chains), the training forward on
// the device gives the sampler's log-probs bit for bit and routes every
// token as the sampler did, dense and MoE. With cuBLASLt (the default) the
// two may differ: the test reports by how much, and asserts nothing of it.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend.h"
#include "engine/cuda_matmul.h"
#include "nn/device.h"
#include "nn/llama.h"
#include "nn/moe.h"
#include "nn/rollout.h"
#include "nn/routing.h"
#include "tests/support/tiny_train.h"

namespace reprise::nn {
namespace {

using testing::kGpu;

// The largest |sampler - trainer| log-prob and the routing flips of one
// batch of rollouts on the device.
struct Agreement {
  double mismatch = 0;
  int64_t flips = 0;
};

Agreement rollouts_against_training(const LlamaForCausalLM& model) {
  const std::vector<std::vector<int64_t>> prompts{
      {3, 14, 15, 9}, {2, 6, 5, 3, 5, 8, 9}, {3, 14, 15, 9}};
  RolloutOptions o;
  o.max_new_tokens = 20;
  o.sampling.temperature = 1.0;
  o.seed = 11;
  o.record_routing = true;
  const std::vector<Rollout> rollouts = generate(model, prompts, o);
  const Tensor batch = rollout_ids(prompts, rollouts).to(kGpu);
  const int64_t longest = batch.size(1);
  RoutingCapture capture;
  const std::vector<float> trained =
      next_token_logprobs(model.forward(batch).logits, batch).to_vector<float>();
  const std::vector<RoutingRecord> routed = capture.records(int64_t(prompts.size()), longest);
  Agreement a;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const size_t P = prompts[i].size();
    for (size_t t = 0; t < rollouts[i].tokens.size(); ++t) {
      const float x = trained[i * size_t(longest - 1) + P - 1 + t];
      a.mismatch = std::max(a.mismatch, double(std::abs(x - rollouts[i].logprobs[t])));
    }
    const RoutingRecord& r = rollouts[i].routing;
    a.flips += routing_flips(r, routed[i].first_positions(r.positions));
  }
  return a;
}

class GpuRollout : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!built_with_cuda()) GTEST_SKIP() << "built without CUDA";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  }
};

TEST_P(GpuRollout, TheBatchInvariantModeAgreesBitForBit) {
  rng::Generator init(3);
  LlamaForCausalLM model(testing::gpu_test_model(GetParam(), 0.0), init);
  to_device(model, kGpu);
  const CudaMatmul before = cuda_matmul();
  set_cuda_matmul(CudaMatmul::cublas);
  const Agreement cublas = rollouts_against_training(model);
  RecordProperty("cublas_logprob_mismatch", std::to_string(cublas.mismatch));
  RecordProperty("cublas_router_flips", std::to_string(cublas.flips));
  std::printf("cuBLASLt: logprob mismatch %.3g, router flips %lld\n", cublas.mismatch,
              static_cast<long long>(cublas.flips));
  set_cuda_matmul(CudaMatmul::fma_chain);
  const Agreement fma = rollouts_against_training(model);
  set_cuda_matmul(before);
  EXPECT_EQ(fma.mismatch, 0.0);
  EXPECT_EQ(fma.flips, 0);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, GpuRollout, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "moe" : "dense");
                         });

}  // namespace
}  // namespace reprise::nn
