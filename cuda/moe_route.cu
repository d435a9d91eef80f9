// moe_route on the GPU (cuda/kernels/moe_route.h).
#include "cuda/backend.h"
#include "cuda/kernels/moe_route.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensors CudaBackend::moe_route(const Tensor& scores, const Tensor& bias,
                               const RouteParams& params) {
  return cuda::moe_route(exec_for(device()), scores, bias, params);
}

Tensor CudaBackend::moe_route_backward(const Tensor& grad_weights, const Tensor& indices,
                                       const Tensor& slot, const Tensor& top, int64_t E,
                                       const RouteParams& params) {
  return cuda::moe_route_backward(exec_for(device()), grad_weights, indices, slot, top, E, params);
}

}  // namespace reprise::cuda
