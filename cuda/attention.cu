// Attention on the GPU: our flash-style kernels (cuda/kernels/attention.h)
// for f32 and f64, cuDNN's fused attention (cuda/sdpa_cudnn.h) for bf16 and
// f16.
#include "cuda/backend.h"
#include "cuda/kernels/attention.h"
#include "cuda/launch.cuh"
#include "cuda/sdpa_cudnn.h"

namespace reprise::cuda {

Tensors CudaBackend::sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionParams& params) {
  if (is_16bit_float(q.dtype())) return cudnn_sdpa(device(), q, k, v, params);
  return cuda::sdpa(exec_for(device()), q, k, v, params);
}

Tensors CudaBackend::sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& dout,
                                   const AttentionParams& params, bool need_dq, bool need_dk) {
  if (is_16bit_float(q.dtype()))
    return cudnn_sdpa_backward(device(), q, k, v, out, lse, dout, params, need_dq, need_dk);
  return cuda::sdpa_backward(exec_for(device()), q, k, v, out, lse, dout, params, need_dq, need_dk);
}

}  // namespace reprise::cuda
