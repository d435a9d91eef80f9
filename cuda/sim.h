#pragma once
// The CUDA kernel model (cuda/kernel.h) on the CPU: a grid runs one block
// at a time, a phase runs its threads one after another, a barrier is the
// end of a phase, and a shuffle reads every thread's value before any is
// replaced. Like Numba's CUDA simulator, but sequential and deterministic,
// so a kernel's result is a function of its inputs here too; running the
// threads (and blocks) in reverse order as well exposes races between them.
//
// SimExec is the executor the kernel drivers (cuda/kernels/*.h) are
// instantiated with in tests/cuda: tensors on the CPU, kernels simulated,
// sorts by std::stable_sort, and matrix products as one FMA chain per
// element.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "cuda/gemm_problem.h"
#include "cuda/kernel.h"
#include "cuda/kernels/gemm_fma.h"
#include "engine/device.h"
#include "engine/dtype.h"

namespace reprise::cuda {

template <class T, int Threads>
struct SimLocal {
  std::array<T, Threads> v{};
  T& operator[](int t) { return v[size_t(t)]; }
  const T& operator[](int t) const { return v[size_t(t)]; }
};

template <int Threads>
class SimCtx {
 public:
  template <class T>
  using Local = SimLocal<T, Threads>;
  static constexpr int kThreads = Threads;

  SimCtx(int64_t block, int64_t blocks, unsigned char* shared, bool reversed)
      : block_(block), blocks_(blocks), shared_(shared), reversed_(reversed) {}

  int64_t block() const { return block_; }
  int64_t blocks() const { return blocks_; }
  unsigned char* shared() const { return shared_; }

  template <class F>
  void threads(F&& f) const {
    for (int i = 0; i < Threads; ++i) f(reversed_ ? Threads - 1 - i : i);
  }
  void sync() const {}

  // Thread t gets thread t + delta's value when that is in its segment of
  // `width`, else its own (__shfl_down_sync).
  template <class T>
  Local<T> shfl_down(const Local<T>& v, int delta, int width) const {
    Local<T> r;
    for (int t = 0; t < Threads; ++t) r[t] = t % width + delta < width ? v[t + delta] : v[t];
    return r;
  }
  // Thread t gets lane `lane` of its segment (__shfl_sync).
  template <class T>
  Local<T> shfl_idx(const Local<T>& v, int lane, int width) const {
    Local<T> r;
    for (int t = 0; t < Threads; ++t) r[t] = v[t - t % width + lane];
    return r;
  }

 private:
  int64_t block_, blocks_;
  unsigned char* shared_;
  bool reversed_;
};

class SimExec {
 public:
  // reversed: blocks and the threads of every phase in reverse order.
  explicit SimExec(bool reversed = false) : reversed_(reversed) {}

  Device device() const { return Device::cpu(); }
  // An H100's and H200's opt-in limit of shared memory per block.
  size_t max_shared_bytes() const { return 232448; }

  // Shared memory starts as 0xFF bytes (NaN floats, -1 integers) in every
  // block, so that a read before a write shows.
  template <class K>
  void launch(const K& kernel, int64_t blocks, size_t shared_bytes = 0) const {
    std::vector<unsigned char> shared(std::max<size_t>(shared_bytes, 16));
    for (int64_t i = 0; i < blocks; ++i) {
      std::fill(shared.begin(), shared.end(), 0xFF);
      SimCtx<K::kThreads> ctx(reversed_ ? blocks - 1 - i : i, blocks, shared.data(), reversed_);
      kernel(ctx);
    }
  }

  void copy_bytes(void* dst, const void* src, size_t n) const {
    if (n > 0) std::memcpy(dst, src, n);
  }
  void download(void* host_dst, const void* src, size_t n) const { copy_bytes(host_dst, src, n); }

  // Stable sort of (key, value) pairs by key.
  void sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const int64_t* values_in,
                  int64_t* values_out, int64_t n, int) const {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return keys_in[x] < keys_in[y]; });
    for (int64_t i = 0; i < n; ++i) {
      keys_out[i] = keys_in[order[size_t(i)]];
      values_out[i] = values_in[order[size_t(i)]];
    }
  }

  // Every product as FMA chains (cuda/kernels/gemm_fma.h), the kernel the
  // batch-invariant mode runs on a device.
  void gemm(const GemmProblem& p) const { fma_chain_gemm(*this, p); }

 private:
  bool reversed_;
};

}  // namespace reprise::cuda
