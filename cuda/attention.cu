// Attention on the GPU: our flash-style kernels (cuda/kernels/attention.h)
// for f32 and f64, cuDNN's fused attention (cuda/sdpa_cudnn.h) for bf16 and
// f16.
#include "cuda/backend.h"
#include "cuda/kernels/attention.h"
#include "cuda/launch.cuh"
#include "cuda/sdpa_cudnn.h"

namespace reprise::cuda {

namespace {

// cuDNN's fused attention, as reprise builds its graph, has no sinks.
void check_no_sinks(const Tensor& q, const AttentionParams& params) {
  REPRISE_CHECK(!params.sinks.defined(),
                "scaled_dot_product_attention on CUDA: ", dtype_name(q.dtype()),
                " attention runs on cuDNN, which reprise gives no attention sinks; run attention "
                "in f32 (--attention-dtype f32)");
}

}  // namespace

Tensors CudaBackend::sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionParams& params) {
  if (is_16bit_float(q.dtype())) {
    check_no_sinks(q, params);
    return cudnn_sdpa(device(), q, k, v, params);
  }
  return cuda::sdpa(exec_for(device()), q, k, v, params);
}

Tensors CudaBackend::sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& dout,
                                   const AttentionParams& params, bool need_dq, bool need_dk) {
  if (is_16bit_float(q.dtype())) {
    check_no_sinks(q, params);
    return cudnn_sdpa_backward(device(), q, k, v, out, lse, dout, params, need_dq, need_dk);
  }
  return cuda::sdpa_backward(exec_for(device()), q, k, v, out, lse, dout, params, need_dq, need_dk);
}

}  // namespace reprise::cuda
