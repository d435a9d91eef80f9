// moe_route on the GPU (cuda/kernels/moe_route.h).
#include "cuda/backend.h"
#include "cuda/kernels/moe_route.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensors CudaBackend::moe_route(const Tensor& scores, int64_t k, bool renormalize,
                               int64_t capacity) {
  return cuda::moe_route(exec_for(device()), scores, k, renormalize, capacity);
}

Tensor CudaBackend::moe_route_backward(const Tensor& grad_weights, const Tensor& indices,
                                       const Tensor& slot, const Tensor& top, int64_t E,
                                       bool renormalize) {
  return cuda::moe_route_backward(exec_for(device()), grad_weights, indices, slot, top, E,
                                  renormalize);
}

}  // namespace reprise::cuda
