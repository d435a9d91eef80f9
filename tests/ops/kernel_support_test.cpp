// What each backend says it supports (Backend::kernels, engine/kernel.h):
// the kernels are the rows of engine/kernels/all.def; the CPU backend at
// every capability and the CUDA kernels on the simulator declare every row;
// a build without CUDA declares none and says why; and a backend that lacks
// a kernel a run needs is an Error naming it before the run builds anything.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/backend.h"
#include "engine/kernel.h"
#include "nn/trainer.h"
#include "tests/support/capabilities.h"
#include "tests/support/cuda_sim_backend.h"
#include "tests/support/expect_error.h"
#include "tests/support/tiny_train.h"

namespace reprise::testing {
namespace {

TEST(Kernels, EachRowIsOneKernelWithItsName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kKernelCount; ++i) names.insert(kernel_name(Kernel(i)));
  EXPECT_EQ(names.size(), kKernelCount);
  EXPECT_STREQ(kernel_name(Kernel::matmul), "matmul");
  EXPECT_STREQ(kernel_name(Kernel::scale_), "scale_");
  EXPECT_EQ(all_kernels().count(), kKernelCount);
  KernelSet some;
  some.set(size_t(Kernel::rmsnorm)).set(size_t(Kernel::fill)).set(size_t(Kernel::matmul));
  EXPECT_EQ(kernel_names(some), "fill, rmsnorm and matmul");  // in row order
}

TEST(Kernels, TheCpuAtEveryCapabilityAndTheCudaKernelsDeclareEveryRow) {
  for_each_capability([](CpuCapability c) {
    EXPECT_EQ(backend(Device::cpu()).kernels(), all_kernels()) << to_string(c);
  });
  const CudaSimBackend sim;
  EXPECT_EQ(sim.kernels(), all_kernels());
  if (cuda_device_count() > 0) {
    EXPECT_EQ(backend(Device::cuda(0)).kernels(), all_kernels());
  }
}

TEST(Kernels, ABuildWithoutCudaDeclaresNoneAndSaysWhy) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA";
  const Backend& stub = backend(Device::cuda(0));
  EXPECT_TRUE(stub.kernels().none());
  EXPECT_FALSE(stub.supports(Kernel::matmul));
  expect_error([&] { stub.require(all_kernels(), "training"); },
               {"cuda:0 (built without CUDA) lacks " + std::to_string(kKernelCount) + " of the",
                "kernels training needs: fill, copy, ", "configure with REPRISE_CUDA=ON"});
}

// A backend without one of the kernels training needs: the Trainer names
// it before it builds the model.
class WithoutRmsNorm final : public Backend {
 public:
  WithoutRmsNorm() : Backend(Device::cpu()) {}
  std::string name() const override { return "cpu without rmsnorm"; }
  KernelSet kernels() const override {
    return all_kernels().reset(size_t(Kernel::rmsnorm)).reset(size_t(Kernel::rmsnorm_backward));
  }
};

TEST(Kernels, ATrainerOnABackendLackingAKernelIsAnErrorBeforeItBuildsAnything) {
  const nn::TrainConfig config = tiny_train_config(16, 32, 2, 2, 16);
  const auto data = builtin_corpus(20000);
  WithoutRmsNorm lacking;
  const ScopedCpuBackend use(lacking);
  expect_error([&] { nn::Trainer trainer(config, data); }, {"cpu without rmsnorm lacks 2 of the ",
                                                            " kernels training needs: rmsnorm and "
                                                            "rmsnorm_backward"});
}

TEST(Kernels, ADenseModelNeedsNoRoutingKernels) {
  nn::LlamaConfig dense = nn::default_train_model();
  EXPECT_FALSE(nn::training_kernels(dense).test(size_t(Kernel::moe_route)));
  EXPECT_TRUE(nn::training_kernels(dense).test(size_t(Kernel::matmul)));
  nn::LlamaConfig moe = dense;
  moe.family = nn::Family::mixtral;
  moe.moe = nn::MoeConfig{};
  EXPECT_EQ(nn::training_kernels(moe), all_kernels());
}

}  // namespace
}  // namespace reprise::testing
