// Fused attention: a naive f64 reference, PyTorch golden values (f32),
// thread-count independence, memory and bad input; sliding windows against
// the reference forward and backward, and their bits across capabilities,
// threads and KV-cache offsets. Its cases are in tests/cases/attention.cpp.
#include "ops/attention.h"

#include <cmath>
#include <cstring>

#include "autograd/backward.h"
#include "engine/memory_stats.h"
#include "engine/threads.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/views.h"
#include "rng/distributions.h"
#include "rng/generator.h"
#include "rng/philox.h"
#include "tests/cases/sdpa_cases.h"
#include "tests/support/capabilities.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using ops::AttentionOptions;

// The reference's mask and dropout: query i sees keys j <= i + offset
// (causal) and j > i + offset - window (window > 0); with dropout, weight
// (b, h, i, j) is kept by word ((b Hq + h) T + i) S + j of `words`.
struct NaiveMask {
  bool causal = false;
  int64_t offset = 0;
  int64_t window = 0;
  double dropout_p = 0;
  rng::Reservation words = {};
  std::vector<double> sinks = {};  // per query head: a key without a value; empty: none
};

// softmax(scale q k^T + mask) v by explicit loops in f64, scale 1/sqrt(D):
// {out}, and with dout defined also {dq, dk, dv} from the textbook rules
// (P the softmax, Z the dropout factors, O = (P Z) V): dV = (P Z)^T dO,
// dP = Z (dO V^T), dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale
// dS^T Q. With sinks, each row's softmax has its head's sink as one more
// logit, whose weight P_s multiplies no value: dsink = -P_s rowsum(P dP),
// summed over rows, returned after dv.
std::vector<Tensor> naive(const Tensor& q, const Tensor& k, const Tensor& v, const NaiveMask& m,
                          const Tensor& dout = {}) {
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), Dv = v.size(3);
  const double scale = 1 / std::sqrt(double(D));
  std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(),
                      vv = v.to_vector<double>(), out(size_t(B * Hq * T * Dv));
  std::vector<double> go = dout.defined() ? dout.to_vector<double>() : std::vector<double>();
  std::vector<double> dq(qv.size()), dk(kv.size()), dv(vv.size()), dsink(m.sinks.size());
  std::vector<double> p(static_cast<size_t>(S)), z(p), dp(p);
  auto qi = [&](int64_t b, int64_t h, int64_t i, int64_t c) {
    return size_t(((b * Hq + h) * T + i) * D + c);
  };
  auto ki = [&](int64_t b, int64_t g, int64_t j, int64_t c) {
    return size_t(((b * Hkv + g) * S + j) * D + c);
  };
  auto vi = [&](int64_t b, int64_t g, int64_t j, int64_t c) {
    return size_t(((b * Hkv + g) * S + j) * Dv + c);
  };
  auto oi = [&](int64_t b, int64_t h, int64_t i, int64_t c) {
    return size_t(((b * Hq + h) * T + i) * Dv + c);
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t i = 0; i < T; ++i) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t c = 0; c < D; ++c) s += qv[qi(b, h, i, c)] * kv[ki(b, g, j, c)];
          const bool seen =
              (!m.causal || j <= i + m.offset) && (m.window == 0 || j > i + m.offset - m.window);
          p[size_t(j)] = seen ? s * scale : -INFINITY;
          mx = std::max(mx, p[size_t(j)]);
        }
        const bool sink = !m.sinks.empty();
        if (sink) mx = std::max(mx, m.sinks[size_t(h)]);
        for (double& x : p) sum += (x = std::exp(x - mx));
        const double sink_weight = sink ? std::exp(m.sinks[size_t(h)] - mx) : 0.0;
        sum += sink_weight;
        for (double& x : p) x /= sum;
        for (int64_t j = 0; j < S; ++j) {
          const uint64_t word = m.words.offset + uint64_t(((b * Hq + h) * T + i) * S + j);
          const bool keep =
              m.dropout_p == 0 ||
              rng::bernoulli(rng::stream_word(m.words.seed, m.words.subsequence, word),
                             rng::bernoulli_threshold(1 - m.dropout_p));
          z[size_t(j)] = keep ? 1 / (1 - m.dropout_p) : 0.0;
        }
        for (int64_t c = 0; c < Dv; ++c) {
          double o = 0;
          for (int64_t j = 0; j < S; ++j) o += p[size_t(j)] * z[size_t(j)] * vv[vi(b, g, j, c)];
          out[oi(b, h, i, c)] = o;
        }
        if (go.empty()) continue;
        double pdp = 0;
        for (int64_t j = 0; j < S; ++j) {
          double x = 0;
          for (int64_t c = 0; c < Dv; ++c) {
            x += go[oi(b, h, i, c)] * vv[vi(b, g, j, c)];
            dv[vi(b, g, j, c)] += p[size_t(j)] * z[size_t(j)] * go[oi(b, h, i, c)];
          }
          dp[size_t(j)] = z[size_t(j)] * x;
          pdp += p[size_t(j)] * dp[size_t(j)];
        }
        if (sink) dsink[size_t(h)] -= sink_weight / sum * pdp;
        for (int64_t j = 0; j < S; ++j) {
          const double ds = p[size_t(j)] * (dp[size_t(j)] - pdp) * scale;
          for (int64_t c = 0; c < D; ++c) {
            dq[qi(b, h, i, c)] += ds * kv[ki(b, g, j, c)];
            dk[ki(b, g, j, c)] += ds * qv[qi(b, h, i, c)];
          }
        }
      }
    }
  }
  std::vector<Tensor> r{Tensor::from_vector(out, {B, Hq, T, Dv})};
  if (go.empty()) return r;
  r.push_back(Tensor::from_vector(dq, q.shape()));
  r.push_back(Tensor::from_vector(dk, k.shape()));
  r.push_back(Tensor::from_vector(dv, v.shape()));
  if (!dsink.empty()) r.push_back(Tensor::from_vector(dsink, {Hq}));
  return r;
}

Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                       double dropout_p = 0, rng::Reservation words = {}, int64_t offset = 0) {
  return naive(q, k, v,
               {.causal = causal, .offset = offset, .dropout_p = dropout_p, .words = words})[0];
}

TEST(AttentionForward, MatchesNaiveReferenceInF64) {
  for (bool causal : {false, true}) {
    Tensor q = uniform({2, 4, 130, 6}, -2, 2, 61), k = uniform({2, 2, 75, 6}, -2, 2, 62),
           v = uniform({2, 2, 75, 7}, -2, 2, 63);
    Tensor out = ops::scaled_dot_product_attention(q, k, v, {.causal = causal});
    EXPECT_TRUE(all_close(out, naive_attention(q, k, v, causal), 1e-13, 1e-12)) << causal;
  }
}

// Offsets below, at and past S - T, over several key blocks.
TEST(AttentionForward, CausalOffsetMatchesNaiveReferenceInF64) {
  Tensor q = uniform({1, 4, 70, 6}, -2, 2, 61), k = uniform({1, 2, 140, 6}, -2, 2, 62),
         v = uniform({1, 2, 140, 7}, -2, 2, 63);
  for (int64_t offset : {0, 1, 63, 64, 70, 100}) {
    Tensor out =
        ops::scaled_dot_product_attention(q, k, v, {.causal = true, .causal_offset = offset});
    EXPECT_TRUE(all_close(out, naive_attention(q, k, v, true, 0, {}, offset), 1e-13, 1e-12))
        << offset;
  }
}

// A query row's output does not depend on the other rows of its call: the
// last rows of a causal call equal, bit for bit, a call with only those
// queries and the bottom-right offset (prefill, then a KV cache).
TEST(AttentionForward, QueriesWithAnOffsetGiveTheBitsOfTheFullCall) {
  const int64_t S = 150;
  Tensor q = uniform({1, 4, S, 16}, -2, 2, 64, DType::f32),
         k = uniform({1, 2, S, 16}, -2, 2, 65, DType::f32),
         v = uniform({1, 2, S, 16}, -2, 2, 66, DType::f32);
  const Tensor full = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  for (int64_t first : {int64_t(0), int64_t(1), int64_t(63), int64_t(64), int64_t(100), S - 1}) {
    const Tensor part = ops::scaled_dot_product_attention(q.slice(2, first, S), k, v,
                                                          {.causal = true, .causal_offset = first});
    EXPECT_EQ(part.to_vector<float>(), full.slice(2, first, S).contiguous().to_vector<float>())
        << first;
  }
}

TEST(AttentionDropout, ForwardMatchesNaiveReferenceWithTheDocumentedWords) {
  const Sizes z{2, 4, 2, 130, 75, 6, 7};
  for (bool causal : {false, true}) {
    Tensor q = uniform({2, 4, 130, 6}, -2, 2, 64), k = uniform({2, 2, 75, 6}, -2, 2, 65),
           v = uniform({2, 2, 75, 7}, -2, 2, 66);
    const AttentionOptions opt = dropout_options(0.25, z, causal);
    Tensor out = ops::scaled_dot_product_attention(q, k, v, opt);
    EXPECT_TRUE(
        all_close(out, naive_attention(q, k, v, causal, 0.25, *opt.dropout_rng), 1e-13, 1e-12))
        << causal;
  }
}

TEST(AttentionDropout, ReservationDeterminesTheOutputAndIsRecordedForReplay) {
  const Sizes z{1, 2, 1, 40, 40, 8, 8};
  Tensor q = param({1, 2, 40, 8}, 67), k = param({1, 1, 40, 8}, 68), v = param({1, 1, 40, 8}, 69);
  rng::Generator gen(77);
  const AttentionOptions opt{.dropout_p = 0.4, .generator = &gen};
  Tensor a = ops::scaled_dot_product_attention(q, k, v, opt);
  Tensor b = ops::scaled_dot_product_attention(q, k, v, opt);
  EXPECT_GT(max_abs_diff(a, b), 1e-3);  // new words, new mask
  const autograd::Node& node = *a.grad_fn();
  EXPECT_STREQ(node.name(), "sdpa_dropout");
  EXPECT_TRUE(node.op().is_random);
  ASSERT_TRUE(node.rng.has_value());
  EXPECT_EQ(node.rng->count, ops::sdpa_dropout_words(z.B, z.Hq, z.T, z.S));
  EXPECT_EQ(node.rng->subsequence, rng::Generator::subsequence_of("dropout"));
  // Replaying the recorded forward with its reservation gives the same bits,
  // and so does a call given that reservation explicitly.
  NoGradGuard no_grad;
  Tensor replay = node.forward({q, k, v}, &*node.rng)[0];
  EXPECT_EQ(a.to_vector<double>(), replay.to_vector<double>());
  Tensor again =
      ops::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.4, .dropout_rng = *node.rng});
  EXPECT_EQ(a.to_vector<double>(), again.to_vector<double>());
}

// f32 against torch (tests/fixtures/golden_attention.py). The kernel's exp
// is a polynomial (~1e-7 relative error) and it sums in another order than
// torch: the largest differences seen are 2.4e-6 on values near 5 (dv) and
// 6e-7 elsewhere, so atol = rtol = 5e-6 leaves a 10x margin.
TEST(AttentionGolden, ForwardAndBackwardMatchTorchInF32) {
  std::map<std::string, Tensor> g = load_golden("attention.safetensors");
  struct Case {
    const char* name;
    bool causal;
  };
  for (Case c : {Case{"gqa", false}, Case{"gqa_causal", true}, Case{"causal_t_lt_s", true},
                 Case{"causal_t_gt_s", true}, Case{"mha_d24", false}}) {
    SCOPED_TRACE(c.name);
    auto at = [&](const std::string& key) { return g.at(std::string(c.name) + "." + key); };
    Tensor q = at("q").clone().requires_grad(true), k = at("k").clone().requires_grad(true),
           v = at("v").clone().requires_grad(true);
    Tensor out = ops::scaled_dot_product_attention(q, k, v, {.causal = c.causal});
    EXPECT_TRUE(all_close(out, at("out"), 5e-6, 5e-6));
    autograd::Tensors grads = autograd::grad({out}, {q, k, v}, {at("dout")});
    EXPECT_TRUE(all_close(grads[0], at("dq"), 5e-6, 5e-6));
    EXPECT_TRUE(all_close(grads[1], at("dk"), 5e-6, 5e-6));
    EXPECT_TRUE(all_close(grads[2], at("dv"), 5e-6, 5e-6));
  }
}

std::vector<float> forward_backward_bits(int threads, Sizes z, bool causal, double dropout_p,
                                         int64_t offset, int64_t window = 0) {
  threads::set_num_threads(threads);
  Tensor q = uniform({z.B, z.Hq, z.T, z.D}, -2, 2, 71, DType::f32).requires_grad(true);
  Tensor k = uniform({z.B, z.Hkv, z.S, z.D}, -2, 2, 72, DType::f32).requires_grad(true);
  Tensor v = uniform({z.B, z.Hkv, z.S, z.Dv}, -2, 2, 73, DType::f32).requires_grad(true);
  Tensor dout = uniform({z.B, z.Hq, z.T, z.Dv}, -1, 1, 74, DType::f32);
  AttentionOptions opt{.causal = causal, .causal_offset = offset, .window = window};
  if (dropout_p > 0) opt = dropout_options(dropout_p, z, causal, offset, window);
  Tensor out = ops::scaled_dot_product_attention(q, k, v, opt);
  autograd::Tensors grads = autograd::grad({out}, {q, k, v}, {dout});
  std::vector<float> bits = out.to_vector<float>();
  for (const Tensor& t : grads) {
    std::vector<float> x = t.to_vector<float>();
    bits.insert(bits.end(), x.begin(), x.end());
  }
  return bits;
}

// B Hkv = 4 pairs run one backward task per pair at 1 and 2 threads; with
// B Hkv = 1 two threads switch backward to the key-block / query-block
// schedule, which must give the same bits as the one-task schedule.
TEST(AttentionDeterminism, OneAndTwoThreadsGiveTheSameBits) {
  const int saved = threads::num_threads();
  for (Sizes z : {Sizes{2, 4, 2, 150, 150, 16, 16}, Sizes{1, 3, 1, 150, 130, 16, 8}}) {
    for (bool causal : {false, true}) {
      for (double p : {0.0, 0.2}) {
        for (int64_t offset : {0, 70}) {
          if (offset > 0 && !causal) continue;
          std::vector<float> one = forward_backward_bits(1, z, causal, p, offset);
          std::vector<float> two = forward_backward_bits(2, z, causal, p, offset);
          ASSERT_EQ(one.size(), two.size());
          EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
              << "B Hkv " << z.B * z.Hkv << " causal " << causal << " p " << p << " offset "
              << offset;
        }
      }
    }
  }
  threads::set_num_threads(saved);
}

// Sliding windows of one key, less than a tile, about one and more than one,
// at top-left, KV-cache (S - T) and in-between offsets, more queries than
// keys, and a window as wide as everything (each row's whole causal range):
// forward and all three gradients against the f64 reference.
// Attention sinks: the head's sink is a softmax logit without a value
// (GPT-OSS's attention: softmax over the scores and the sink, the sink's
// column dropped). Forward and the four gradients against the reference,
// without a mask, causal, with a window and with dropout.
TEST(AttentionSinks, ForwardAndBackwardMatchNaiveReferenceInF64) {
  const Tensor q = uniform({2, 4, 9, 5}, -1, 1, 61), k = uniform({2, 2, 9, 5}, -1, 1, 62),
               v = uniform({2, 2, 9, 3}, -1, 1, 63), dout = uniform({2, 4, 9, 3}, -1, 1, 64);
  const std::vector<double> sinks{-1.5, 0.0, 0.7, 2.5};
  const rng::Reservation words{.seed = 5, .subsequence = 1, .offset = 0, .count = 1 << 12};
  const NaiveMask cases[] = {{},
                             {.causal = true},
                             {.causal = true, .window = 3},
                             {.causal = true, .dropout_p = 0.25, .words = words}};
  for (NaiveMask m : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "causal " << m.causal << " window " << m.window << " p " << m.dropout_p);
    m.sinks = sinks;
    const std::vector<Tensor> want = naive(q, k, v, m, dout);
    Tensor qg = q.clone().requires_grad(true), kg = k.clone().requires_grad(true),
           vg = v.clone().requires_grad(true),
           sg = Tensor::from_vector(sinks, {4}).requires_grad(true);
    AttentionOptions opt{.causal = m.causal, .window = m.window, .dropout_p = m.dropout_p};
    if (m.dropout_p > 0) opt.dropout_rng = words;
    opt.sinks = sg;
    const Tensor out = ops::scaled_dot_product_attention(qg, kg, vg, opt);
    autograd::backward(ops::sum(ops::mul(out, dout)));
    EXPECT_TRUE(all_close(out, want[0], 1e-13, 1e-12));
    EXPECT_TRUE(all_close(qg.grad(), want[1], 1e-13, 1e-12));
    EXPECT_TRUE(all_close(kg.grad(), want[2], 1e-13, 1e-12));
    EXPECT_TRUE(all_close(vg.grad(), want[3], 1e-13, 1e-12));
    EXPECT_TRUE(all_close(sg.grad(), want[4], 1e-13, 1e-12));
  }
}

TEST(AttentionSinks, BadSinksNameTheShapeAndDtype) {
  const Tensor q = uniform({1, 4, 3, 5}, -1, 1, 1, DType::f32),
               k = uniform({1, 2, 3, 5}, -1, 1, 2, DType::f32);
  expect_error(
      [&] {
        ops::scaled_dot_product_attention(q, k, k, {.sinks = Tensor::zeros({2}, DType::f32)});
      },
      {"scaled_dot_product_attention: expected sinks of shape (Hq) = (4), dtype f32 on cpu, got "
       "f32[2]"});
  expect_error(
      [&] {
        ops::scaled_dot_product_attention(q, k, k, {.sinks = Tensor::zeros({4}, DType::f64)});
      },
      {"dtype f32", "got f64[4]"});
}

TEST(AttentionWindow, ForwardAndBackwardMatchNaiveReferenceInF64) {
  struct Case {
    int64_t T, S, offset, window;
  };
  for (Case c :
       {Case{130, 130, 0, 1}, Case{130, 130, 0, 20}, Case{130, 130, 0, 64}, Case{130, 130, 0, 100},
        Case{130, 130, 0, 130}, Case{70, 140, 70, 30}, Case{67, 131, 64, 80}, Case{5, 140, 135, 66},
        Case{1, 200, 199, 17}, Case{90, 75, 0, 30}, Case{70, 140, 20, 45}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T << " S " << c.S << " offset " << c.offset
                                      << " window " << c.window);
    Tensor q = uniform({1, 4, c.T, 6}, -2, 2, 61).requires_grad(true);
    Tensor k = uniform({1, 2, c.S, 6}, -2, 2, 62).requires_grad(true);
    Tensor v = uniform({1, 2, c.S, 7}, -2, 2, 63).requires_grad(true);
    Tensor dout = uniform({1, 4, c.T, 7}, -1, 1, 64);
    Tensor out = ops::scaled_dot_product_attention(q, k, v, window_options(c.window, c.offset));
    autograd::Tensors grads = autograd::grad({out}, {q, k, v}, {dout});
    const std::vector<Tensor> want =
        naive(q, k, v, {.causal = true, .offset = c.offset, .window = c.window}, dout);
    EXPECT_TRUE(all_close(out, want[0], 1e-13, 1e-12));
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(grads[i], want[i + 1], 1e-12, 1e-11)) << i;
  }
}

TEST(AttentionWindow, DropoutMatchesNaiveReferenceForwardAndBackward) {
  const Sizes z{2, 4, 2, 130, 150, 6, 7};
  Tensor q = uniform({2, 4, 130, 6}, -2, 2, 64).requires_grad(true);
  Tensor k = uniform({2, 2, 150, 6}, -2, 2, 65).requires_grad(true);
  Tensor v = uniform({2, 2, 150, 7}, -2, 2, 66).requires_grad(true);
  Tensor dout = uniform({2, 4, 130, 7}, -1, 1, 67);
  const AttentionOptions opt = dropout_options(0.25, z, true, 20, 50);
  Tensor out = ops::scaled_dot_product_attention(q, k, v, opt);
  autograd::Tensors grads = autograd::grad({out}, {q, k, v}, {dout});
  const std::vector<Tensor> want = naive(
      q, k, v,
      {.causal = true, .offset = 20, .window = 50, .dropout_p = 0.25, .words = *opt.dropout_rng},
      dout);
  EXPECT_TRUE(all_close(out, want[0], 1e-13, 1e-12));
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(grads[i], want[i + 1], 1e-12, 1e-11)) << i;
}

// A window that holds every key of every row's causal range (W >= T +
// offset) is no window: the same bits forward and backward, with dropout too.
TEST(AttentionWindow, AWindowWiderThanEveryRowGivesTheBitsOfNoWindow) {
  const int saved = threads::num_threads();
  struct Case {
    Sizes z;
    int64_t offset;
    double p;
  };
  for (Case c :
       {Case{{1, 2, 1, 150, 150, 16, 16}, 0, 0.0}, Case{{1, 2, 1, 150, 150, 16, 16}, 0, 0.2},
        Case{{1, 2, 2, 5, 150, 16, 8}, 145, 0.0}, Case{{1, 2, 1, 70, 131, 8, 8}, 61, 0.0}}) {
    const std::vector<float> none = forward_backward_bits(2, c.z, true, c.p, c.offset);
    for (int64_t window : {c.z.T + c.offset, c.z.S, c.z.S + 100}) {
      const std::vector<float> wide = forward_backward_bits(2, c.z, true, c.p, c.offset, window);
      ASSERT_EQ(wide.size(), none.size());
      EXPECT_EQ(std::memcmp(wide.data(), none.data(), none.size() * sizeof(float)), 0)
          << "T " << c.z.T << " offset " << c.offset << " window " << window << " p " << c.p;
    }
    // One key fewer than that changes the last row.
    const std::vector<float> narrower =
        forward_backward_bits(2, c.z, true, c.p, c.offset, c.z.T + c.offset - 1);
    EXPECT_NE(std::memcmp(narrower.data(), none.data(), none.size() * sizeof(float)), 0);
  }
  threads::set_num_threads(saved);
}

// Windowed forward and backward bits at every CPU capability and 1, 2 and 3
// threads (B Hkv = 4: one backward task per kv head; B Hkv = 1: the key-block
// and query-block schedule at 2 and 3 threads).
TEST(AttentionWindow, TheSameBitsAtEveryCapabilityAndThreadCount) {
  const int saved = threads::num_threads();
  struct Case {
    Sizes z;
    int64_t offset, window;
    double p;
  };
  for (Case c :
       {Case{{2, 4, 2, 200, 200, 16, 16}, 0, 70, 0.0}, Case{{2, 4, 2, 200, 200, 16, 16}, 0, 1, 0.2},
        Case{{1, 3, 1, 150, 300, 16, 8}, 150, 100, 0.2},
        Case{{1, 3, 1, 200, 230, 8, 8}, 30, 40, 0.0}}) {
    std::vector<float> reference;
    for_each_capability([&](CpuCapability cap) {
      for (int threads : {1, 2, 3}) {
        const std::vector<float> got =
            forward_backward_bits(threads, c.z, true, c.p, c.offset, c.window);
        if (reference.empty()) {
          reference = got;
          continue;
        }
        ASSERT_EQ(got.size(), reference.size());
        EXPECT_EQ(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)), 0)
            << to_string(cap) << " threads " << threads << " window " << c.window << " offset "
            << c.offset << " p " << c.p;
      }
    });
  }
  threads::set_num_threads(saved);
}

// Decoding through a KV cache: queries [first, last) against keys [0, last)
// with offset first give, bit for bit, those rows of the full windowed call
// (so do single decode steps, last = first + 1), backward's dq rows too.
TEST(AttentionWindow, QueriesWithAnOffsetGiveTheBitsOfTheFullCall) {
  const int64_t S = 200;
  Tensor q = uniform({1, 4, S, 16}, -2, 2, 64, DType::f32),
         k = uniform({1, 2, S, 16}, -2, 2, 65, DType::f32),
         v = uniform({1, 2, S, 16}, -2, 2, 66, DType::f32);
  Tensor dout = uniform({1, 4, S, 16}, -1, 1, 67, DType::f32);
  for (int64_t window : {1, 20, 64, 100}) {
    const Tensor qf = q.clone().requires_grad(true);
    const Tensor full = ops::scaled_dot_product_attention(qf, k, v, window_options(window));
    const Tensor full_dq = autograd::grad({full}, {qf}, {dout})[0];
    for (auto [first, last] : {std::pair<int64_t, int64_t>{0, S},
                               {1, S},
                               {63, S},
                               {64, S},
                               {100, S},
                               {S - 1, S},
                               {70, 71},
                               {120, 150},
                               {5, 6}}) {
      const Tensor qp = q.slice(2, first, last).contiguous().requires_grad(true);
      const Tensor part = ops::scaled_dot_product_attention(
          qp, k.slice(2, 0, last), v.slice(2, 0, last), window_options(window, first));
      EXPECT_EQ(part.to_vector<float>(),
                full.detach().slice(2, first, last).contiguous().to_vector<float>())
          << "window " << window << " queries " << first << ".." << last;
      const Tensor part_dq = autograd::grad({part}, {qp}, {dout.slice(2, first, last)})[0];
      EXPECT_EQ(part_dq.to_vector<float>(),
                full_dq.slice(2, first, last).contiguous().to_vector<float>())
          << "window " << window << " queries " << first << ".." << last;
    }
  }
}

// The recorded forward keeps the window: a replay (as a checkpointed region
// runs it) gives the first run's bits, which are not the unwindowed ones.
TEST(AttentionWindow, TheRecordedForwardReplaysTheWindow) {
  Tensor q = param({1, 2, 90, 8}, 67), k = param({1, 1, 90, 8}, 68), v = param({1, 1, 90, 8}, 69);
  const Tensor out = ops::scaled_dot_product_attention(q, k, v, window_options(10));
  NoGradGuard no_grad;
  const Tensor replay = out.grad_fn()->forward({q, k, v}, nullptr)[0];
  EXPECT_TRUE(same_bits(replay, out));
  const Tensor causal = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  EXPECT_GT(max_abs_diff(causal, out), 1e-3);
}

TEST(AttentionMemory, SavesInputsOutputAndLogsumexpOnly) {
  Tensor q = param({1, 2, 9, 4}, 81), k = param({1, 1, 11, 4}, 82), v = param({1, 1, 11, 4}, 83);
  Tensor out = ops::scaled_dot_product_attention(q, k, v);
  // q, k, v, out and the (B, Hq, T) logsumexp.
  ASSERT_EQ(out.grad_fn()->saved.size(), 5u);
  EXPECT_EQ(out.grad_fn()->outputs.at(1).shape, (Shape{1, 2, 9}));
}

TEST(AttentionMemory, NeverAllocatesATimesSMatrix) {
  const int64_t T = 1024, D = 16;
  Tensor q = uniform({1, 1, T, D}, -1, 1, 84, DType::f32).requires_grad(true);
  Tensor k = uniform({1, 1, T, D}, -1, 1, 85, DType::f32).requires_grad(true);
  Tensor v = uniform({1, 1, T, D}, -1, 1, 86, DType::f32).requires_grad(true);
  memory_stats::reset_peaks();
  const int64_t before = memory_stats::snapshot().total.live;
  Tensor out = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  autograd::backward(ops::sum(out));
  const int64_t peak = memory_stats::snapshot().total.peak - before;
  // One f32 T x T matrix is 4 MiB; everything here is O(T D).
  EXPECT_LT(peak, T * T * 4 / 8) << memory_stats::snapshot().to_string();
}

TEST(AttentionForward, NoQueriesGiveEmptyOutputAndZeroKvGradients) {
  Tensor q = param({2, 4, 0, 5}, 87), k = param({2, 2, 3, 5}, 88), v = param({2, 2, 3, 4}, 89);
  Tensor out = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  EXPECT_EQ(out.shape(), (Shape{2, 4, 0, 4}));
  autograd::Tensors grads =
      autograd::grad({out}, {q, k, v}, {Tensor::zeros({2, 4, 0, 4}, DType::f64)});
  EXPECT_EQ(grads[0].shape(), q.shape());
  EXPECT_EQ(grads[1].to_vector<double>(), std::vector<double>(60, 0.0));
  EXPECT_EQ(grads[2].to_vector<double>(), std::vector<double>(48, 0.0));
}

// expect_error, and the message names the op.
void expect_sdpa_error(const std::function<void()>& f, std::vector<std::string> parts) {
  parts.insert(parts.begin(), "scaled_dot_product_attention");
  expect_error(f, parts);
}

TEST(AttentionBadInput, NamesTheOpAndTheShapes) {
  Tensor q = Tensor::zeros({2, 4, 7, 5}), k = Tensor::zeros({2, 2, 7, 5}),
         v = Tensor::zeros({2, 2, 7, 5});
  auto call = [](Tensor a, Tensor b, Tensor c, AttentionOptions o = {}) {
    return [=] { ops::scaled_dot_product_attention(a, b, c, o); };
  };
  expect_sdpa_error(call(Tensor::zeros({4, 7, 5}), k, v), {"f32[4, 7, 5] cpu", "(B, Hq, T, D)"});
  expect_sdpa_error(call(Tensor::zeros({2, 3, 7, 5}), k, v), {"f32[2, 3, 7, 5] cpu", "multiple"});
  expect_sdpa_error(call(q, Tensor::zeros({2, 2, 7, 6}), v), {"f32[2, 2, 7, 6] cpu", "head sizes"});
  expect_sdpa_error(call(q, k, Tensor::zeros({2, 2, 8, 5})),
                    {"f32[2, 2, 8, 5] cpu", "(B, Hkv, S)"});
  expect_sdpa_error(call(Tensor::zeros({3, 4, 7, 5}), k, v), {"f32[3, 4, 7, 5] cpu", "batch"});
  expect_sdpa_error(call(q, Tensor::zeros({2, 2, 7, 5}, DType::f64), v), {"f64[2, 2, 7, 5] cpu"});
  expect_sdpa_error(call(Tensor::zeros({2, 4, 7, 5}, DType::i64), k, v), {"i64[2, 4, 7, 5] cpu"});
  expect_sdpa_error(call(q, Tensor::zeros({2, 2, 0, 5}), Tensor::zeros({2, 2, 0, 5})), {"S = 0"});
  expect_sdpa_error(call(q, k, v, {.dropout_p = 1.5}), {"dropout_p"});
  expect_sdpa_error(call(q, k, v, {.causal = true, .causal_offset = -1}), {"causal_offset", "-1"});
  expect_sdpa_error(call(q, k, v, {.causal = true, .window = -2}),
                    {"window must be >= 0", "-2", "f32[2, 4, 7, 5] cpu"});
  expect_sdpa_error(call(q, k, v, {.window = 3}), {"window = 3", "causal", "f32[2, 4, 7, 5] cpu"});
  // T + offset - window = 7 + 3 - 3 = 7 = S: query 6's window starts past key 6.
  expect_sdpa_error(call(q, k, v, {.causal = true, .causal_offset = 3, .window = 3}),
                    {"last query (6) sees no key", "starts at 7", "T + causal_offset - window < S",
                     "f32[2, 2, 7, 5] cpu"});
  // A reservation short of B Hq T S = 392 words.
  expect_sdpa_error(
      call(q, k, v, {.dropout_p = 0.1, .dropout_rng = rng::Reservation{.count = 391}}),
      {"392 random words", "count=391"});
}

}  // namespace
}  // namespace reprise::testing
