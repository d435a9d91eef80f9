// Reductions on the GPU (cuda/kernels/reduce.h).
#include "cuda/backend.h"
#include "cuda/kernels/reduce.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensor CudaBackend::sum_middle(const Tensor& x, int64_t A, int64_t R, int64_t B) {
  return cuda::sum_middle(exec_for(device()), x, A, R, B);
}

Tensors CudaBackend::max_rows(const Tensor& x) { return cuda::max_rows(exec_for(device()), x); }

Tensor CudaBackend::chunk_square_sums(const Tensor& x) {
  return cuda::chunk_square_sums(exec_for(device()), x);
}

}  // namespace reprise::cuda
