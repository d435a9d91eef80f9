#include "tests/support/cuda_sim_backend.h"

#include "cuda/kernels/attention.h"
#include "cuda/kernels/copy.h"
#include "cuda/kernels/delta_rule.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/kernels/indexing.h"
#include "cuda/kernels/loss.h"
#include "cuda/kernels/matmul.h"
#include "cuda/kernels/moe_route.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/optim.h"
#include "cuda/kernels/random.h"
#include "cuda/kernels/reduce.h"
#include "cuda/kernels/rotary.h"
#include "cuda/kernels/softmax.h"
#include "cuda/sim.h"

namespace reprise::testing {

CudaSimBackend::CudaSimBackend(bool reversed) : Backend(Device::cpu()), reversed_(reversed) {}

KernelSet CudaSimBackend::kernels() const { return all_kernels(); }

std::string CudaSimBackend::name() const {
  return reversed_ ? "cpu (CUDA simulator, reversed)" : "cpu (CUDA simulator)";
}

void* CudaSimBackend::allocate(size_t nbytes) { return cpu_backend().allocate(nbytes); }
void CudaSimBackend::release(void* ptr, size_t nbytes) { cpu_backend().release(ptr, nbytes); }
void CudaSimBackend::copy_from_host(void* dst, const void* host_src, size_t nbytes) {
  cpu_backend().copy_from_host(dst, host_src, nbytes);
}
void CudaSimBackend::copy_to_host(void* host_dst, const void* src, size_t nbytes) {
  cpu_backend().copy_to_host(host_dst, src, nbytes);
}

// Each kernel's driver, as the CUDA backend runs it; the CUDA backend's own
// kernels below.
#define REPRISE_KERNEL(Ret, name, params, args)                            \
  Ret CudaSimBackend::name params {                                        \
    return cuda::name(cuda::SimExec(reversed_), REPRISE_KERNEL_ARGS args); \
  }
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

// The drivers the CUDA backend runs in f32 and f64 (16-bit attention goes
// to cuDNN there, which has no simulator).
Tensors CudaSimBackend::sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionParams& params) {
  return cuda::sdpa(cuda::SimExec(reversed_), q, k, v, params);
}

Tensors CudaSimBackend::sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& out, const Tensor& lse, const Tensor& dout,
                                      const AttentionParams& params, bool need_dq, bool need_dk) {
  return cuda::sdpa_backward(cuda::SimExec(reversed_), q, k, v, out, lse, dout, params, need_dq,
                             need_dk);
}

// The CUDA backend draws these on the host, with the CPU's bits.
void CudaSimBackend::fill_trunc_normal(const Tensor& t, const rng::Reservation& r, double mean,
                                       double std, double a, double b) {
  cpu_backend().fill_trunc_normal(t, r, mean, std, a, b);
}

}  // namespace reprise::testing
