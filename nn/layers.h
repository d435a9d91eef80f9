#pragma once
// The basic layers of a Llama: Linear, Embedding and RMSNorm. Each owns a
// parameter named "weight" (and a Linear with a bias one named "bias"),
// with PyTorch's layout, and runs its forward under Scope(name()).
//
// B = batch, T = sequence, C = in features / channels, N = out features,
// V = vocabulary.

#include <cstdint>
#include <optional>
#include <string>

#include "autograd/scope.h"
#include "nn/family.h"
#include "nn/module.h"
#include "ops/swiglu.h"
#include "rng/generator.h"

namespace reprise::nn {

// y = x @ weight^T (+ bias), weight (N, C) as torch.nn.Linear(C, N, bias).
// The product runs under autocast (nn/autocast.h); the bias is added after
// it in the weight's dtype, and is not weight-decayed by default.
class Linear : public Module {
 public:
  Linear(std::string name, int64_t in_features, int64_t out_features, bool bias = false);

  // x: (..., C) -> (..., N)
  Tensor forward(const Tensor& x) const;
  // forward() in the caller's scope (for a caller that names the scope).
  Tensor project(const Tensor& x) const;
  // forward() left in autocast's 16-bit dtype, as torch.autocast leaves a
  // product for the ops after it (autocast_product); a layer with a bias
  // raises an Error (its sum is widened, forward()).
  Tensor forward_16bit(const Tensor& x) const;
  // The weight normal(0, std^2) from `stream` of `gen`, the bias zero, as
  // HF's _init_weights.
  void reset_parameters(double std, rng::Generator& gen, std::string_view stream = "init");

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // (N), undefined without a bias
  int64_t in_features() const { return weight_.size(1); }
  int64_t out_features() const { return weight_.size(0); }

 private:
  Tensor weight_;  // (N, C)
  Tensor bias_;    // (N)
};

// out[..., :] = weight[ids[...], :], weight (V, C). Not weight-decayed by
// default.
class Embedding : public Module {
 public:
  // padding_idx (torch's, HF's pad_token_id): a row that starts at 0 and
  // gets no gradient.
  Embedding(std::string name, int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);

  // ids: (...) i64 in [0, V) -> (..., C)
  Tensor forward(const Tensor& ids) const;
  void reset_parameters(double std, rng::Generator& gen, std::string_view stream = "init");

  const Tensor& weight() const { return weight_; }
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

 private:
  Tensor weight_;  // (V, C)
  std::optional<int64_t> padding_idx_;
};

// y = weight * x * rsqrt(mean(x^2, -1) + eps), as HF LlamaRMSNorm; weight
// (C) starts at ones and is not weight-decayed by default.
class RMSNorm : public Module {
 public:
  // unit_offset: scale by 1 + weight, the weight starting at 0 (Gemma's).
  RMSNorm(std::string name, int64_t dim, double eps, bool unit_offset = false);

  // x: (..., C) -> (..., C)
  Tensor forward(const Tensor& x) const;
  void reset_parameters();  // ones, or zeros with unit_offset

  const Tensor& weight() const { return weight_; }
  double eps() const { return eps_; }

 private:
  Tensor weight_;  // (C)
  double eps_;
  bool unit_offset_;
};

// down_proj(act(gate_proj(x)) * up_proj(x)), act SiLU (Llama's MLP,
// LlamaMLP in Hugging Face, with its biases when mlp_bias; the shared
// experts of an MoE layer) or GELU-tanh (Gemma's), with their names.
class GatedMLP : public Module {
 public:
  GatedMLP(std::string name, int64_t hidden_size, int64_t intermediate_size, bool bias = false,
           MlpActivation activation = MlpActivation::silu);
  // x: (..., C) -> (..., C)
  Tensor forward(const Tensor& x) const;

  Linear gate_proj, up_proj, down_proj;  // (F, C), (F, C), (C, F)

 private:
  MlpActivation activation_;
};

// The SwiGLU feed-forward, down(act(gate(x), up(x))), written once for
// GatedMLP and an MoE layer's experts, routed or shared: act is
// ops::swiglu (silu(gate) * up) or GPT-OSS's clamped form;
// project_in(x, w) is the projection by the weights `gate` and `up` (which
// may leave the product 16-bit for act, as torch.autocast does) and
// project_out(x, w) the one by `down` (a linear, or a grouped product over
// the experts' blocks of rows, with their biases where they have them),
// each recorded under its weight's name (HF's gate_proj, up_proj,
// down_proj; Mixtral's w1, w3, w2).
struct SwiGluNames {
  const char* gate;
  const char* up;
  const char* down;
};
template <class Weights, class ProjectIn, class ProjectOut, class Activation>
Tensor swiglu_ffn(const Tensor& x, const Weights& gate, const Weights& up, const Weights& down,
                  const SwiGluNames& names, const ProjectIn& project_in,
                  const ProjectOut& project_out, const Activation& act) {
  auto projected = [](const char* name, const auto& project, const Tensor& in, const Weights& w) {
    autograd::Scope scope(name);
    return project(in, w);
  };
  const Tensor g = projected(names.gate, project_in, x, gate);
  const Tensor u = projected(names.up, project_in, x, up);
  return projected(names.down, project_out, act(g, u), down);
}

}  // namespace reprise::nn
