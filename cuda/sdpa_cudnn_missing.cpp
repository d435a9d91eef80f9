// cuda/sdpa_cudnn.h for a build without the cuDNN frontend's headers.
#include "cuda/sdpa_cudnn.h"

namespace reprise::cuda {
namespace {

[[noreturn]] void missing(Device device, const Tensor& q) {
  REPRISE_FAIL("scaled_dot_product_attention on ", to_string(device), ": ", q.describe(),
               " needs cuDNN's fused attention, and this build has no cuDNN frontend "
               "(scripts/cudnn_frontend.sh fetches it; rebuild); attention in f32 runs without it");
}

}  // namespace

bool built_with_cudnn_attention() { return false; }

Tensors cudnn_sdpa(Device device, const Tensor& q, const Tensor&, const Tensor&,
                   const AttentionParams&) {
  missing(device, q);
}

Tensors cudnn_sdpa_backward(Device device, const Tensor& q, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, const Tensor&, const AttentionParams&,
                            bool, bool) {
  missing(device, q);
}

}  // namespace reprise::cuda
