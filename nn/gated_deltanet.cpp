#include "nn/gated_deltanet.h"

#include <cmath>

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "ops/binary.h"
#include "ops/delta_rule.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/views.h"

namespace reprise::nn {
namespace {

// The L2 norm's epsilon of transformers' l2norm.
constexpr double kL2Eps = 1e-6;

const LinearAttentionConfig& shape_of(const LlamaConfig& c) {
  REPRISE_CHECK(c.linear_attention.has_value(),
                "GatedDeltaNet: the config has no linear_attention settings");
  return *c.linear_attention;
}

// x * rsqrt(sum(x^2) + eps) over the last dimension.
Tensor l2_normalized(const Tensor& x) {
  return ops::mul(x, ops::rsqrt(ops::add(ops::sum(ops::mul(x, x), {-1}, true), kL2Eps)));
}

// (B, T, Hk, d) -> (B, T, Hk r, d): each key head repeated for its r value
// heads (torch's repeat_interleave on dim 2).
Tensor repeat_heads(const Tensor& x, int64_t r) {
  if (r == 1) return x;
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), d = x.size(3);
  return ops::reshape(ops::expand(ops::unsqueeze(x, 3), {B, T, H, r, d}), {B, T, H * r, d});
}

}  // namespace

GatedDeltaNet::Conv::Conv(int64_t channels, int64_t width) : Module("conv1d") {
  weight_ = register_parameter("weight", {channels, 1, width});
}

GatedDeltaNet::GatedDeltaNet(std::string name, const LlamaConfig& c)
    : Attention(std::move(name)),
      conv1d(shape_of(c).conv_dim(), shape_of(c).conv_kernel),
      norm("norm", shape_of(c).value_head_dim, c.rms_norm_eps),
      out_proj("out_proj", shape_of(c).value_heads * shape_of(c).value_head_dim, c.hidden_size),
      shape_(shape_of(c)) {
  const int64_t C = c.hidden_size, K = shape_.key_heads * shape_.key_head_dim;
  const int64_t V = shape_.value_heads * shape_.value_head_dim;
  auto linear = [&](const char* name, int64_t out) {
    auto l = std::make_unique<Linear>(name, C, out);
    register_module(*l);
    return l;
  };
  // HF's registration order (Qwen3.5's projections come last).
  register_module(conv1d);
  if (!shape_.split_projections) {
    in_proj_qkvz = linear("in_proj_qkvz", 2 * K + 2 * V);
    in_proj_ba = linear("in_proj_ba", 2 * shape_.value_heads);
  }
  dt_bias_ = register_parameter("dt_bias", {shape_.value_heads}, /*decay=*/false);
  a_log_ = register_parameter("A_log", {shape_.value_heads}, /*decay=*/false);
  register_module(norm);
  register_module(out_proj);
  if (shape_.split_projections) {
    in_proj_qkv = linear("in_proj_qkv", 2 * K + V);
    in_proj_z = linear("in_proj_z", V);
    in_proj_b = linear("in_proj_b", shape_.value_heads);
    in_proj_a = linear("in_proj_a", shape_.value_heads);
  }
}

void GatedDeltaNet::reset_parameters(double std, rng::Generator& gen, std::string_view stream) {
  Tensor conv = conv1d.weight();
  ops::normal_(conv, 0.0, std, gen, stream);
  NoGradGuard no_grad;
  dt_bias_.fill_(1.0);
  Tensor a = Tensor::empty(a_log_.shape());
  ops::uniform_(a, 0.01, 16.0, gen, stream);
  a_log_.copy_(ops::log(a).to(a_log_.device()));
}

Tensor GatedDeltaNet::forward(const Tensor& x, rng::Generator&, const LayerKv* kv) const {
  autograd::Scope scope(name());
  REPRISE_CHECK(x.dim() == 3, "GatedDeltaNet '", name(), "': expected x of shape (B, T, C), got ",
                x.describe());
  const int64_t B = x.size(0), T = x.size(1);
  const int64_t Hk = shape_.key_heads, Hv = shape_.value_heads, r = Hv / Hk;
  const int64_t dk = shape_.key_head_dim, dv = shape_.value_head_dim, W = shape_.conv_kernel;
  const int64_t Cc = shape_.conv_dim();
  const bool continues = kv != nullptr && kv->start > 0;
  if (kv) {
    REPRISE_CHECK(kv->k.defined() && kv->k.shape() == (Shape{B, W - 1, Cc}) && kv->v.defined() &&
                      kv->v.shape() == (Shape{B, Hv, dk, dv}) && !GradMode::enabled(),
                  "GatedDeltaNet '", name(), "': expected cache states of shapes ",
                  to_string({B, W - 1, Cc}), " and ", to_string({B, Hv, dk, dv}),
                  " and no grad, got ", kv->k.defined() ? kv->k.describe() : "undefined", " and ",
                  kv->v.defined() ? kv->v.describe() : "undefined");
  }
  auto part = [&](const Tensor& t, int64_t from, int64_t to, const Shape& shape) {
    return ops::reshape(ops::slice(t, 3, from, to), shape);
  };
  Tensor mixed, z, b, a;  // (B, T, Cc): q, k, v; (B, T, Hv, dv); (B, T, Hv) twice
  if (shape_.split_projections) {
    mixed = in_proj_qkv->forward(x);
    z = ops::reshape(in_proj_z->forward(x), {B, T, Hv, dv});
    b = in_proj_b->forward(x);
    a = in_proj_a->forward(x);
  } else {
    // (B, T, Hk, 2 dk + 2 r dv): q, k, v, z per key head; (B, T, Hk, 2 r): b, a.
    const Tensor qkvz = ops::reshape(in_proj_qkvz->forward(x), {B, T, Hk, 2 * dk + 2 * r * dv});
    const Tensor ba = ops::reshape(in_proj_ba->forward(x), {B, T, Hk, 2 * r});
    mixed = ops::cat({part(qkvz, 0, dk, {B, T, Hk * dk}), part(qkvz, dk, 2 * dk, {B, T, Hk * dk}),
                      part(qkvz, 2 * dk, 2 * dk + r * dv, {B, T, Hv * dv})},
                     2);
    z = part(qkvz, 2 * dk + r * dv, 2 * dk + 2 * r * dv, {B, T, Hv, dv});
    b = part(ba, 0, r, {B, T, Hv});
    a = part(ba, r, 2 * r, {B, T, Hv});
  }

  Tensor conv;  // (B, T, Cc)
  {
    // Tap j of position t reads input t - (W - 1) + j: the W - 1 inputs
    // before the first position (zeros, or the cache's) come first.
    autograd::Scope conv_scope("conv1d");
    Tensor padded = mixed;
    if (W > 1) {
      const Tensor before =
          continues ? kv->k : Tensor::zeros({B, W - 1, Cc}, x.dtype(), x.device());
      padded = ops::cat({before, mixed}, 1);  // (B, W - 1 + T, Cc)
    }
    const Tensor w = ops::reshape(conv1d.weight(), {Cc, W});
    for (int64_t j = 0; j < W; ++j) {
      const Tensor tap =
          ops::mul(ops::slice(padded, 1, j, j + T), ops::reshape(ops::slice(w, 1, j, j + 1), {Cc}));
      conv = j == 0 ? tap : ops::add(conv, tap);
    }
    conv = ops::silu(conv);
    if (kv && W > 1) Tensor(kv->k).copy_(ops::slice(padded, 1, T, T + W - 1));
  }
  // Channels [from, to) of the convolution's output, as `shape`.
  auto channels = [&](int64_t from, int64_t to, const Shape& shape) {
    return ops::reshape(ops::slice(conv, 2, from, to), shape);
  };
  const Tensor q =
      ops::mul(l2_normalized(channels(0, Hk * dk, {B, T, Hk, dk})), 1.0 / std::sqrt(double(dk)));
  const Tensor k = l2_normalized(channels(Hk * dk, 2 * Hk * dk, {B, T, Hk, dk}));
  const Tensor v = channels(2 * Hk * dk, Cc, {B, T, Hv, dv});
  const Tensor beta = ops::sigmoid(b);
  const Tensor decay =
      ops::exp(ops::mul(ops::neg(ops::exp(a_log_)), ops::softplus(ops::add(a, dt_bias_))));
  const ops::DeltaRuleResult rule = ops::gated_delta_rule(
      repeat_heads(q, r), repeat_heads(k, r), v, decay, beta, continues ? kv->v : Tensor());
  if (kv) Tensor(kv->v).copy_(rule.state);
  const Tensor gated = ops::mul(norm.forward(rule.out), ops::silu(z));  // (B, T, Hv, dv)
  return out_proj.forward(ops::reshape(gated, {B, T, Hv * dv}));
}

}  // namespace reprise::nn
