#pragma once
// The CUDA kernel model (cuda/kernel.h) on the GPU: a phase is the calling
// thread's own call, a barrier is __syncthreads, a Local is a register, and
// CudaExec launches kernels on a stream. The drivers (cuda/kernels/*.h) are
// instantiated with CudaExec in the .cu files of cuda/.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/gemm_problem.h"
#include "cuda/kernel.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "engine/backend.h"
#include "engine/device.h"

namespace reprise::cuda {

template <class T>
struct DeviceLocal {
  T v;
  __device__ __forceinline__ T& operator[](int) { return v; }
  __device__ __forceinline__ const T& operator[](int) const { return v; }
};

template <int Threads>
class DeviceCtx {
 public:
  template <class T>
  using Local = DeviceLocal<T>;
  static constexpr int kThreads = Threads;

  __device__ __forceinline__ int64_t block() const { return blockIdx.x; }
  __device__ __forceinline__ int64_t blocks() const { return gridDim.x; }
  __device__ __forceinline__ unsigned char* shared() const {
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    return dynamic_shared;
  }
  template <class F>
  __device__ __forceinline__ void threads(F&& f) const {
    f(int(threadIdx.x));
  }
  __device__ __forceinline__ void sync() const { __syncthreads(); }

  template <class T>
  __device__ __forceinline__ Local<T> shfl_down(const Local<T>& v, int delta, int width) const {
    return {__shfl_down_sync(0xffffffffu, v.v, unsigned(delta), width)};
  }
  template <class T>
  __device__ __forceinline__ Local<T> shfl_idx(const Local<T>& v, int lane, int width) const {
    return {__shfl_sync(0xffffffffu, v.v, lane, width)};
  }
};

template <class K>
__global__ void __launch_bounds__(K::kThreads) run_kernel(const K kernel) {
  DeviceCtx<K::kThreads> ctx;
  kernel(ctx);
}

// Launches kernels and moves bytes on one stream of one device.
class CudaExec {
 public:
  CudaExec(Device device, cudaStream_t stream) : device_(device), stream_(stream) {}

  Device device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  size_t max_shared_bytes() const;

  template <class K>
  void launch(const K& kernel, int64_t blocks, size_t shared_bytes = 0) const {
    static_assert(K::kThreads % 32 == 0, "kernels run whole warps");
    if (blocks == 0) return;
    const DeviceGuard guard(device_);
    if (shared_bytes > 48 * 1024) {
      // Above 48 KiB a kernel must opt in; cheap to repeat.
      check(cudaFuncSetAttribute(run_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(shared_bytes)),
            "cudaFuncSetAttribute", device_);
    }
    run_kernel<K><<<dim3(unsigned(blocks)), dim3(K::kThreads), shared_bytes, stream_>>>(kernel);
    check(cudaGetLastError(), "kernel launch", device_);
  }

  // Device to device, ordered on the stream.
  void copy_bytes(void* dst, const void* src, size_t n) const;
  // Device to host; returns when the bytes are there.
  void download(void* host_dst, const void* src, size_t n) const;
  // Stable sort of n (key, value) pairs by the low key_bits bits of the
  // keys (CUB's radix sort: a fixed order of passes, no atomics on values).
  void sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const int64_t* values_in,
                  int64_t* values_out, int64_t n, int key_bits) const;
  // One strided batch of products by cuBLASLt (cuda/gemm.cu).
  void gemm(const GemmProblem& p) const;

 private:
  Device device_;
  cudaStream_t stream_;
};

// The executor for `device`'s current stream.
inline CudaExec exec_for(Device device) { return CudaExec(device, current_stream(device)); }

// A row of engine/kernels/*.def as CudaBackend's kernel: its driver on the
// device's current stream. A topic's .cu file defines its kernels with
//   #define REPRISE_KERNEL REPRISE_CUDA_FORWARD
//   #define REPRISE_OWN_KERNEL(...)  // written out in the file
//   #include "engine/kernels/<topic>.def"
#define REPRISE_CUDA_FORWARD(Ret, name, params, args) \
  Ret CudaBackend::name params { return cuda::name(exec_for(device()), REPRISE_KERNEL_ARGS args); }

}  // namespace reprise::cuda
