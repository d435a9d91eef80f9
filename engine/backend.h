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
// The kernels are declared once, as rows of engine/kernels/*.def, and each
// backend's overrides come from the same rows. Every kernel has a default
// that raises an Error naming the op and the device, so a backend that
// lacks one fails clearly, never silently; and each backend says which it
// implements (kernels(), engine/kernel.h), so that a run can ask before it
// starts (require()).
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
#include "engine/kernel.h"
#include "engine/tensor.h"
#include "rng/reservation.h"

namespace reprise {

using Tensors = std::vector<Tensor>;

// Elementwise ops (UnaryOp, BinaryOp): engine/elementwise_ops.h. A unary
// kernel's `param` is the scalar parameter of the ops that take one.

// The argument list of a kernel's row (engine/kernels/all.def) without its
// parentheses: a backend that forwards a kernel passes REPRISE_KERNEL_ARGS args.
#define REPRISE_KERNEL_ARGS(...) __VA_ARGS__
enum class SoftmaxKind : uint8_t { softmax, log_softmax };

// Inverted dropout of attention weights: weight (b, h, i, j) is kept when
// word ((b Hq + h) T + i) S + j of `words` is a Bernoulli(1 - p) success.
struct AttentionDropout {
  rng::Reservation words;
  double p;
};

// The keys one tile of every backend's fused attention kernel holds (Bc).
// Keys are tiled from index 0, so two calls whose keys begin at positions
// a multiple of it apart tile them alike: a KV cache that drops a sliding
// window's old positions in such steps decodes bit for bit as the forward
// over the whole sequence (nn/kv_cache.h).
inline constexpr int64_t kAttentionKeyBlock = 64;

// The positions between the states the gated delta rule keeps for its
// backward (engine/kernels/delta_rule.def): a block's states are
// recomputed from the one before it.
inline constexpr int64_t kDeltaRuleBlock = 64;

struct AttentionParams {
  double scale;
  bool causal;                // query i sees keys j <= i + causal_offset
  int64_t causal_offset = 0;  // >= 0
  int64_t window = 0;  // > 0 (with causal): query i also needs j > i + causal_offset - window
  std::optional<AttentionDropout> dropout;
  // (Hq), q's dtype (f32 for 16-bit q): a logit per head added to each
  // row's softmax denominator after the keys (attention sinks); lse
  // includes it. Undefined: none.
  Tensor sinks;
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

// The chunk length of Backend::chunk_square_sums, in elements.
inline constexpr int64_t kSquareSumChunk = 4096;

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

  // ---- kernels: the rows of engine/kernels/*.def, each with its shapes ----
  // The kernels this backend implements; none by default.
  virtual KernelSet kernels() const;
  bool supports(Kernel k) const { return kernels().test(size_t(k)); }
  // Raises an Error naming this backend, the kernels of `needed` it lacks
  // and `what` needs them ("training"), and why it lacks them.
  void require(const KernelSet& needed, const std::string& what) const;

#define REPRISE_KERNEL(Ret, name, params, args) virtual Ret name params;
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

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
