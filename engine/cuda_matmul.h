#pragma once
// How the CUDA backend runs matrix products:
//
//   cublas     cuBLASLt, one algorithm pinned per problem and no split-K
//              (cuda/matmul.cu): fast, and the same bits on every run of
//              one problem; a product's bits may change with its sizes, so
//              a decode (M = 1) and a training forward (M = B T) need not
//              agree.
//   fma_chain  the engine's own kernel (cuda/kernels/gemm_fma.h): each
//              element one FMA chain over k, as on the CPU. Batch-invariant
//              and decode/training-consistent, with the CPU's bits; slower.
//
// The default is cublas, or what the environment variable
// REPRISE_CUDA_MATMUL names (read at first use). The CPU backend ignores
// the setting: its products are FMA chains always.

#include <cstdint>
#include <string_view>

namespace reprise {

enum class CudaMatmul : uint8_t { cublas, fma_chain };

const char* to_string(CudaMatmul m);
// "cublas" or "fma_chain"; an Error naming `who` and the choices otherwise.
CudaMatmul parse_cuda_matmul(std::string_view name, std::string_view who);

// The mode later CUDA products run in (every thread, every device).
CudaMatmul cuda_matmul();
void set_cuda_matmul(CudaMatmul m);

}  // namespace reprise
