// scaled_dot_product_attention: checks, the dropout reservation, recording
// and the backward rule; the fused kernels are the backend's
// (Backend::sdpa, sdpa_backward).
//
// B = batch, Hq/Hkv = query/kv heads, T = queries, S = keys, D = q/k head
// size, Dv = v head size.
#include "ops/attention.h"

#include <cmath>
#include <optional>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/check.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "rng/distributions.h"
#include "rng/generator.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

constexpr const char* kOpName = "scaled_dot_product_attention";

std::string describe_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  return "q " + q.describe() + ", k " + k.describe() + ", v " + v.describe();
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt) {
  REPRISE_CHECK(q.defined() && k.defined() && v.defined(), kOpName, ": undefined input");
  detail::check_any_float(kOpName, q);
  detail::check_same_dtype_device(kOpName, q, k);
  detail::check_same_dtype_device(kOpName, q, v);
  const std::string shapes = describe_inputs(q, k, v);
  REPRISE_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOpName,
                ": expected q (B, Hq, T, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv), got ", shapes);
  REPRISE_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), kOpName,
                ": batch sizes differ: ", shapes);
  REPRISE_CHECK(v.size(1) == k.size(1) && v.size(2) == k.size(2), kOpName,
                ": k and v must agree in heads and length (B, Hkv, S), got ", shapes);
  REPRISE_CHECK(k.size(3) == q.size(3), kOpName, ": q and k head sizes D differ: ", shapes);
  REPRISE_CHECK(k.size(1) >= 1 && q.size(1) % k.size(1) == 0, kOpName,
                ": query heads Hq must be a multiple of kv heads Hkv, got ", shapes);
  REPRISE_CHECK(k.size(2) >= 1, kOpName, ": no keys (S = 0): ", shapes);
  REPRISE_CHECK(q.size(3) >= 1 && v.size(3) >= 1, kOpName, ": empty head size: ", shapes);
  REPRISE_CHECK(!opt.scale || std::isfinite(*opt.scale), kOpName, ": scale must be finite, got ",
                opt.scale.value_or(0.0));
  REPRISE_CHECK(opt.dropout_p >= 0.0 && opt.dropout_p < 1.0, kOpName,
                ": dropout_p must lie in [0, 1), got ", opt.dropout_p);
  REPRISE_CHECK(opt.causal_offset >= 0, kOpName, ": causal_offset must be >= 0, got ",
                opt.causal_offset, " for ", shapes);
  REPRISE_CHECK(opt.window >= 0, kOpName, ": window must be >= 0 (0: none), got ", opt.window,
                " for ", shapes);
  if (opt.sinks.defined()) {
    const DType want = compute_dtype(q.dtype());
    REPRISE_CHECK(opt.sinks.dim() == 1 && opt.sinks.size(0) == q.size(1) &&
                      opt.sinks.dtype() == want && opt.sinks.device() == q.device(),
                  kOpName, ": expected sinks of shape (Hq) = (", q.size(1), "), dtype ",
                  dtype_name(want), " on ", to_string(q.device()), ", got ", opt.sinks.describe(),
                  " for ", shapes);
  }
  if (opt.window == 0) return;
  REPRISE_CHECK(opt.causal, kOpName, ": window = ", opt.window,
                " needs causal = true (a sliding window bounds a causal mask), for ", shapes);
  // The last query's window starts at T - 1 + causal_offset - window + 1.
  const int64_t T = q.size(2), S = k.size(2);
  REPRISE_CHECK(T == 0 || T + opt.causal_offset - opt.window < S, kOpName,
                ": with window = ", opt.window, " and causal_offset = ", opt.causal_offset,
                " the last query (", T - 1, ") sees no key (its window starts at ",
                T + opt.causal_offset - opt.window, ", past the last key ", S - 1,
                "); expected T + causal_offset - window < S, for ", shapes);
}

// The kernel's parameters for a forward or replay: `mask` (scale, causal
// mask and window) and, with dropout, p and the words it was given, which
// must cover every (b, h, i, j).
AttentionParams params_of(const AttentionParams& mask, double p, const rng::Reservation* r,
                          const Tensor& q, const Tensor& k) {
  AttentionParams params = mask;
  if (p == 0) return params;
  const uint64_t need = sdpa_dropout_words(q.size(0), q.size(1), q.size(2), k.size(2));
  REPRISE_CHECK(r != nullptr && r->count >= need, kOpName, ": dropout_p = ", p, " needs ", need,
                " random words (B Hq T S) for q ", q.describe(), ", k ", k.describe(), ", got ",
                r ? rng::to_string(*r) : std::string("no reservation"));
  params.dropout = AttentionDropout{.words = *r, .p = p};
  return params;
}

// The gradient of the sinks (Hq): a sink is a key whose weight P_sink =
// exp(sink - lse) multiplies no value, so dL/dsink = -P_sink Di with Di =
// rowsum(dO O), summed over b and i. out, dout: (B, Hq, T, Dv) in q's
// dtype; lse: (B, Hq, T) in the sinks' dtype. Sums in a fixed order.
Tensor sink_gradient(const Tensor& sinks, const Tensor& out, const Tensor& lse,
                     const Tensor& dout) {
  const NoGradGuard no_grad;
  const DType dtype = sinks.dtype();
  const Tensor delta = sum(mul(cast(dout, dtype), cast(out, dtype)), {-1});  // (B, Hq, T)
  const Tensor weight = exp(sub(reshape(sinks, {1, sinks.size(0), 1}), lse));
  return neg(sum(mul(weight, delta), {0, 2}));  // (Hq)
}

}  // namespace

uint64_t sdpa_dropout_words(int64_t B, int64_t Hq, int64_t T, int64_t S) {
  return rng::bernoulli_words(uint64_t(B) * uint64_t(Hq) * uint64_t(T) * uint64_t(S));
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  check_inputs(q, k, v, options);
  // What the recorded closures capture, so a replay computes the same mask.
  const AttentionParams mask{
      .scale = options.scale.value_or(1.0 / std::sqrt(double(q.size(3)))),
      .causal = options.causal,
      .causal_offset = options.causal ? options.causal_offset : 0,
      .window = options.window,
  };
  const double p = options.dropout_p;
  std::optional<rng::Reservation> words;
  if (p > 0) {
    if (options.dropout_rng) {
      words = options.dropout_rng;
    } else {
      rng::Generator& gen = options.generator ? *options.generator : rng::default_generator();
      words = gen.reserve(options.dropout_stream,
                          sdpa_dropout_words(q.size(0), q.size(1), q.size(2), k.size(2)));
    }
  }
  const bool sinks = options.sinks.defined();
  Tensors inputs{q, k, v};
  if (sinks) inputs.push_back(options.sinks);
  return autograd::record_one({
      .op = p > 0 ? registry::kSdpaDropout : registry::kSdpa,
      .inputs = std::move(inputs),
      // Replay passes the recorded reservation (or, on purpose, another one) as r.
      .forward =
          [mask, p](const Tensors& in, const rng::Reservation* r) {
            AttentionParams params = params_of(mask, p, r, in[0], in[1]);
            if (in.size() > 3) params.sinks = in[3];
            return backend_of(in[0]).sdpa(in[0], in[1], in[2], params);
          },
      // lse includes the sinks, so the kernels' gradients of q, k and v
      // need nothing more; a sink's own is sink_gradient's.
      .backward =
          [mask, p, sinks](Node& node, const Tensors& g) {
            const Tensor q = node.saved_input(0), k = node.saved_input(1);
            AttentionParams params = params_of(mask, p, node.rng ? &*node.rng : nullptr, q, k);
            if (sinks) params.sinks = node.saved_input(3);
            const Tensor out = node.saved_output(0), lse = node.saved_output(1);
            Tensors grads =
                backend_of(g[0]).sdpa_backward(q, k, node.saved_input(2), out, lse, g[0], params,
                                               node.needs_input_grad(0), node.needs_input_grad(1));
            if (sinks) {
              grads.push_back(node.needs_input_grad(3) ? sink_gradient(params.sinks, out, lse, g[0])
                                                       : Tensor());
            }
            return grads;
          },
      .save = {.inputs = sinks ? std::vector<uint32_t>{0, 1, 2, 3} : std::vector<uint32_t>{0, 1, 2},
               .outputs = {0, 1}},
      .num_public_outputs = 1,
      .rng = words,
  });
}

}  // namespace reprise::ops
