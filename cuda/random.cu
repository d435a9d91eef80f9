// Random fills and dropout on the GPU (cuda/kernels/random.h).
#include "cuda/backend.h"
#include "cuda/kernels/random.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

// Truncated normals invert the normal CDF with erfc, exp and log, whose
// last bits differ between the C library and the device's: this fill runs
// on the CPU backend and is uploaded, so it has the CPU's bits. It
// initialises weights once; it is not on any step's path.
void CudaBackend::fill_trunc_normal(const Tensor& t, const rng::Reservation& r, double mean,
                                    double std, double a, double b) {
  const Tensor host = Tensor::empty(t.shape(), t.dtype());
  cpu_backend().fill_trunc_normal(host, r, mean, std, a, b);
  copy_from_host(t.raw_data(), host.raw_data(), host.nbytes());
}

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/random.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
