#include "nn/layers.h"

#include "autograd/scope.h"
#include "nn/autocast.h"
#include "ops/embedding.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/swiglu.h"

namespace reprise::nn {
namespace {

void check_positive(const char* layer, const std::string& name, const char* what, int64_t v) {
  REPRISE_CHECK(v > 0, layer, " '", name, "': ", what, " must be positive, got ", v);
}

}  // namespace

// ---- Linear -----------------------------------------------------------------

Linear::Linear(std::string name, int64_t in_features, int64_t out_features)
    : Module(std::move(name)) {
  check_positive("Linear", this->name(), "in_features", in_features);
  check_positive("Linear", this->name(), "out_features", out_features);
  weight_ = register_parameter("weight", {out_features, in_features});
}

Tensor Linear::forward(const Tensor& x) const {
  autograd::Scope scope(name());
  return autocast_linear(x, weight_);
}

void Linear::reset_parameters(double std, rng::Generator& gen, std::string_view stream) {
  ops::normal_(weight_, 0.0, std, gen, stream);
}

// ---- Embedding --------------------------------------------------------------

Embedding::Embedding(std::string name, int64_t num_embeddings, int64_t embedding_dim)
    : Module(std::move(name)) {
  check_positive("Embedding", this->name(), "num_embeddings", num_embeddings);
  check_positive("Embedding", this->name(), "embedding_dim", embedding_dim);
  weight_ = register_parameter("weight", {num_embeddings, embedding_dim}, /*decay=*/false);
}

Tensor Embedding::forward(const Tensor& ids) const {
  autograd::Scope scope(name());
  return ops::embedding(weight_, ids);
}

void Embedding::reset_parameters(double std, rng::Generator& gen, std::string_view stream) {
  ops::normal_(weight_, 0.0, std, gen, stream);
}

// ---- RMSNorm ----------------------------------------------------------------

RMSNorm::RMSNorm(std::string name, int64_t dim, double eps) : Module(std::move(name)), eps_(eps) {
  check_positive("RMSNorm", this->name(), "dim", dim);
  REPRISE_CHECK(eps > 0, "RMSNorm '", this->name(), "': eps must be positive, got ", eps);
  weight_ = register_parameter("weight", {dim}, /*decay=*/false);
  reset_parameters();
}

Tensor RMSNorm::forward(const Tensor& x) const {
  autograd::Scope scope(name());
  return ops::rmsnorm(x, weight_, eps_);
}

void RMSNorm::reset_parameters() {
  NoGradGuard no_grad;
  weight_.fill_(1.0);
}

// ---- SwiGluMLP --------------------------------------------------------------

SwiGluMLP::SwiGluMLP(std::string name, int64_t hidden_size, int64_t intermediate_size)
    : Module(std::move(name)),
      gate_proj("gate_proj", hidden_size, intermediate_size),
      up_proj("up_proj", hidden_size, intermediate_size),
      down_proj("down_proj", intermediate_size, hidden_size) {
  register_module(gate_proj);
  register_module(up_proj);
  register_module(down_proj);
}

Tensor SwiGluMLP::forward(const Tensor& x) const {
  autograd::Scope scope(name());
  return swiglu_ffn(autocast_operand(x), gate_proj.weight(), up_proj.weight(), down_proj.weight(),
                    {"gate_proj", "up_proj", "down_proj"}, autocast_linear);
}

}  // namespace reprise::nn
