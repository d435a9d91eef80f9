#pragma once
// The CUDA backend: one per device. Memory comes from a caching allocator
// (cuda/device_memory.h), host transfers go through pinned staging buffers
// (cuda/pinned.h), and every kernel runs on the device's current stream
// (cuda/stream.h). The kernels are cuda/kernels/*.h, launched from the .cu
// file of their topic (elementwise.cu, rows.cu, ...); every one is
// deterministic: no floating-point atomics, each sum in one fixed order, so
// a kernel gives the same bits on every run on the same GPU model and a
// recompute replays a forward bit for bit.

#include "engine/backend.h"

namespace reprise::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);

  std::string name() const override;
  void* allocate(size_t nbytes) override;
  void release(void* ptr, size_t nbytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t nbytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t nbytes) override;
  void synchronize() override;
  DeviceMemoryInfo memory_info() override;
  double peak_flops(DType dtype) override;
  KernelSet kernels() const override;  // every row, declared below

  // Every kernel (engine/kernels/all.def). Each topic's .cu file defines
  // them, most as their driver on the device's current stream.
#define REPRISE_KERNEL(Ret, name, params, args) Ret name params override;
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL
};

}  // namespace reprise::cuda
