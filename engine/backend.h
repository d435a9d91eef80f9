#pragma once
// The backend seam: every kernel reprise runs is reached through the Backend
// of the device that holds its inputs, in the spirit of candle's backend
// trait and ggml's backend interface. ops/*.cpp keep validation, recording
// and the backward composition; a Backend only computes.
//
// There are three: the CPU backend (cpu/, one build of its kernels per CPU
// capability, chosen at run time), the CUDA backend (cuda/, when built with
// nvcc), and a stub that stands for CUDA in a build without it and raises
// "built without CUDA" for everything.
//
// Every kernel has a default here that raises an Error naming the op and the
// device, so a backend that lacks one fails clearly, never silently.
// Kernels allocate their outputs on their own device (Tensor::empty with
// device()); in-place kernels (fill, copy, binary, the optimizer steps)
// write into tensors the caller passes. Unless a kernel says otherwise its
// tensor arguments are on this backend's device, already validated by the
// op that calls it, and may have any strides.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/elementwise_ops.h"
#include "engine/tensor.h"
#include "rng/reservation.h"

namespace reprise {

using Tensors = std::vector<Tensor>;

// Elementwise ops (UnaryOp, BinaryOp): engine/elementwise_ops.h. A unary
// kernel's `param` is the scalar parameter of the ops that take one.
enum class SoftmaxKind : uint8_t { softmax, log_softmax };

// Inverted dropout of attention weights: weight (b, h, i, j) is kept when
// word ((b Hq + h) T + i) S + j of `words` is a Bernoulli(1 - p) success.
struct AttentionDropout {
  rng::Reservation words;
  double p;
};

struct AttentionParams {
  double scale;
  bool causal;                // query i sees keys j <= i + causal_offset
  int64_t causal_offset = 0;  // >= 0
  int64_t window = 0;  // > 0 (with causal): query i also needs j > i + causal_offset - window
  std::optional<AttentionDropout> dropout;
};

// ops::moe_route's rule (ops/moe_route.h): the k experts per token, among
// the topk_group best of n_group groups, the gates renormalized or not,
// times scale; at most `capacity` assignments per expert (-1: no limit).
struct RouteParams {
  int64_t k;
  bool renormalize;
  int64_t capacity = -1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double scale = 1.0;
};

// The smallest and largest value of an index tensor (min > max when empty).
struct IndexRange {
  int64_t min;
  int64_t max;
};

// cross_entropy's targets: how many rows count (target != ignore_index),
// and the first row whose target is neither a class in [0, classes) nor
// ignore_index (-1 when none).
struct TargetCount {
  int64_t count;
  int64_t first_bad_row;
};

// One AdamW update (PyTorch's formulas, scalars formed in f64 and applied
// in f32): w = (decay ? w * shrink : w) + neg_step * m / (sqrt(v) / bc2_sqrt
// + eps), after m = m + w1 (g - m), v = v b2 + w2 g^2.
struct AdamWStep {
  bool decay;
  float shrink, w1, b2, w2, neg_step, bc2_sqrt, eps;
};

// One SGD update: d = g + wd w; with momentum buf = first ? d : buf mu +
// keep d, d = nesterov ? d + mu buf : buf; then w = w + neg_lr d.
struct SgdStep {
  float wd, mu, keep, neg_lr;
  bool momentum, first, nesterov;
};

// What a device's allocator holds besides live tensors (which MemoryStats
// counts), and the device's own figures; zeros where a backend has none.
struct DeviceMemoryInfo {
  int64_t reserved = 0;       // bytes the allocator holds from the device
  int64_t peak_reserved = 0;  // the most it has held
  int64_t cached = 0;         // held but in no live tensor, kept for reuse
  int64_t capacity = 0;       // the device's memory
  int64_t device_free = 0;    // free on the device now, as it reports it
};

class Backend {
 public:
  explicit Backend(Device device) : device_(device) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  Device device() const { return device_; }
  // "cpu (avx512)", "cuda:0 (NVIDIA H200)", "cuda:0 (built without CUDA)".
  virtual std::string name() const;

  // ---- memory --------------------------------------------------------------
  // Raw bytes on this device (CPU: Storage::kAlignment aligned), nullptr when it has no room.
  virtual void* allocate(size_t nbytes);
  virtual void release(void* ptr, size_t nbytes);
  // nbytes between host memory and this device's memory (both contiguous).
  virtual void copy_from_host(void* dst, const void* host_src, size_t nbytes);
  virtual void copy_to_host(void* host_dst, const void* src, size_t nbytes);
  // Waits until everything issued to this device has run (kernels run
  // asynchronously on a GPU; the CPU's have run when they return).
  virtual void synchronize();
  virtual DeviceMemoryInfo memory_info();
  // The device's peak arithmetic rate in `dtype` (FLOP/s), for MFU; 0 when
  // this backend does not know it.
  virtual double peak_flops(DType dtype);

  // ---- data movement (Tensor::fill_, copy_, to; engine/accumulate.h) -------
  virtual void fill(const Tensor& dst, double value);
  // dst = src converted to dst's dtype (engine/dtype.h convert); src has
  // dst's shape (a broadcast src has stride 0 along the broadcast dims).
  virtual void copy(const Tensor& dst, const Tensor& src);
  // Whether every element of x converts to the integer dtype `to` without
  // wrap-around or undefined behaviour (floats truncate toward zero first).
  virtual bool representable(const Tensor& x, DType to);

  // ---- elementwise (f32, f64; binary also i32, i64) ------------------------
  // y = op(x), contiguous, x's shape and dtype.
  virtual Tensor unary(UnaryOp op, double param, const Tensor& x);
  // dx = op's gradient at (x or y, whichever the op saves: `saved`) times g.
  virtual Tensor unary_backward(UnaryOp op, double param, const Tensor& saved, const Tensor& g);
  // out = a op b, all three of one shape and dtype (out may alias a).
  virtual void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
  // silu(gate) * up, and its gradients {dgate, dup}; one shape.
  virtual Tensor swiglu(const Tensor& gate, const Tensor& up);
  virtual Tensors swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy);
  // cond ? a : b, all of one shape (cond bool).
  virtual Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

  // ---- reductions ----------------------------------------------------------
  // x contiguous, seen as (A, R, B) -> (A, B) summed over R in order.
  virtual Tensor sum_middle(const Tensor& x, int64_t A, int64_t R, int64_t B);
  // x contiguous (M, R), R >= 1 -> {values (M), indices (M) i64}: the first
  // maximum of each row, NaN above every number.
  virtual Tensors max_rows(const Tensor& x);
  // Sums of x^2 (x contiguous f32) over its consecutive 4096-element chunks,
  // each accumulated in f64 in order -> f64 (ceil(numel / 4096)). A caller
  // that adds them in order gets the same bits for any thread count.
  virtual Tensor chunk_square_sums(const Tensor& x);

  // ---- rows (the normalised dim is the last; x contiguous (M, R)) ----------
  virtual Tensor softmax(SoftmaxKind kind, const Tensor& x);
  virtual Tensor softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& g);
  virtual TargetCount count_targets(const Tensor& targets, int64_t classes, int64_t ignore_index);
  // logits (N, C), targets (N) i64 -> {sum over counted rows of
  // logsumexp(row) - row[target] (an f64 scalar, rows added in order),
  // lse (N) in the logits' dtype}.
  virtual Tensors cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index);
  // dlogits = scale (softmax(logits) - onehot(target)), 0 on ignored rows,
  // with scale = g / divisor (g a scalar tensor; 0 when divisor is 0).
  virtual Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                        const Tensor& lse, const Tensor& g, double divisor,
                                        int64_t ignore_index);
  // x (M, C), w (C) -> {y (M, C), rstd (M)}.
  virtual Tensors rmsnorm(const Tensor& x, const Tensor& w, double eps);
  // -> {dx, dw}, each undefined unless needed (w is read only for dx).
  virtual Tensors rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd,
                                   const Tensor& g, bool need_dx, bool need_dw);
  // x (M, C), w (C), b (C) or undefined -> {y, mean (M), rstd (M)}.
  virtual Tensors layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
  // -> {dx, dw, db}, each undefined unless needed.
  virtual Tensors layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& g, bool need_dx,
                                     bool need_dw, bool need_db);
  // x (B, H, T, D) rotated by the angles positions ((T) or (B, T)) times
  // inv_freq (D/2), cos and sin times scaling: sign 1 forward, -1 back.
  virtual Tensor rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                        double scaling, int sign);

  // ---- indexing ------------------------------------------------------------
  virtual IndexRange index_range(const Tensor& index);
  // out[p] = x[p with p[dim] = index[p]] over p in index's shape (in range).
  virtual Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
  // out[p with p[dim] = index[p]] += src[p] over p in src's shape; each sum
  // in increasing p[dim].
  virtual void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
  // x contiguous -> {values, indices i64} of the k first along dim in
  // ops::topk's order.
  virtual Tensors topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted);
  // weight (V, C), ids (...) in range -> (..., C).
  virtual Tensor embedding(const Tensor& weight, const Tensor& ids);
  // g (..., C), ids (...) -> dweight (V, C), each row summed in id order.
  virtual Tensor embedding_backward(const Tensor& g, const Tensor& ids, int64_t V);

  // ---- products ------------------------------------------------------------
  // a (..., M, K) @ b (..., K, N) -> contiguous (..., M, N), batch dims
  // broadcast. Each element is the sequential FMA chain over k from 0.
  virtual Tensor matmul(const Tensor& a, const Tensor& b);
  // q (B, Hq, T, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv) -> {out (B, Hq, T,
  // Dv), lse (B, Hq, T)}.
  virtual Tensors sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionParams& params);
  // -> {dq, dk, dv}; dq and dk undefined unless needed.
  virtual Tensors sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& out, const Tensor& lse, const Tensor& dout,
                                const AttentionParams& params, bool need_dq, bool need_dk);

  // ---- mixture of experts --------------------------------------------------
  // scores (N, E), bias (E) or undefined -> ops::moe_route's outputs
  // {weights, indices, token, counts, routed} then {slot, top} for backward.
  virtual Tensors moe_route(const Tensor& scores, const Tensor& bias, const RouteParams& params);
  virtual Tensor moe_route_backward(const Tensor& grad_weights, const Tensor& indices,
                                    const Tensor& slot, const Tensor& top, int64_t E,
                                    const RouteParams& params);

  // ---- random (t contiguous f32 or f64; words as rng/distributions.h) ------
  // U(low, high]: low + (high - low) u by one fma (u ~ U(0, 1]).
  virtual void fill_uniform(const Tensor& t, const rng::Reservation& r, double low, double high);
  // N(mean, std^2): mean + std z by one fma.
  virtual void fill_normal(const Tensor& t, const rng::Reservation& r, double mean, double std);
  virtual void fill_bernoulli(const Tensor& t, const rng::Reservation& r, double p);
  // N(mean, std^2) truncated to [a, b], by inverting the CDF of a double
  // uniform on the truncated range.
  virtual void fill_trunc_normal(const Tensor& t, const rng::Reservation& r, double mean,
                                 double std, double a, double b);
  // Inverted dropout: x / (1 - p) where kept, else 0.
  virtual Tensor dropout(const Tensor& x, double p, const rng::Reservation& r);

  // ---- optimizers (contiguous f32 tensors of one shape) --------------------
  virtual void adamw_step(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v,
                          const AdamWStep& step);
  // buf is undefined without momentum.
  virtual void sgd_step(const Tensor& w, const Tensor& g, const Tensor& buf, const SgdStep& step);
  // t *= s in place (t contiguous f32).
  virtual void scale_(const Tensor& t, double s);

  // ---- study tools ---------------------------------------------------------
  // A contiguous copy of t with finite element i moved by
  // fn::splitmix64(seed + i) % (2k + 1) - k ulps, unless that leaves the
  // finite range (autograd/recompute_noise.h).
  virtual Tensor perturb_ulps(const Tensor& t, int k, uint64_t seed);

 protected:
  // What the Error for a kernel this backend lacks says after naming the
  // kernel and the backend.
  virtual std::string missing_reason() const;

 private:
  [[noreturn]] void missing(const char* kernel) const;

  Device device_;
};

// The backend of a device. For the CPU it is the build for the capability
// cpu_capability() selects (engine/cpu_capability.h), unless a
// ScopedCpuBackend is in place.
Backend& backend(Device device);

// While it lives, the CPU device's kernels run on `b` (for tests: the CUDA
// kernels on the simulator, tests/support/cuda_sim_backend.h). Guards nest;
// set them while no op runs on another thread.
class ScopedCpuBackend {
 public:
  explicit ScopedCpuBackend(Backend& b);
  ~ScopedCpuBackend();
  ScopedCpuBackend(const ScopedCpuBackend&) = delete;
  ScopedCpuBackend& operator=(const ScopedCpuBackend&) = delete;

 private:
  Backend* previous_;
};
inline Backend& backend_of(const Tensor& t) { return backend(t.device()); }

// Defined by the backends themselves (cpu/, cuda/).
Backend& cpu_backend();
Backend& cuda_backend(int index);
// Devices the CUDA backend sees (0 in a build without CUDA).
int cuda_device_count();

}  // namespace reprise
