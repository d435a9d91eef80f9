#pragma once
// The CUDA backend's kernels that run a driver of cuda/kernels/*.h as they
// are, one row each: X(Ret, name, (params), (args)) for Backend's kernel
// `name` (engine/backend.h, where each is documented) and the driver
// cuda::name(exec, args...). The CUDA backend declares and defines its
// overrides from these rows (cuda/backend.h, each topic's .cu file), and so
// does any other executor of the drivers, such as the simulator's backend
// (tests/support/cuda_sim_backend.h). Kernels with more to them than the
// driver (sdpa and its backward in 16 bits through cuDNN, the truncated
// normal drawn on the host) are written out by each backend.

#include "engine/backend.h"

// Ret name(params) override;
#define REPRISE_KERNEL_OVERRIDE(Ret, name, params, args) Ret name params override;
// The argument list of a row, without its parentheses.
#define REPRISE_KERNEL_ARGS(...) __VA_ARGS__

// cuda/copy.cu (cuda/kernels/copy.h)
#define REPRISE_CUDA_COPY_KERNELS(X)                                \
  X(void, fill, (const Tensor& dst, double value), (dst, value))    \
  X(void, copy, (const Tensor& dst, const Tensor& src), (dst, src)) \
  X(bool, representable, (const Tensor& x, DType to), (x, to))

// cuda/elementwise.cu (cuda/kernels/elementwise.h)
#define REPRISE_CUDA_ELEMENTWISE_KERNELS(X)                                                   \
  X(Tensor, unary, (UnaryOp op, double param, const Tensor& x), (op, param, x))               \
  X(Tensor, unary_backward, (UnaryOp op, double param, const Tensor& saved, const Tensor& g), \
    (op, param, saved, g))                                                                    \
  X(void, binary, (BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b),         \
    (op, out, a, b))                                                                          \
  X(Tensor, swiglu, (const Tensor& gate, const Tensor& up), (gate, up))                       \
  X(Tensors, swiglu_backward, (const Tensor& gate, const Tensor& up, const Tensor& dy),       \
    (gate, up, dy))                                                                           \
  X(Tensor, where, (const Tensor& cond, const Tensor& a, const Tensor& b), (cond, a, b))      \
  X(Tensor, perturb_ulps, (const Tensor& t, int k, uint64_t seed), (t, k, seed))

// cuda/indexing.cu (cuda/kernels/indexing.h)
#define REPRISE_CUDA_INDEXING_KERNELS(X)                                                         \
  X(IndexRange, index_range, (const Tensor& index), (index))                                     \
  X(Tensor, gather, (const Tensor& x, int64_t dim, const Tensor& index), (x, dim, index))        \
  X(void, scatter_add, (const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src), \
    (out, dim, index, src))                                                                      \
  X(Tensors, topk, (const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted),         \
    (x, k, dim, largest, sorted))                                                                \
  X(Tensor, embedding, (const Tensor& weight, const Tensor& ids), (weight, ids))                 \
  X(Tensor, embedding_backward, (const Tensor& g, const Tensor& ids, int64_t V), (g, ids, V))

// cuda/matmul.cu (cuda/kernels/matmul.h)
#define REPRISE_CUDA_MATMUL_KERNELS(X) X(Tensor, matmul, (const Tensor& a, const Tensor& b), (a, b))

// cuda/moe_route.cu (cuda/kernels/moe_route.h)
#define REPRISE_CUDA_MOE_ROUTE_KERNELS(X)                                                      \
  X(Tensors, moe_route, (const Tensor& scores, const Tensor& bias, const RouteParams& params), \
    (scores, bias, params))                                                                    \
  X(Tensor, moe_route_backward,                                                                \
    (const Tensor& grad_weights, const Tensor& indices, const Tensor& slot, const Tensor& top, \
     int64_t E, const RouteParams& params),                                                    \
    (grad_weights, indices, slot, top, E, params))

// cuda/optim.cu (cuda/kernels/optim.h)
#define REPRISE_CUDA_OPTIM_KERNELS(X)                                                            \
  X(void, adamw_step,                                                                            \
    (const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v, const AdamWStep& step), \
    (w, g, m, v, step))                                                                          \
  X(void, sgd_step, (const Tensor& w, const Tensor& g, const Tensor& buf, const SgdStep& step),  \
    (w, g, buf, step))                                                                           \
  X(void, scale_, (const Tensor& t, double s), (t, s))

// cuda/random.cu (cuda/kernels/random.h)
#define REPRISE_CUDA_RANDOM_KERNELS(X)                                                         \
  X(void, fill_uniform, (const Tensor& t, const rng::Reservation& r, double low, double high), \
    (t, r, low, high))                                                                         \
  X(void, fill_normal, (const Tensor& t, const rng::Reservation& r, double mean, double std),  \
    (t, r, mean, std))                                                                         \
  X(void, fill_bernoulli, (const Tensor& t, const rng::Reservation& r, double p), (t, r, p))   \
  X(Tensor, dropout, (const Tensor& x, double p, const rng::Reservation& r), (x, p, r))

// cuda/reduce.cu (cuda/kernels/reduce.h)
#define REPRISE_CUDA_REDUCE_KERNELS(X)                                                    \
  X(Tensor, sum_middle, (const Tensor& x, int64_t A, int64_t R, int64_t B), (x, A, R, B)) \
  X(Tensors, max_rows, (const Tensor& x), (x))                                            \
  X(Tensor, chunk_square_sums, (const Tensor& x), (x))

// cuda/rotary.cu (cuda/kernels/rotary.h)
#define REPRISE_CUDA_ROTARY_KERNELS(X)                                                            \
  X(Tensor, rotary,                                                                               \
    (const Tensor& x, const Tensor& positions, const Tensor& inv_freq, double scaling, int sign), \
    (x, positions, inv_freq, scaling, sign))

// cuda/rows.cu (cuda/kernels/loss.h, norm.h, softmax.h)
#define REPRISE_CUDA_ROWS_KERNELS(X)                                                              \
  X(Tensor, softmax, (SoftmaxKind kind, const Tensor& x), (kind, x))                              \
  X(Tensor, softmax_backward, (SoftmaxKind kind, const Tensor& y, const Tensor& g), (kind, y, g)) \
  X(TargetCount, count_targets, (const Tensor& targets, int64_t classes, int64_t ignore_index),   \
    (targets, classes, ignore_index))                                                             \
  X(Tensors, cross_entropy, (const Tensor& logits, const Tensor& targets, int64_t ignore_index),  \
    (logits, targets, ignore_index))                                                              \
  X(Tensor, cross_entropy_backward,                                                               \
    (const Tensor& logits, const Tensor& targets, const Tensor& lse, const Tensor& g,             \
     double divisor, int64_t ignore_index),                                                       \
    (logits, targets, lse, g, divisor, ignore_index))                                             \
  X(Tensors, rmsnorm, (const Tensor& x, const Tensor& w, double eps), (x, w, eps))                \
  X(Tensors, rmsnorm_backward,                                                                    \
    (const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& g, bool need_dx,         \
     bool need_dw),                                                                               \
    (x, w, rstd, g, need_dx, need_dw))                                                            \
  X(Tensors, layernorm, (const Tensor& x, const Tensor& w, const Tensor& b, double eps),          \
    (x, w, b, eps))                                                                               \
  X(Tensors, layernorm_backward,                                                                  \
    (const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& g,   \
     bool need_dx, bool need_dw, bool need_db),                                                   \
    (x, w, mean, rstd, g, need_dx, need_dw, need_db))

// Every row above.
#define REPRISE_CUDA_KERNELS(X)                                         \
  REPRISE_CUDA_COPY_KERNELS(X)                                          \
  REPRISE_CUDA_ELEMENTWISE_KERNELS(X)                                   \
  REPRISE_CUDA_INDEXING_KERNELS(X) REPRISE_CUDA_MATMUL_KERNELS(X)       \
      REPRISE_CUDA_MOE_ROUTE_KERNELS(X) REPRISE_CUDA_OPTIM_KERNELS(X)   \
          REPRISE_CUDA_RANDOM_KERNELS(X) REPRISE_CUDA_REDUCE_KERNELS(X) \
              REPRISE_CUDA_ROTARY_KERNELS(X) REPRISE_CUDA_ROWS_KERNELS(X)
