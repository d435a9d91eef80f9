// Elementwise kernels on the GPU (cuda/kernels/elementwise.h).
#include "cuda/backend.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensor CudaBackend::unary(UnaryOp op, double param, const Tensor& x) {
  return cuda::unary(exec_for(device()), op, param, x);
}

Tensor CudaBackend::unary_backward(UnaryOp op, double param, const Tensor& saved, const Tensor& g) {
  return cuda::unary_backward(exec_for(device()), op, param, saved, g);
}

void CudaBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  cuda::binary(exec_for(device()), op, out, a, b);
}

Tensor CudaBackend::swiglu(const Tensor& gate, const Tensor& up) {
  return cuda::swiglu(exec_for(device()), gate, up);
}

Tensors CudaBackend::swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy) {
  return cuda::swiglu_backward(exec_for(device()), gate, up, dy);
}

Tensor CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return cuda::where(exec_for(device()), cond, a, b);
}

Tensor CudaBackend::perturb_ulps(const Tensor& t, int k, uint64_t seed) {
  return cuda::perturb_ulps(exec_for(device()), t, k, seed);
}

}  // namespace reprise::cuda
