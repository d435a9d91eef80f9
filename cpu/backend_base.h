#pragma once
// What the CPU backend does the same at every capability: host memory and
// host copies (cpu/memory.cpp, built once). The kernels are CpuBackend's
// (cpu/backend.h), built once per capability.

#include "engine/backend.h"
#include "engine/cpu_capability.h"

namespace reprise::cpu {

// Host memory and host copies: the same for every level.
class CpuBackendBase : public Backend {
 public:
  CpuBackendBase() : Backend(Device::cpu()) {}
  std::string name() const override;
  void* allocate(size_t nbytes) override;
  void release(void* ptr, size_t nbytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t nbytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t nbytes) override;
  // Every row: each level's CpuBackend overrides them all (cpu/backend.h).
  KernelSet kernels() const override;
  // The capability this build's kernels are compiled for.
  virtual CpuCapability capability() const = 0;
};

// The scalar build's backend. Some kernels are the same code at every
// level: the elementwise maps of f64 and the integer types, which go
// element by element (cpu/loops.h, cpu/elementwise.cpp), and copies that
// involve a type other than f32, bf16 and f16 (cpu/copy.cpp). Only the
// scalar build compiles them, and the other builds hand them to it.
Backend& scalar_backend();

}  // namespace reprise::cpu
