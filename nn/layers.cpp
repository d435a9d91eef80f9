#include "nn/layers.h"

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "nn/autocast.h"
#include "ops/binary.h"
#include "ops/embedding.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/swiglu.h"
#include "ops/unary.h"

namespace reprise::nn {
namespace {

void check_positive(const char* layer, const std::string& name, const char* what, int64_t v) {
  REPRISE_CHECK(v > 0, layer, " '", name, "': ", what, " must be positive, got ", v);
}

}  // namespace

// ---- Linear -----------------------------------------------------------------

Linear::Linear(std::string name, int64_t in_features, int64_t out_features, bool bias)
    : Module(std::move(name)) {
  check_positive("Linear", this->name(), "in_features", in_features);
  check_positive("Linear", this->name(), "out_features", out_features);
  weight_ = register_parameter("weight", {out_features, in_features});
  if (bias) bias_ = register_parameter("bias", {out_features}, /*decay=*/false);
}

Tensor Linear::forward(const Tensor& x) const {
  autograd::Scope scope(name());
  return project(x);
}

Tensor Linear::project(const Tensor& x) const {
  Tensor y = autocast_linear(x, weight_);
  return bias_.defined() ? ops::add(y, bias_) : y;
}

Tensor Linear::forward_16bit(const Tensor& x) const {
  REPRISE_CHECK(!bias_.defined(), "Linear '", name(),
                "': forward_16bit is for a layer without a bias (a bias is added widened)");
  autograd::Scope scope(name());
  return autocast_product(x, weight_);
}

void Linear::reset_parameters(double std, rng::Generator& gen, std::string_view stream) {
  ops::normal_(weight_, 0.0, std, gen, stream);
  if (bias_.defined()) {
    NoGradGuard no_grad;
    bias_.fill_(0.0);
  }
}

// ---- Embedding --------------------------------------------------------------

Embedding::Embedding(std::string name, int64_t num_embeddings, int64_t embedding_dim,
                     std::optional<int64_t> padding_idx)
    : Module(std::move(name)), padding_idx_(padding_idx) {
  check_positive("Embedding", this->name(), "num_embeddings", num_embeddings);
  check_positive("Embedding", this->name(), "embedding_dim", embedding_dim);
  REPRISE_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < num_embeddings), "Embedding '",
                this->name(), "': padding_idx ", padding_idx.value_or(0), " is not in [0, ",
                num_embeddings, ")");
  weight_ = register_parameter("weight", {num_embeddings, embedding_dim}, /*decay=*/false);
}

Tensor Embedding::forward(const Tensor& ids) const {
  autograd::Scope scope(name());
  return ops::embedding(weight_, ids, padding_idx_);
}

void Embedding::reset_parameters(double std, rng::Generator& gen, std::string_view stream) {
  ops::normal_(weight_, 0.0, std, gen, stream);
  if (padding_idx_) {
    NoGradGuard no_grad;
    weight_.select(0, *padding_idx_).fill_(0.0);  // HF's _init_weights
  }
}

// ---- RMSNorm ----------------------------------------------------------------

RMSNorm::RMSNorm(std::string name, int64_t dim, double eps, bool unit_offset)
    : Module(std::move(name)), eps_(eps), unit_offset_(unit_offset) {
  check_positive("RMSNorm", this->name(), "dim", dim);
  REPRISE_CHECK(eps > 0, "RMSNorm '", this->name(), "': eps must be positive, got ", eps);
  weight_ = register_parameter("weight", {dim}, /*decay=*/false);
  reset_parameters();
}

Tensor RMSNorm::forward(const Tensor& x) const {
  autograd::Scope scope(name());
  // Gemma's 1 + w, in the weight's dtype as transformers computes it.
  return ops::rmsnorm(x, unit_offset_ ? ops::add(weight_, 1.0) : weight_, eps_);
}

void RMSNorm::reset_parameters() {
  NoGradGuard no_grad;
  weight_.fill_(unit_offset_ ? 0.0 : 1.0);
}

// ---- GatedMLP --------------------------------------------------------------

GatedMLP::GatedMLP(std::string name, int64_t hidden_size, int64_t intermediate_size, bool bias,
                   MlpActivation activation)
    : Module(std::move(name)),
      gate_proj("gate_proj", hidden_size, intermediate_size, bias),
      up_proj("up_proj", hidden_size, intermediate_size, bias),
      down_proj("down_proj", intermediate_size, hidden_size, bias),
      activation_(activation) {
  register_module(gate_proj);
  register_module(up_proj);
  register_module(down_proj);
}

Tensor GatedMLP::forward(const Tensor& x) const {
  autograd::Scope scope(name());
  const Tensor in = autocast_operand(x);
  if (activation_ == MlpActivation::gelu_tanh) {
    // gelu(g) * u on f32 products (as every projection but SwiGLU's under
    // autocast), then down.
    return down_proj.forward(ops::mul(ops::gelu(gate_proj.forward(in)), up_proj.forward(in)));
  }
  // Under bf16 autocast the gate and up products stay bf16 for SwiGLU; a
  // biased MLP widens them, as every other projection does.
  auto project = [](const Tensor& in, const Linear* layer) { return layer->project(in); };
  auto project_in = [](const Tensor& in, const Linear* layer) {
    return layer->bias().defined() ? layer->project(in)
                                   : autocast_bf16_product(in, layer->weight());
  };
  return swiglu_ffn(in, &gate_proj, &up_proj, &down_proj, {"gate_proj", "up_proj", "down_proj"},
                    project_in, project, ops::swiglu);
}

}  // namespace reprise::nn
