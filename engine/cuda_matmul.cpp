#include "engine/cuda_matmul.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace reprise {
namespace {

CudaMatmul initial_mode() {
  const char* env = std::getenv("REPRISE_CUDA_MATMUL");
  if (env == nullptr || *env == '\0') return CudaMatmul::cublas;
  return parse_cuda_matmul(env, "REPRISE_CUDA_MATMUL");
}

// -1 until the first use reads the environment.
std::atomic<int> selected_mode{-1};

}  // namespace

const char* to_string(CudaMatmul m) { return m == CudaMatmul::cublas ? "cublas" : "fma_chain"; }

CudaMatmul parse_cuda_matmul(std::string_view name, std::string_view who) {
  if (name == "cublas") return CudaMatmul::cublas;
  if (name == "fma_chain") return CudaMatmul::fma_chain;
  REPRISE_FAIL(who, ": unknown CUDA matmul mode '", std::string(name),
               "' (expected cublas or fma_chain)");
}

CudaMatmul cuda_matmul() {
  int s = selected_mode.load();
  if (s < 0) {
    int expected = -1;
    selected_mode.compare_exchange_strong(expected, int(initial_mode()));
    s = selected_mode.load();
  }
  return CudaMatmul(s);
}

void set_cuda_matmul(CudaMatmul m) { selected_mode.store(int(m)); }

}  // namespace reprise
