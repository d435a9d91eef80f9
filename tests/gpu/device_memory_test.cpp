// CUDA device memory through the engine: allocation, accounting and copies.
// Skips when the build has no CUDA or no device is present (CTest label gpu).
#include <gtest/gtest.h>

#include "engine/backend.h"
#include "engine/memory_stats.h"
#include "engine/tensor.h"

namespace reprise {
namespace {

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!built_with_cuda()) GTEST_SKIP() << "built without CUDA";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  }
};

TEST_F(CudaDevice, RoundTripIsBitwiseAndAccounted) {
  Tensor host = Tensor::arange(1000, DType::f32);
  MemorySnapshot before = memory_stats::snapshot(Device::cuda(0));
  Tensor device = host.to(Device::cuda(0));
  EXPECT_EQ(device.device(), Device::cuda(0));
  EXPECT_EQ(memory_stats::snapshot(Device::cuda(0)).total.live - before.total.live, 4000);
  EXPECT_EQ(device.to(Device::cpu()).to_vector<float>(), host.to_vector<float>());
}

TEST_F(CudaDevice, BadDeviceIndexIsAClearError) {
  int n = cuda_device_count();
  try {
    Tensor::zeros({4}, DType::f32, Device::cuda(n));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(n)), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace reprise
