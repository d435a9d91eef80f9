#pragma once
// The CPU backend: CpuBackend is built once per CPU capability, in the
// namespace of its level (cpu/level.h), from the kernel files of cpu/, on
// top of the level-independent CpuBackendBase (cpu/backend_base.h).
// cpu/select.cpp hands out the build for cpu_capability().

#include "cpu/backend_base.h"
#include "cpu/level.h"

REPRISE_CPU_BEGIN

class CpuBackend final : public CpuBackendBase {
 public:
  CpuCapability capability() const override;
  void fill(const Tensor& dst, double value) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  bool representable(const Tensor& x, DType to) override;
  Tensor unary(UnaryOp op, double param, const Tensor& x) override;
  Tensor unary_backward(UnaryOp op, double param, const Tensor& saved, const Tensor& g) override;
  void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) override;
  Tensor swiglu(const Tensor& gate, const Tensor& up) override;
  Tensors swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy) override;
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) override;
  Tensor sum_middle(const Tensor& x, int64_t A, int64_t R, int64_t B) override;
  Tensors max_rows(const Tensor& x) override;
  Tensor chunk_square_sums(const Tensor& x) override;
  Tensor softmax(SoftmaxKind kind, const Tensor& x) override;
  Tensor softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& g) override;
  TargetCount count_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) override;
  Tensors cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) override;
  Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                const Tensor& g, double divisor, int64_t ignore_index) override;
  Tensors rmsnorm(const Tensor& x, const Tensor& w, double eps) override;
  Tensors rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& g,
                           bool need_dx, bool need_dw) override;
  Tensors layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) override;
  Tensors layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean,
                             const Tensor& rstd, const Tensor& g, bool need_dx, bool need_dw,
                             bool need_db) override;
  Tensor rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq, double scaling,
                int sign) override;
  IndexRange index_range(const Tensor& index) override;
  Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) override;
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) override;
  Tensors topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) override;
  Tensor embedding(const Tensor& weight, const Tensor& ids) override;
  Tensor embedding_backward(const Tensor& g, const Tensor& ids, int64_t V) override;
  Tensor matmul(const Tensor& a, const Tensor& b) override;
  Tensors sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
               const AttentionParams& params) override;
  Tensors sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, const AttentionParams& params,
                        bool need_dq, bool need_dk) override;
  Tensors moe_route(const Tensor& scores, const Tensor& bias, const RouteParams& params) override;
  Tensor moe_route_backward(const Tensor& grad_weights, const Tensor& indices, const Tensor& slot,
                            const Tensor& top, int64_t E, const RouteParams& params) override;
  void fill_uniform(const Tensor& t, const rng::Reservation& r, double low, double high) override;
  void fill_normal(const Tensor& t, const rng::Reservation& r, double mean, double std) override;
  void fill_bernoulli(const Tensor& t, const rng::Reservation& r, double p) override;
  void fill_trunc_normal(const Tensor& t, const rng::Reservation& r, double mean, double std,
                         double a, double b) override;
  Tensor dropout(const Tensor& x, double p, const rng::Reservation& r) override;
  void adamw_step(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v,
                  const AdamWStep& step) override;
  void sgd_step(const Tensor& w, const Tensor& g, const Tensor& buf, const SgdStep& step) override;
  void scale_(const Tensor& t, double s) override;
  Tensor perturb_ulps(const Tensor& t, int k, uint64_t seed) override;
};

// This level's backend.
Backend& instance();

REPRISE_CPU_END
