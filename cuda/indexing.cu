// Indexing kernels on the GPU (cuda/kernels/indexing.h).
#include "cuda/backend.h"
#include "cuda/kernels/indexing.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

IndexRange CudaBackend::index_range(const Tensor& index) {
  return cuda::index_range(exec_for(device()), index);
}

Tensor CudaBackend::gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return cuda::gather(exec_for(device()), x, dim, index);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index,
                              const Tensor& src) {
  cuda::scatter_add(exec_for(device()), out, dim, index, src);
}

Tensors CudaBackend::topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return cuda::topk(exec_for(device()), x, k, dim, largest, sorted);
}

Tensor CudaBackend::embedding(const Tensor& weight, const Tensor& ids) {
  return cuda::embedding(exec_for(device()), weight, ids);
}

Tensor CudaBackend::embedding_backward(const Tensor& g, const Tensor& ids, int64_t V) {
  return cuda::embedding_backward(exec_for(device()), g, ids, V);
}

}  // namespace reprise::cuda
