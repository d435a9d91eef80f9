// The NCCL communicator on one GPU: one rank, bootstrapped through the
// single-process communicator, moving device memory through the same
// collectives as MPI. Skips when the build has no NCCL or no device is
// present (CTest label gpu); the multi-rank path needs a machine with GPUs.
#include <gtest/gtest.h>

#include "engine/backend.h"
#include "engine/tensor.h"
#if defined(REPRISE_HAS_NCCL)
#include "parallel/nccl_communicator.h"
#include "parallel/single_process.h"
#endif

namespace reprise {
namespace {

TEST(NcclCommunicator, MovesDeviceTensorsOnOneRank) {
#if !defined(REPRISE_HAS_NCCL)
  GTEST_SKIP() << "built without NCCL";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  parallel::SingleProcessCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap, Device::cuda(0), 60);
  EXPECT_EQ(nccl.size(), 1);
  EXPECT_EQ(nccl.kind(), "NCCL");
  const Tensor host = Tensor::arange(12, DType::f32).view({4, 3});
  const Tensor device = host.to(Device::cuda(0));
  EXPECT_EQ(nccl.all_gather(device).to(Device::cpu()).to_vector<float>(), host.to_vector<float>());
  EXPECT_EQ(nccl.all_to_all_v(device, {4}, {4}).to(Device::cpu()).to_vector<float>(),
            host.to_vector<float>());
  Tensor copy = host.to(Device::cuda(0));
  nccl.broadcast(copy, 0);
  nccl.all_reduce(copy);  // one rank: nothing to add
  EXPECT_EQ(copy.to(Device::cpu()).to_vector<float>(), host.to_vector<float>());
  nccl.barrier();
  const std::unique_ptr<parallel::Communicator> twin = nccl.duplicate();
  EXPECT_EQ(twin->all_gather(device).to(Device::cpu()).to_vector<float>(), host.to_vector<float>());
  try {
    Tensor on_host = host.clone();
    nccl.all_reduce(on_host);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this communicator moves tensors on cuda:0"),
              std::string::npos)
        << e.what();
  }
#endif
}

}  // namespace
}  // namespace reprise
