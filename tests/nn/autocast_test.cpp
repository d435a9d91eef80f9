// Mixed precision (nn/autocast.h): the scope; a projection's numerics (the
// f32 product of the bf16-rounded operands, rounded once and widened);
// Llama and MoE models under bf16: f32 master weights and gradients, bf16
// saved activations, results within bf16's rounding of f32; checkpointed
// layers that replay bitwise under bf16 with dropout and a recomputed
// router; and a bf16 Trainer.
#include "nn/autocast.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>

#include "autograd/backward.h"
#include "autograd/verifier.h"
#include "engine/memory_stats.h"
#include "nn/checkpointing.h"
#include "nn/llama.h"
#include "ops/cast.h"
#include "ops/matmul.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tiny_train.h"
#include "tests/support/tokens.h"

namespace reprise::nn {
namespace {

using testing::same_bits;

LlamaConfig autocast_config(bool moe, double dropout) {
  LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 32;
  c.dropout = dropout;
  c.attention_dropout = dropout;
  if (moe) {
    c.family = Family::mixtral;
    c.moe = MoeConfig{};
    c.moe->num_local_experts = 4;
    c.moe->num_experts_per_tok = 2;
    c.moe->n_shared_experts = 1;
    c.moe->router_z_loss_coef = 1e-3;
  }
  return c;
}

TEST(Autocast, ScopesNestAndRestore) {
  EXPECT_EQ(autocast_dtype(), DType::f32);
  {
    const Autocast outer(DType::bf16);
    EXPECT_EQ(autocast_dtype(), DType::bf16);
    {
      const Autocast inner(DType::f32);
      EXPECT_EQ(autocast_dtype(), DType::f32);
    }
    EXPECT_EQ(autocast_dtype(), DType::bf16);
  }
  EXPECT_EQ(autocast_dtype(), DType::f32);
  testing::expect_error([] { const Autocast bad(DType::f64); }, {"Autocast", "f64"});
  testing::expect_error([] { const Autocast bad(DType::i32); }, {"Autocast", "i32"});
}

TEST(Autocast, AProjectionIsTheRoundedProductOfRoundedOperandsWidened) {
  const Tensor x = testing::uniform({3, 5, 24}, -2, 2, 1, DType::f32);
  const Tensor w = testing::uniform({10, 24}, -2, 2, 2, DType::f32);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  EXPECT_TRUE(same_bits(autocast_linear(x, w), ops::linear(x, w)));  // no scope: f32
  const Autocast bf16(DType::bf16);
  const Tensor y = autocast_linear(x, w);
  EXPECT_EQ(y.dtype(), DType::f32);
  const Tensor expected =
      ops::cast(ops::linear(ops::cast(x, DType::bf16), ops::cast(w, DType::bf16)), DType::f32);
  EXPECT_TRUE(same_bits(y, expected));
  EXPECT_FALSE(same_bits(y, ops::linear(x, w)));
  // Already 16-bit operands and integers pass through uncast.
  const Tensor x16 = autocast_operand(x);
  EXPECT_EQ(x16.dtype(), DType::bf16);
  EXPECT_TRUE(same_bits(autocast_operand(x16), x16));
  EXPECT_TRUE(same_bits(autocast_linear(x16, w), expected));
  EXPECT_EQ(autocast_operand(ids).dtype(), DType::i64);
}

// One forward and backward of a model; the loss, the gradients and the
// peak bytes of saved activations.
struct Step {
  double loss = 0;
  std::vector<Tensor> grads;
  int64_t peak_saved = 0;
};

Step run_step(LlamaForCausalLM& model, const Tensor& ids, DType dtype,
              const LlamaForCausalLM::LayerRunner& run = nullptr, DType attention = DType::f32) {
  model.zero_grad();
  memory_stats::reset_peaks();
  const int64_t base = memory_stats::snapshot()[MemoryKind::saved_activation].live;
  Tensor loss;
  {
    const Autocast precision(dtype, attention);
    loss = model.causal_lm_loss(model.forward(ids, run), ids);
  }
  Step s;
  s.peak_saved = memory_stats::snapshot()[MemoryKind::saved_activation].peak - base;
  autograd::backward(loss);
  s.loss = double(loss.item<float>());
  for (const NamedParameter& p : model.parameters()) s.grads.push_back(p.value.grad().clone());
  return s;
}

// ||a - b|| / ||b|| over all gradients.
double relative_error(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].to_vector<float>(), y = b[i].to_vector<float>();
    for (size_t j = 0; j < x.size(); ++j) {
      num += (double(x[j]) - y[j]) * (double(x[j]) - y[j]);
      den += double(y[j]) * y[j];
    }
  }
  return std::sqrt(num / den);
}

class AutocastModel : public ::testing::TestWithParam<bool> {};

// bf16 keeps f32 parameters and gradients, saves fewer bytes, and lands
// within bf16's rounding of the f32 result. The tolerances: each product
// rounds its operands and result to 8 significant bits (relative error up
// to 2^-9 = 0.2% each). Those errors are independent across elements, so
// they mostly cancel in the loss, a mean over 256 tokens (measured: 7e-6
// relative; bound 2e-4), and leave the gradients about 0.4% off in L2
// (bound 2%).
TEST_P(AutocastModel, Bf16StaysNearF32WithF32MastersAndFewerSavedBytes) {
  rng::Generator gen(3);
  LlamaForCausalLM model(autocast_config(GetParam(), 0.0), gen);
  // 256 tokens of width 32: activations outweigh the bf16 weight copies
  // that each forward also saves, as in any real batch.
  const Tensor ids = testing::random_token_ids(8, 32, 64, 4);
  const Step f32 = run_step(model, ids, DType::f32);
  const Step bf16 = run_step(model, ids, DType::bf16);
  for (const NamedParameter& p : model.parameters()) {
    EXPECT_EQ(p.value.dtype(), DType::f32) << p.name;
    EXPECT_EQ(p.value.grad().dtype(), DType::f32) << p.name;
  }
  EXPECT_NE(bf16.loss, f32.loss);
  EXPECT_LT(std::abs(bf16.loss - f32.loss), 2e-4 * f32.loss);
  const double err = relative_error(bf16.grads, f32.grads);
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 2e-2);
  EXPECT_LT(bf16.peak_saved, f32.peak_saved);
  // Deterministic: the same step again gives the same bits.
  const Step again = run_step(model, ids, DType::bf16);
  EXPECT_EQ(again.loss, bf16.loss);
  for (size_t i = 0; i < again.grads.size(); ++i)
    EXPECT_TRUE(same_bits(again.grads[i], bf16.grads[i]));
}

// Checkpointed layers under bf16, with dropout, replay the recorded casts
// and products bit for bit, with attention in f32 or in bf16: every
// policy's gradients equal no checkpointing's, and the bitwise verifier
// (which compares every replayed value, the MoE router's decisions
// included, with the router recomputed) finds nothing.
TEST_P(AutocastModel, CheckpointedLayersReplayBitwiseUnderBf16) {
  const bool moe = GetParam();
  rng::Generator init(5);
  LlamaForCausalLM model(autocast_config(moe, 0.1), init);
  const auto gen = std::make_shared<rng::Generator>(42);
  model.set_dropout_generator(gen);
  const rng::GeneratorState start = gen->state();
  const Tensor ids = testing::random_token_ids(2, 16, 64, 6);
  for (const DType attention : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(attention));
    gen->set_state(start);
    const Step plain = run_step(model, ids, DType::bf16, nullptr, attention);
    for (const char* spec : {"full", "op-sac"}) {
      SCOPED_TRACE(spec);
      CheckpointConfig config = CheckpointConfig::parse(spec);
      config.verify = autograd::Verify::bitwise;
      config.save_router = false;
      LayerCheckpointing layers(config, gen, moe_scopes_of(model.config()));
      gen->set_state(start);
      const Step replayed = run_step(model, ids, DType::bf16, layers.runner(), attention);
      EXPECT_EQ(replayed.loss, plain.loss);
      for (size_t i = 0; i < plain.grads.size(); ++i) {
        EXPECT_TRUE(same_bits(replayed.grads[i], plain.grads[i])) << model.parameters()[i].name;
      }
      EXPECT_LT(replayed.peak_saved, plain.peak_saved);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, AutocastModel, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "moe" : "llama"; });

// Under bf16 autocast with bf16 attention, q, k and v stay bf16 from their
// products through RoPE to attention (and the logits stay bf16 into the
// loss). That gives the bits of the path that widens each product and
// rounds it again, which a layer with (zero) q/k/v biases still takes: the
// loss and every gradient are equal bit for bit.
TEST(Autocast, Bf16QkvAndLogitsGiveTheWidenedPathsBits) {
  rng::Generator gen(7);
  LlamaConfig kept = autocast_config(false, 0.0), widened = kept;
  widened.qkv_bias = widened.o_bias = true;  // Llama's attention_bias
  LlamaForCausalLM a(kept, gen), b(widened, gen);
  {
    NoGradGuard no_grad;
    for (const NamedParameter& p : b.parameters()) {
      Tensor value = p.value;
      if (p.name.ends_with("_proj.bias")) value.fill_(0.0);
      for (const NamedParameter& q : a.parameters()) {
        if (q.name == p.name) value.copy_(q.value);
      }
    }
  }
  const Tensor ids = testing::random_token_ids(4, 16, 64, 8);
  {
    const Autocast precision(DType::bf16, DType::bf16);
    EXPECT_EQ(a.forward(ids).logits.dtype(), DType::bf16);
  }
  const Step narrow = run_step(a, ids, DType::bf16, nullptr, DType::bf16);
  const Step wide = run_step(b, ids, DType::bf16, nullptr, DType::bf16);
  EXPECT_EQ(std::bit_cast<uint64_t>(narrow.loss), std::bit_cast<uint64_t>(wide.loss));
  size_t compared = 0;
  const std::vector<NamedParameter> pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    for (size_t j = 0; j < pb.size(); ++j) {
      if (pb[j].name != pa[i].name) continue;
      EXPECT_TRUE(same_bits(narrow.grads[i], wide.grads[j])) << pa[i].name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, pa.size());
}

// A bf16 Trainer learns like the f32 one, and two runs are bitwise alike.
TEST(Autocast, ATrainerInBf16LearnsAndRepeatsItself) {
  TrainConfig c = testing::tiny_train_config(/*hidden=*/32, /*intermediate=*/64, /*steps=*/12,
                                             /*batch=*/4, /*seq=*/32);
  auto losses = [&](DType dtype) {
    c.dtype = dtype;
    Trainer t(c, testing::builtin_corpus(20000));
    std::vector<float> out;
    for (int i = 0; i < 12; ++i) out.push_back(t.step().loss);
    for (const NamedParameter& p : t.model().parameters()) EXPECT_EQ(p.value.dtype(), DType::f32);
    return out;
  };
  const std::vector<float> f32 = losses(DType::f32), bf16 = losses(DType::bf16);
  EXPECT_EQ(losses(DType::bf16), bf16);
  EXPECT_NE(bf16, f32);
  EXPECT_LT(bf16.back(), 0.8f * bf16.front());
  EXPECT_LT(std::abs(bf16.back() - f32.back()), 0.05f * f32.back());
}

}  // namespace
}  // namespace reprise::nn
