#pragma once
// The CUDA backend's kernels on the simulator (cuda/sim.h), as a Backend
// for the CPU device: with it in place (ScopedCpuBackend), every op runs
// its CUDA kernel driver on host memory, so the op-case table
// (tests/ops/backends_test.cpp) checks every CUDA kernel against the CPU
// without a GPU. Memory and host transfers are the CPU backend's.

#include "engine/backend.h"

namespace reprise::testing {

class CudaSimBackend final : public Backend {
 public:
  // reversed: blocks and the threads of every phase in reverse order, which
  // changes the bits of a kernel whose threads race.
  explicit CudaSimBackend(bool reversed = false);

  std::string name() const override;
  void* allocate(size_t nbytes) override;
  void release(void* ptr, size_t nbytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t nbytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t nbytes) override;
  KernelSet kernels() const override;  // every row, declared below

#define REPRISE_KERNEL(Ret, name, params, args) Ret name params override;
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

 private:
  bool reversed_;
};

}  // namespace reprise::testing
