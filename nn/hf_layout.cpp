#include "nn/hf_layout.h"

#include <map>
#include <set>

#include "base/error.h"
#include "engine/grad_mode.h"
#include "nn/moe.h"

namespace reprise::nn {
namespace {

// One expert's six projection tensors; undefined where absent.
struct ExpertTensors {
  Tensor gate, up, down, gate_bias, up_bias, down_bias;
};

// The experts of one fused layer, by index.
using FusedLayer = std::map<int64_t, ExpertTensors>;

// The slot of `rest` ("gate_proj.weight", "down_proj.bias", ...) among an
// expert's tensors, under the family's projection names.
Tensor& slot_of(ExpertTensors& x, const std::string& rest, const ExpertNames& n,
                const std::string& name) {
  const std::pair<std::string, Tensor*> slots[] = {
      {std::string(n.gate) + ".weight", &x.gate}, {std::string(n.up) + ".weight", &x.up},
      {std::string(n.down) + ".weight", &x.down}, {std::string(n.gate) + ".bias", &x.gate_bias},
      {std::string(n.up) + ".bias", &x.up_bias},  {std::string(n.down) + ".bias", &x.down_bias},
  };
  for (const auto& [suffix, slot] : slots) {
    if (rest == suffix) return *slot;
  }
  REPRISE_FAIL("hf_layout: '", name, "' is no expert projection the checkpoint fuses (expected ",
               n.gate, ", ", n.up, " or ", n.down, " .weight or .bias)");
}

// The fused tensors of one layer's experts, under `prefix` ("...experts.").
void emit_fused(const std::string& prefix, const FusedLayer& layer, std::vector<HfTensor>& out) {
  const int64_t E = int64_t(layer.size());
  REPRISE_CHECK(layer.begin()->first == 0 && layer.rbegin()->first == E - 1, "hf_layout: '", prefix,
                "' holds experts ", layer.begin()->first, "..", layer.rbegin()->first,
                "; a fused checkpoint needs every expert of the layer, 0..", E - 1);
  const bool biased = layer.begin()->second.gate_bias.defined();
  HfTensor gate_up{prefix + "gate_up_proj", {}, HfPacking::gate_up, {}};
  HfTensor gate_up_bias{prefix + "gate_up_proj_bias", {}, HfPacking::gate_up_bias, {}};
  HfTensor down{prefix + "down_proj", {}, HfPacking::down, {}};
  HfTensor down_bias{prefix + "down_proj_bias", {}, HfPacking::down_bias, {}};
  for (const auto& [e, x] : layer) {
    const std::string which = prefix + std::to_string(e);
    REPRISE_CHECK(x.gate.defined() && x.up.defined() && x.down.defined(), "hf_layout: expert '",
                  which, "' lacks a projection weight");
    REPRISE_CHECK(x.gate_bias.defined() == biased && x.up_bias.defined() == biased &&
                      x.down_bias.defined() == biased,
                  "hf_layout: expert '", which, "' has biases on some projections only, or unlike ",
                  "expert 0");
    gate_up.parts.insert(gate_up.parts.end(), {x.gate, x.up});
    down.parts.push_back(x.down);
    if (!biased) continue;
    gate_up_bias.parts.insert(gate_up_bias.parts.end(), {x.gate_bias, x.up_bias});
    down_bias.parts.push_back(x.down_bias);
  }
  const Shape& g = gate_up.parts[0].shape();  // (F, C)
  const Shape& d = down.parts[0].shape();     // (C, F)
  gate_up.shape = {E, g[1], 2 * g[0]};
  down.shape = {E, d[1], d[0]};
  out.push_back(std::move(gate_up));
  if (biased) {
    gate_up_bias.shape = {E, 2 * g[0]};
    out.push_back(std::move(gate_up_bias));
  }
  out.push_back(std::move(down));
  if (biased) {
    down_bias.shape = {E, d[0]};
    out.push_back(std::move(down_bias));
  }
}

// Calls f(at, part, in) for every element of the fused tensor t: element
// `at` (row-major in t.shape) is element `in` (row-major) of t.parts[part].
template <class Visit>
void for_each_element(const HfTensor& t, Visit&& f) {
  const Shape& s = t.shape;
  switch (t.packing) {
    case HfPacking::plain:
      break;
    case HfPacking::gate_up: {  // (E, C, 2F) <- (F, C) pairs
      const int64_t E = s[0], C = s[1], F = s[2] / 2;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t f2 = 0; f2 < 2 * F; ++f2)
            f((e * C + c) * 2 * F + f2, size_t(2 * e + f2 % 2), (f2 / 2) * C + c);
      break;
    }
    case HfPacking::gate_up_bias: {  // (E, 2F) <- (F) pairs
      const int64_t E = s[0], F = s[1] / 2;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t f2 = 0; f2 < 2 * F; ++f2) f(e * 2 * F + f2, size_t(2 * e + f2 % 2), f2 / 2);
      break;
    }
    case HfPacking::down: {  // (E, F, C) <- (C, F)
      const int64_t E = s[0], F = s[1], C = s[2];
      for (int64_t e = 0; e < E; ++e)
        for (int64_t fi = 0; fi < F; ++fi)
          for (int64_t c = 0; c < C; ++c) f((e * F + fi) * C + c, size_t(e), c * F + fi);
      break;
    }
    case HfPacking::down_bias: {  // (E, C) <- (C)
      const int64_t E = s[0], C = s[1];
      for (int64_t e = 0; e < E; ++e)
        for (int64_t c = 0; c < C; ++c) f(e * C + c, size_t(e), c);
      break;
    }
  }
}

}  // namespace

std::vector<HfTensor> hf_layout(const std::vector<std::pair<std::string, Tensor>>& named,
                                const LlamaConfig& config) {
  std::vector<HfTensor> out;
  const ExpertNames& names = config.info().names;
  if (!names.fused) {
    for (const auto& [name, t] : named) out.push_back({name, t.shape(), HfPacking::plain, {t}});
    return out;
  }
  // "model.layers.0.mlp.experts.3.gate_proj.weight": layer prefix
  // "model.layers.0.mlp.experts.", expert 3, rest "gate_proj.weight".
  std::map<std::string, FusedLayer> layers;
  for (const auto& [name, t] : named) {
    const std::string expert = expert_of(name);
    if (expert.empty()) continue;
    const size_t dot = expert.rfind('.', expert.size() - 2);
    const std::string prefix = expert.substr(0, dot + 1);
    const int64_t e = std::stoll(expert.substr(dot + 1));
    Tensor& slot = slot_of(layers[prefix][e], name.substr(expert.size()), names, name);
    REPRISE_CHECK(!slot.defined(), "hf_layout: '", name, "' is listed twice");
    slot = t;
  }
  std::set<std::string> emitted;
  for (const auto& [name, t] : named) {
    const std::string expert = expert_of(name);
    if (expert.empty()) {
      out.push_back({name, t.shape(), HfPacking::plain, {t}});
      continue;
    }
    const std::string prefix = expert.substr(0, expert.rfind('.', expert.size() - 2) + 1);
    if (emitted.insert(prefix).second) emit_fused(prefix, layers.at(prefix), out);
  }
  return out;
}

Tensor pack(const HfTensor& t) {
  if (t.packing == HfPacking::plain) return t.parts.at(0);
  std::vector<std::vector<float>> parts;
  for (const Tensor& p : t.parts) parts.push_back(p.detach().to(DType::f32).to_vector<float>());
  Tensor out = Tensor::empty(t.shape, DType::f32);
  float* o = out.data<float>();
  for_each_element(t,
                   [&](int64_t at, size_t part, int64_t in) { o[at] = parts[part][size_t(in)]; });
  return out;
}

void unpack(const HfTensor& t, const Tensor& values) {
  REPRISE_CHECK(t.packing != HfPacking::plain && values.shape() == t.shape &&
                    values.dtype() == DType::f32 && values.device().is_cpu() &&
                    values.is_contiguous(),
                "unpack: '", t.name, "' is not fused, or expects contiguous f32 values of shape ",
                to_string(t.shape), " on the CPU, got ", values.describe());
  NoGradGuard no_grad;
  std::vector<std::vector<float>> parts;
  for (const Tensor& p : t.parts) parts.emplace_back(size_t(p.numel()));
  const float* v = values.data<float>();
  for_each_element(t,
                   [&](int64_t at, size_t part, int64_t in) { parts[part][size_t(in)] = v[at]; });
  for (size_t i = 0; i < parts.size(); ++i) {
    Tensor dst = t.parts[i];
    dst.copy_(Tensor::from_vector(parts[i], dst.shape()));
  }
}

}  // namespace reprise::nn
