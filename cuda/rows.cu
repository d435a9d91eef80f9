// Row kernels on the GPU: softmax, cross_entropy and the norms
// (cuda/kernels/softmax.h, loss.h, norm.h).
#include "cuda/backend.h"
#include "cuda/kernels/loss.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/softmax.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensor CudaBackend::softmax(SoftmaxKind kind, const Tensor& x) {
  return cuda::softmax(exec_for(device()), kind, x);
}

Tensor CudaBackend::softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& g) {
  return cuda::softmax_backward(exec_for(device()), kind, y, g);
}

TargetCount CudaBackend::count_targets(const Tensor& targets, int64_t classes,
                                       int64_t ignore_index) {
  return cuda::count_targets(exec_for(device()), targets, classes, ignore_index);
}

Tensors CudaBackend::cross_entropy(const Tensor& logits, const Tensor& targets,
                                   int64_t ignore_index) {
  return cuda::cross_entropy(exec_for(device()), logits, targets, ignore_index);
}

Tensor CudaBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                           const Tensor& lse, const Tensor& g, double divisor,
                                           int64_t ignore_index) {
  return cuda::cross_entropy_backward(exec_for(device()), logits, targets, lse, g, divisor,
                                      ignore_index);
}

Tensors CudaBackend::rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  return cuda::rmsnorm(exec_for(device()), x, w, eps);
}

Tensors CudaBackend::rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd,
                                      const Tensor& g, bool need_dx, bool need_dw) {
  return cuda::rmsnorm_backward(exec_for(device()), x, w, rstd, g, need_dx, need_dw);
}

Tensors CudaBackend::layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return cuda::layernorm(exec_for(device()), x, w, b, eps);
}

Tensors CudaBackend::layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& g, bool need_dx,
                                        bool need_dw, bool need_db) {
  return cuda::layernorm_backward(exec_for(device()), x, w, mean, rstd, g, need_dx, need_dw,
                                  need_db);
}

}  // namespace reprise::cuda
