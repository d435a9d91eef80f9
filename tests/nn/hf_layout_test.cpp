// nn/hf_layout: GPT-OSS's fused expert tensors hold each expert's
// projections where transformers puts them, pack and unpack are inverse,
// and a layer that cannot be fused is an error naming it.
#include "nn/hf_layout.h"

#include <gtest/gtest.h>

#include "engine/grad_mode.h"
#include "nn/hf.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"

namespace reprise::nn {
namespace {

using testing::expect_error;

// The GPT-OSS golden folder: 2 layers of 4 experts, C = 32, F = 16.
std::unique_ptr<LlamaForCausalLM> gpt_oss() {
  return load_model(testing::fixture_path("families/gpt_oss"));
}

const HfTensor& find(const std::vector<HfTensor>& layout, const std::string& name) {
  for (const HfTensor& t : layout) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

TEST(HfLayout, FusedExpertsHoldEachProjectionWhereTransformersPutsIt) {
  auto model = gpt_oss();
  const std::vector<HfTensor> layout = hf_layout(model->named_state(), model->config());
  const std::string p = "model.layers.1.mlp.experts.";
  const HfTensor& gate_up = find(layout, p + "gate_up_proj");
  const HfTensor& gate_up_bias = find(layout, p + "gate_up_proj_bias");
  const HfTensor& down = find(layout, p + "down_proj");
  const HfTensor& down_bias = find(layout, p + "down_proj_bias");
  EXPECT_EQ(gate_up.shape, (Shape{4, 32, 32}));
  EXPECT_EQ(gate_up_bias.shape, (Shape{4, 32}));
  EXPECT_EQ(down.shape, (Shape{4, 16, 32}));
  EXPECT_EQ(down_bias.shape, (Shape{4, 32}));

  const auto& expert = model->model.layers[1].moe->experts[2];
  const int64_t e = 2, f = 5, c = 7, C = 32, F = 16;
  auto at = [](const Tensor& t, std::initializer_list<int64_t> index) {
    Tensor v = t.detach();
    for (int64_t i : index) v = v.select(0, i);
    return v.item<float>();
  };
  const Tensor gu = pack(gate_up), gub = pack(gate_up_bias), d = pack(down), db = pack(down_bias);
  EXPECT_EQ(at(gu, {e, c, 2 * f}), at(expert.gate_proj.weight(), {f, c}));
  EXPECT_EQ(at(gu, {e, c, 2 * f + 1}), at(expert.up_proj.weight(), {f, c}));
  EXPECT_EQ(at(gub, {e, 2 * f}), at(expert.gate_proj.bias(), {f}));
  EXPECT_EQ(at(gub, {e, 2 * f + 1}), at(expert.up_proj.bias(), {f}));
  EXPECT_EQ(at(d, {e, f, c}), at(expert.down_proj.weight(), {c, f}));
  EXPECT_EQ(at(db, {e, c}), at(expert.down_proj.bias(), {c}));
  EXPECT_EQ(gu.numel(), 4 * C * 2 * F);
}

TEST(HfLayout, UnpackIsPacksInverse) {
  auto model = gpt_oss();
  const std::vector<HfTensor> layout = hf_layout(model->named_state(), model->config());
  size_t fused = 0;
  for (const HfTensor& t : layout) {
    if (t.packing == HfPacking::plain) continue;
    ++fused;
    SCOPED_TRACE(t.name);
    const Tensor values = pack(t);
    {
      NoGradGuard no_grad;
      for (const Tensor& part : t.parts) Tensor(part).fill_(0.0);
    }
    unpack(t, values);
    EXPECT_EQ(pack(t).to_vector<float>(), values.to_vector<float>());
  }
  EXPECT_EQ(fused, 8u);  // 4 per layer
}

TEST(HfLayout, ALayerThatCannotBeFusedIsAnErrorNamingIt) {
  auto model = gpt_oss();
  std::vector<std::pair<std::string, Tensor>> state = model->named_state();
  auto without = [&](const std::string& name) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& entry : state) {
      if (entry.first != name) out.push_back(entry);
    }
    return out;
  };
  expect_error(
      [&] { hf_layout(without("model.layers.0.mlp.experts.1.up_proj.weight"), model->config()); },
      {"expert 'model.layers.0.mlp.experts.1' lacks a projection weight"});
  expect_error(
      [&] { hf_layout(without("model.layers.0.mlp.experts.3.down_proj.bias"), model->config()); },
      {"expert 'model.layers.0.mlp.experts.3' has biases on some projections only"});
  std::vector<std::pair<std::string, Tensor>> from_one;
  for (const auto& entry : state) {
    if (entry.first.find("mlp.experts.0.") == std::string::npos) from_one.push_back(entry);
  }
  expect_error([&] { hf_layout(from_one, model->config()); },
               {"'model.layers.0.mlp.experts.' holds experts 1..3",
                "a fused checkpoint needs every expert of the layer, 0..2"});
}

TEST(HfLayout, AFusedTensorOfTheWrongShapeIsAnErrorNamingIt) {
  auto model = gpt_oss();
  const std::vector<HfTensor> layout = hf_layout(model->named_state(), model->config());
  const HfTensor& down = find(layout, "model.layers.0.mlp.experts.down_proj");
  expect_error(
      [&] {
        unpack(down, Tensor::zeros({4, 32, 16}, DType::f32));
      },
      {"unpack: 'model.layers.0.mlp.experts.down_proj'", "shape [4, 16, 32]"});
}

}  // namespace
}  // namespace reprise::nn
