#include "engine/backend.h"

#include <atomic>

namespace reprise {

namespace {
std::atomic<Backend*> cpu_override{nullptr};
}  // namespace

Backend& backend(Device device) {
  if (!device.is_cpu()) return cuda_backend(device.index());
  Backend* b = cpu_override.load(std::memory_order_relaxed);
  return b ? *b : cpu_backend();
}

ScopedCpuBackend::ScopedCpuBackend(Backend& b) : previous_(nullptr) {
  REPRISE_CHECK(b.device().is_cpu(), "ScopedCpuBackend: ", b.name(), " is not a CPU backend");
  previous_ = cpu_override.exchange(&b);
}
ScopedCpuBackend::~ScopedCpuBackend() { cpu_override.store(previous_); }

std::string Backend::name() const { return to_string(device_); }

std::string Backend::missing_reason() const { return "this backend has no such kernel"; }

void Backend::missing(const char* kernel) const {
  REPRISE_FAIL(kernel, " on ", name(), ": ", missing_reason());
}

// Every kernel a backend does not override raises.
void* Backend::allocate(size_t) { missing("allocate"); }
void Backend::release(void*, size_t) { missing("release"); }
void Backend::copy_from_host(void*, const void*, size_t) { missing("copy_from_host"); }
void Backend::copy_to_host(void*, const void*, size_t) { missing("copy_to_host"); }
// Not kernels: a backend without a queue, an allocator cache or a known peak
// has nothing to wait for or report.
void Backend::synchronize() {}
DeviceMemoryInfo Backend::memory_info() { return {}; }
double Backend::peak_flops(DType) { return 0; }
void Backend::fill(const Tensor&, double) { missing("fill"); }
void Backend::copy(const Tensor&, const Tensor&) { missing("copy"); }
bool Backend::representable(const Tensor&, DType) { missing("representable"); }
Tensor Backend::unary(UnaryOp, double, const Tensor&) { missing("unary"); }
Tensor Backend::unary_backward(UnaryOp, double, const Tensor&, const Tensor&) {
  missing("unary_backward");
}
void Backend::binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&) { missing("binary"); }
Tensor Backend::swiglu(const Tensor&, const Tensor&) { missing("swiglu"); }
Tensors Backend::swiglu_backward(const Tensor&, const Tensor&, const Tensor&) {
  missing("swiglu_backward");
}
Tensor Backend::where(const Tensor&, const Tensor&, const Tensor&) { missing("where"); }
Tensor Backend::sum_middle(const Tensor&, int64_t, int64_t, int64_t) { missing("sum_middle"); }
Tensors Backend::max_rows(const Tensor&) { missing("max_rows"); }
Tensor Backend::chunk_square_sums(const Tensor&) { missing("chunk_square_sums"); }
Tensor Backend::softmax(SoftmaxKind, const Tensor&) { missing("softmax"); }
Tensor Backend::softmax_backward(SoftmaxKind, const Tensor&, const Tensor&) {
  missing("softmax_backward");
}
TargetCount Backend::count_targets(const Tensor&, int64_t, int64_t) { missing("count_targets"); }
Tensors Backend::cross_entropy(const Tensor&, const Tensor&, int64_t) { missing("cross_entropy"); }
Tensor Backend::cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       double, int64_t) {
  missing("cross_entropy_backward");
}
Tensors Backend::rmsnorm(const Tensor&, const Tensor&, double) { missing("rmsnorm"); }
Tensors Backend::rmsnorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool,
                                  bool) {
  missing("rmsnorm_backward");
}
Tensors Backend::layernorm(const Tensor&, const Tensor&, const Tensor&, double) {
  missing("layernorm");
}
Tensors Backend::layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                    const Tensor&, bool, bool, bool) {
  missing("layernorm_backward");
}
Tensor Backend::rotary(const Tensor&, const Tensor&, const Tensor&, double, int) {
  missing("rotary");
}
IndexRange Backend::index_range(const Tensor&) { missing("index_range"); }
Tensor Backend::gather(const Tensor&, int64_t, const Tensor&) { missing("gather"); }
void Backend::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) {
  missing("scatter_add");
}
Tensors Backend::topk(const Tensor&, int64_t, int64_t, bool, bool) { missing("topk"); }
Tensor Backend::embedding(const Tensor&, const Tensor&) { missing("embedding"); }
Tensor Backend::embedding_backward(const Tensor&, const Tensor&, int64_t) {
  missing("embedding_backward");
}
Tensor Backend::matmul(const Tensor&, const Tensor&) { missing("matmul"); }
Tensors Backend::sdpa(const Tensor&, const Tensor&, const Tensor&, const AttentionParams&) {
  missing("sdpa");
}
Tensors Backend::sdpa_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const Tensor&, const AttentionParams&, bool, bool) {
  missing("sdpa_backward");
}
Tensors Backend::moe_route(const Tensor&, const Tensor&, const RouteParams&) {
  missing("moe_route");
}
Tensor Backend::moe_route_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                   int64_t, const RouteParams&) {
  missing("moe_route_backward");
}
void Backend::fill_uniform(const Tensor&, const rng::Reservation&, double, double) {
  missing("fill_uniform");
}
void Backend::fill_normal(const Tensor&, const rng::Reservation&, double, double) {
  missing("fill_normal");
}
void Backend::fill_bernoulli(const Tensor&, const rng::Reservation&, double) {
  missing("fill_bernoulli");
}
void Backend::fill_trunc_normal(const Tensor&, const rng::Reservation&, double, double, double,
                                double) {
  missing("fill_trunc_normal");
}
Tensor Backend::dropout(const Tensor&, double, const rng::Reservation&) { missing("dropout"); }
void Backend::adamw_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const AdamWStep&) {
  missing("adamw_step");
}
void Backend::sgd_step(const Tensor&, const Tensor&, const Tensor&, const SgdStep&) {
  missing("sgd_step");
}
void Backend::scale_(const Tensor&, double) { missing("scale_"); }
Tensor Backend::perturb_ulps(const Tensor&, int, uint64_t) { missing("perturb_ulps"); }

}  // namespace reprise
