// Matrix products on cuBLASLt, with the algorithm pinned per problem.
//
// What cuBLAS promises: a routine of one toolkit version gives the same bits
// on every run on GPUs of the same architecture with the same number of
// SMs, as long as one stream is active; not across toolkit versions or GPU
// models, and not with atomics-based reductions. Two things here keep a
// product's bits fixed within that promise: (1) the algorithm is chosen
// once per problem (dtype, transposes, sizes, leading dimensions, batch
// strides, operand alignment) by cublasLt's heuristic and cached, so a
// recompute never runs another kernel than its forward did; (2) split-K
// reductions are not allowed (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK =
// NONE), so each output element is reduced by one thread block in one order.
// f32 products compute in f32 (CUBLAS_COMPUTE_32F: no TF32), f64 in f64;
// bf16 and f16 inputs accumulate in f32. The bits differ from the CPU's
// sequential FMA chain (cuBLAS splits k across its tiles). The
// batch-invariant mode (engine/cuda_matmul.h, fma_chain) runs the engine's
// own FMA-chain kernel instead, which has the CPU's bits.
#include <cublasLt.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "cuda/backend.h"
#include "cuda/device_memory.h"
#include "cuda/kernels/gemm_fma.h"
#include "cuda/kernels/matmul.h"
#include "cuda/launch.cuh"
#include "cuda/runtime.h"
#include "engine/cuda_matmul.h"

namespace reprise::cuda {
namespace {

void check_lt(cublasStatus_t status, const char* what, Device device) {
  REPRISE_CHECK(status == CUBLAS_STATUS_SUCCESS, what, " on ", to_string(device), ": ",
                cublasLtGetStatusString(status));
}

// The largest power of two (up to 256) that divides the address.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int align = 1;
  while (align < 256 && a % uintptr_t(align * 2) == 0) align *= 2;
  return align;
}

cudaDataType_t data_type(DType d) {
  switch (d) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f64:
      return CUDA_R_64F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      REPRISE_FAIL("matmul on CUDA: expected f32, f64, bf16 or f16, got ", dtype_name(d));
  }
}

// Everything an algorithm choice depends on.
using PlanKey = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int, int, int>;

PlanKey key_of(const GemmProblem& p) {
  return {int(p.dtype), p.trans_a,      p.trans_b,      p.m,           p.n,        p.k,
          p.batch,      p.lda,          p.ldb,          p.ldc,         p.stride_a, p.stride_b,
          p.stride_c,   alignment(p.a), alignment(p.b), alignment(p.c)};
}

// A problem's descriptors and its chosen algorithm.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

class Gemm {
 public:
  static constexpr size_t kWorkspace = size_t(32) << 20;

  explicit Gemm(Device device) : device_(device) {
    const DeviceGuard guard(device);
    check_lt(cublasLtCreate(&handle_), "cublasLtCreate", device);
    workspace_ = DeviceMemory::of(device).allocate(kWorkspace);
  }

  static Gemm& of(Device device) {
    return one_per_device<Gemm>(device, [](Device d) { return new Gemm(d); });
  }

  void run(const GemmProblem& p, cudaStream_t stream) {
    const DeviceGuard guard(device_);
    const Plan& plan = plan_for(p);
    const bool f64 = p.dtype == DType::f64;
    const double one64 = 1, zero64 = 0;
    const float one32 = 1, zero32 = 0;
    const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
    const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
    // The workspace is used by one product at a time: all run on `stream`
    // or are ordered after it by the caller's stream discipline.
    check_lt(cublasLtMatmul(handle_, plan.op, alpha, p.a, plan.a, p.b, plan.b, beta, p.c, plan.c,
                            p.c, plan.c, &plan.algo, workspace_, kWorkspace, stream),
             "cublasLtMatmul", device_);
  }

 private:
  cublasLtMatrixLayout_t layout(DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    check_lt(cublasLtMatrixLayoutCreate(&l, data_type(dtype), uint64_t(rows), uint64_t(cols), ld),
             "cublasLtMatrixLayoutCreate", device_);
    if (batch > 1) {
      const int32_t count = int32_t(batch);
      check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count),
               "cublasLtMatrixLayoutSetAttribute", device_);
      check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride),
               "cublasLtMatrixLayoutSetAttribute", device_);
    }
    return l;
  }

  const Plan& plan_for(const GemmProblem& p) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const PlanKey key = key_of(p);
    const auto found = plans_.find(key);
    if (found != plans_.end()) return *found->second;
    auto plan = std::make_unique<Plan>();
    const bool f64 = p.dtype == DType::f64;
    check_lt(cublasLtMatmulDescCreate(&plan->op, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                      f64 ? CUDA_R_64F : CUDA_R_32F),
             "cublasLtMatmulDescCreate", device_);
    const cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
             "cublasLtMatmulDescSetAttribute", device_);
    check_lt(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
             "cublasLtMatmulDescSetAttribute", device_);
    // Stored shapes: op(A) is m x k, op(B) k x n.
    plan->a = p.trans_a ? layout(p.dtype, p.k, p.m, p.lda, p.batch, p.stride_a)
                        : layout(p.dtype, p.m, p.k, p.lda, p.batch, p.stride_a);
    plan->b = p.trans_b ? layout(p.dtype, p.n, p.k, p.ldb, p.batch, p.stride_b)
                        : layout(p.dtype, p.k, p.n, p.ldb, p.batch, p.stride_b);
    plan->c = layout(p.dtype, p.m, p.n, p.ldc, p.batch, p.stride_c);

    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", device_);
    const uint64_t workspace = kWorkspace;
    const uint32_t no_split_k = CUBLASLT_REDUCTION_SCHEME_NONE;
    const uint32_t align_a = uint32_t(alignment(p.a)), align_b = uint32_t(alignment(p.b)),
                   align_c = uint32_t(alignment(p.c));
    auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, size_t n) {
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attr, v, n),
               "cublasLtMatmulPreferenceSetAttribute", device_);
    };
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_split_k, sizeof no_split_k);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c);
    cublasLtMatmulHeuristicResult_t result;
    std::memset(&result, 0, sizeof result);
    int found_count = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle_, plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found_count);
    cublasLtMatmulPreferenceDestroy(pref);
    check_lt(status, "cublasLtMatmulAlgoGetHeuristic", device_);
    REPRISE_CHECK(found_count > 0, "matmul on ", to_string(device_),
                  ": cuBLASLt has no algorithm for ", dtype_name(p.dtype), " (", p.m, " x ", p.k,
                  ") @ (", p.k, " x ", p.n, ") batch ", p.batch, " without split-K");
    plan->algo = result.algo;
    return *plans_.emplace(key, std::move(plan)).first->second;
  }

  Device device_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::mutex mutex_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace

void CudaExec::gemm(const GemmProblem& p) const {
  if (cuda_matmul() == CudaMatmul::fma_chain) return fma_chain_gemm(*this, p);
  Gemm::of(device_).run(p, stream_);
}

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/matmul.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
