#pragma once
// How a family's checkpoints lay out a model's tensors. Most families hold
// the model's own: one tensor per parameter or buffer, under its name.
// GPT-OSS's checkpoints fuse each MoE layer's experts (ExpertNames::fused),
// with <p> = "model.layers.{i}.mlp.experts.":
//
//   <p>gate_up_proj       (E, C, 2F)  [e, c, 2f] = expert e's gate_proj.weight [f, c],
//                                     [e, c, 2f + 1] = its up_proj.weight [f, c]
//   <p>gate_up_proj_bias  (E, 2F)     [e, 2f] = gate_proj.bias [f], [e, 2f + 1] = up_proj.bias [f]
//   <p>down_proj          (E, F, C)   [e, f, c] = down_proj.weight [c, f]
//   <p>down_proj_bias     (E, C)      [e] = down_proj.bias
//
// while reprise's modules keep <p>{e}.gate_proj, up_proj and down_proj, one
// Linear each (nn/moe.h), so that expert parallelism, sharded optimizers
// and checkpoint policies see one expert's tensors as any other family's.
// nn/hf.h reads and writes folders through this layout.
//
// E = experts, C = hidden_size, F = the experts' intermediate size.

#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "nn/model_config.h"

namespace reprise::nn {

// How a checkpoint tensor holds its parts.
enum class HfPacking : uint8_t {
  plain,         // the one part itself
  gate_up,       // (E, C, 2F) from parts gate_0, up_0, gate_1, up_1, ... each (F, C)
  gate_up_bias,  // (E, 2F) from parts gate_0, up_0, ... each (F)
  down,          // (E, F, C) from parts down_0, down_1, ... each (C, F)
  down_bias,     // (E, C) from parts down_0, ... each (C)
};

// One tensor of a checkpoint and the model tensors it holds.
struct HfTensor {
  std::string name;  // as the checkpoint names it
  Shape shape;       // as the checkpoint holds it
  HfPacking packing = HfPacking::plain;
  std::vector<Tensor> parts;  // the model's tensors (handles: unpack writes into them)
};

// The tensors `named` (a model's named_state(), or its gradients under the
// same names) as the checkpoints of `config`'s family hold them, in
// `named`'s order (a layer's fused experts where its first expert tensor
// was). Raises when a fused layer's experts are not 0 .. E - 1 with all
// six projection tensors each.
std::vector<HfTensor> hf_layout(const std::vector<std::pair<std::string, Tensor>>& named,
                                const LlamaConfig& config);

// The checkpoint tensor's values, f32 on the host (plain: the part itself,
// on its device, in its dtype).
Tensor pack(const HfTensor& t);
// Writes a fused checkpoint tensor's values `values` (t.shape, f32 on the
// host) into t's parts, without recording.
void unpack(const HfTensor& t, const Tensor& values);

}  // namespace reprise::nn
