// matmul and linear: hand values, a naive f64 reference over layouts and
// tile edges, thread-count independence, PyTorch golden values (f32), what
// the tape saves, and bad input. Their cases are in tests/cases/matmul.cpp.
#include "ops/matmul.h"

#include <cmath>
#include <functional>
#include <map>

#include "autograd/backward.h"
#include "autograd/node.h"
#include "engine/threads.h"
#include "ops/views.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

// c[i][j] = sum_k a[i][k] b[k][j] in f64 for (..., M, K) @ (..., K, N)
// with the same batch shape (test data only).
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const int64_t batch = a.numel() / (M * K);
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  std::vector<double> z(size_t(batch * M * N), 0.0);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j)
          z[size_t((s * M + i) * N + j)] +=
              x[size_t((s * M + i) * K + k)] * y[size_t((s * K + k) * N + j)];
  Shape shape = a.shape();
  shape.back() = N;
  return Tensor::from_vector(z, shape);
}

TEST(Matmul, HandValues) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({5, 6, 7, 8}, {2, 2});
  EXPECT_EQ(ops::matmul(a, b).to_vector<float>(), (std::vector<float>{19, 22, 43, 50}));
  // x (1, 3) @ w (2, 3)^T: (1 - 3, 2 + 2).
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
  Tensor w = Tensor::from_vector<float>({1, 0, -1, 2, 1, 0}, {2, 3});
  Tensor y = ops::linear(x, w);
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-2, 4}));
  EXPECT_EQ(ops::linear(x.view({3}), w).shape(), (Shape{2}));
  // K = 0: an empty sum.
  Tensor e = ops::matmul(Tensor::empty({2, 0}), Tensor::empty({0, 3}));
  EXPECT_EQ(e.to_vector<float>(), std::vector<float>(6, 0.0f));
}

// Shapes that cross the 256-wide tiles, the 16-element edges and Eigen's
// K-panels, in every storage order of a and b; f64 against the naive sum.
TEST(Matmul, MatchesNaiveAcrossLayoutsAndTiles) {
  struct Dims {
    int64_t batch, M, K, N;
  };
  for (Dims d : {Dims{1, 300, 70, 530}, Dims{1, 17, 1100, 33}, Dims{5, 33, 20, 270},
                 Dims{1, 1, 64, 300}, Dims{1, 300, 64, 1}, Dims{3, 1, 1, 1}}) {
    Tensor a = uniform({d.batch, d.M, d.K}, -1, 1, 61), b = uniform({d.batch, d.K, d.N}, -1, 1, 62);
    Tensor expected = naive_matmul(a, b);
    // Column-major copies of the same values, read through transposed views.
    Tensor a_cm = a.transpose(1, 2).contiguous().transpose(1, 2);
    Tensor b_cm = b.transpose(1, 2).contiguous().transpose(1, 2);
    for (const Tensor& x : {a, a_cm}) {
      for (const Tensor& y : {b, b_cm}) {
        EXPECT_LT(max_abs_diff(ops::matmul(x, y), expected), 1e-12 * double(d.K))
            << d.batch << "x" << d.M << "x" << d.K << "x" << d.N << " a strides "
            << to_string(x.strides()) << " b strides " << to_string(y.strides());
      }
    }
  }
}

// A broadcast (stride-0) operand and a 4-D batch against per-matrix products.
TEST(Matmul, BroadcastBatchMatchesPerMatrixProducts) {
  Tensor a = uniform({2, 1, 7, 9}, -1, 1, 63), b = uniform({3, 9, 5}, -1, 1, 64);
  Tensor c = ops::matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 7, 5}));
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      Tensor ai = a.select(0, i).select(0, 0).contiguous(), bj = b.select(0, j).contiguous();
      Tensor cij = c.select(0, i).select(0, j).contiguous();
      EXPECT_LT(max_abs_diff(cij, naive_matmul(ai, bj)), 1e-13);
    }
  }
}

// Broadcast (stride-0) rows or columns inside a matrix: no storage order
// fits, so the kernel copies them first; the values must not change.
TEST(Matmul, StrideZeroMatricesMatchNaive) {
  NoGradGuard no_grad;
  Tensor row = uniform({1, 40}, -1, 1, 68), col = uniform({40, 1}, -1, 1, 69);
  Tensor a = row.expand({30, 40});  // every row the same: row stride 0
  Tensor b = col.expand({40, 20});  // every column the same: column stride 0
  EXPECT_LT(max_abs_diff(ops::matmul(a, b), naive_matmul(a.contiguous(), b.contiguous())), 1e-12);
  EXPECT_LT(
      max_abs_diff(ops::linear(a, b.transpose(0, 1)), naive_matmul(a.contiguous(), b.contiguous())),
      1e-12);
}

// The tiles are fixed by the shapes and each is computed by one sequential
// kernel call, so the bits do not depend on the thread count. (Eigen's own
// threaded product does not promise this: its K-panel depth depends on the
// thread count; see ops/gemm.cpp.)
TEST(Matmul, BitsDoNotDependOnThreadCount) {
  const int saved = threads::num_threads();
  struct Dims {
    int64_t batch, M, K, N;
  };
  for (Dims d : {Dims{1, 256, 2048, 256}, Dims{1, 520, 700, 300}, Dims{6, 70, 300, 90}}) {
    Tensor a = uniform({d.batch, d.M, d.K}, -1, 1, 65, DType::f32);
    Tensor b = uniform({d.K, d.N}, -1, 1, 66, DType::f32);
    Tensor bb = uniform({d.batch, d.K, d.N}, -1, 1, 67, DType::f32);
    std::vector<std::vector<float>> runs;
    for (int nt : {1, 2, 3, 8}) {
      threads::set_num_threads(nt);
      std::vector<float> r = ops::matmul(a, b).to_vector<float>();
      std::vector<float> rb = ops::matmul(a, bb).to_vector<float>();
      r.insert(r.end(), rb.begin(), rb.end());
      runs.push_back(std::move(r));
    }
    for (size_t i = 1; i < runs.size(); ++i) {
      EXPECT_TRUE(runs[i] == runs[0]) << "thread count run " << i << " differs, " << d.batch << "x"
                                      << d.M << "x" << d.K << "x" << d.N;
    }
  }
  threads::set_num_threads(saved);
}

// f32 against torch's f32 results. Inputs are standard normal, so an
// output element sums K terms of size ~1 and has size ~sqrt(K); two f32
// summation orders differ by about eps * sqrt(K) relative to that scale
// (eps = 2^-24 per rounding, random signs; blocked sums keep the constant
// small). Tolerance: |ours - torch| <= 3e-7 * sqrt(K) * (sqrt(K) + |torch|),
// ~5 eps * sqrt(K) of the output's scale; the worst case seen here is
// 0.2 eps * sqrt(K) (long_k's out), so the margin is ~25x.
::testing::AssertionResult close_f32(const Tensor& actual, const Tensor& expected, int64_t K) {
  const double r = 3e-7 * std::sqrt(double(K));
  return all_close(actual, expected, r * std::sqrt(double(K)), r);
}

class MatmulGolden : public ::testing::Test {
 protected:
  using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
  static void SetUpTestSuite() { golden_ = new auto(load_golden("matmul.safetensors")); }
  static void TearDownTestSuite() { delete golden_; }
  static Tensor get(const std::string& name) {
    auto it = golden_->find(name);
    if (it == golden_->end()) throw Error("matmul.safetensors has no tensor " + name);
    return it->second;
  }
  // Case c: out = f(x, y) and both gradients of sum(out * dout), with the
  // inner dims (the K of the tolerance) of out, dx and dy.
  static void expect_case(const std::string& c, const std::string& xn, const std::string& yn,
                          const Fn& f, int64_t k_out, int64_t k_dx, int64_t k_dy) {
    Tensor x = get(c + "." + xn).clone().requires_grad(true);
    Tensor y = get(c + "." + yn).clone().requires_grad(true);
    Tensor out = f(x, y);
    EXPECT_TRUE(close_f32(out, get(c + ".out"), k_out)) << c << ".out";
    autograd::backward(out, get(c + ".dout"));
    EXPECT_TRUE(close_f32(x.grad(), get(c + ".d" + xn), k_dx)) << c << ".d" << xn;
    EXPECT_TRUE(close_f32(y.grad(), get(c + ".d" + yn), k_dy)) << c << ".d" << yn;
  }
  static std::map<std::string, Tensor>* golden_;
};
std::map<std::string, Tensor>* MatmulGolden::golden_ = nullptr;

TEST_F(MatmulGolden, MatmulForwardAndGradients) {
  auto mm = [](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); };
  // K of out = a @ b, of da = dout @ b^T (N) and of db = a^T @ dout (rows of the batch).
  expect_case("mm", "a", "b", mm, 70, 45, 33);
  expect_case("bmm_bcast", "a", "b", mm, 24, 13, 2 * 9);
  expect_case("b_batched", "a", "b", mm, 24, 4 * 13, 9);
  expect_case("long_k", "a", "b", mm, 1100, 6, 4);
  expect_case("tall", "a", "b", mm, 8, 20, 260);
  auto mm_tt = [](const Tensor& at, const Tensor& bt) {
    return ops::matmul(ops::transpose(at, 0, 1), ops::transpose(bt, 0, 1));
  };
  expect_case("mm_tt", "at", "bt", mm_tt, 70, 45, 33);
}

TEST_F(MatmulGolden, LinearForwardAndGradients) {
  auto lin = [](const Tensor& x, const Tensor& w) { return ops::linear(x, w); };
  // K of y = x w^T (K), of dx = dy w (N) and of dw = dy^T x (all rows).
  expect_case("linear", "x", "w", lin, 64, 40, 2 * 20);
  auto lin_xt = [](const Tensor& xt, const Tensor& w) {
    return ops::linear(ops::transpose(xt, 0, 1), w);
  };
  expect_case("linear_xt", "xt", "w", lin_xt, 64, 40, 10 * 3);
}

// A node keeps only what a needed gradient reads, and costs 2 M N K.
TEST(Matmul, SavesOnlyWhatBackwardReads) {
  Tensor x = uniform({2, 3, 5}, -1, 1, 71), w = param({4, 5}, 72);
  Tensor y = ops::linear(x, w);  // only w requires grad: dW reads x
  ASSERT_NE(y.grad_fn(), nullptr);
  const autograd::Node& n = *y.grad_fn();
  ASSERT_EQ(n.saved_slots.size(), 1u);
  EXPECT_EQ(n.saved_slots[0].source, autograd::SavedSlot::Source::input);
  EXPECT_EQ(n.saved_slots[0].index, 0u);
  EXPECT_EQ(n.flops, 2.0 * 6 * 4 * 5);

  Tensor a = param({2, 3, 5}, 73), b = uniform({5, 7}, -1, 1, 74);
  Tensor c = ops::matmul(a, b);  // only a requires grad: dA reads b
  const autograd::Node& m = *c.grad_fn();
  ASSERT_EQ(m.saved_slots.size(), 1u);
  EXPECT_EQ(m.saved_slots[0].index, 1u);
  EXPECT_EQ(m.flops, 2.0 * 2 * 3 * 7 * 5);
}

TEST(Matmul, BadInputNamesOpAndShapes) {
  Tensor a35 = Tensor::zeros({3, 5}), b47 = Tensor::zeros({4, 7});
  expect_error([&] { ops::matmul(a35, b47); }, {"matmul", "f32[3, 5]", "f32[4, 7]", "K = 5"});
  expect_error(
      [&] {
        ops::matmul(a35, Tensor::zeros({5, 7}, DType::f64));
      },
      {"matmul", "dtype", "f32[3, 5]", "f64[5, 7]"});
  expect_error(
      [&] {
        ops::matmul(Tensor::zeros({5}), Tensor::zeros({5, 7}));
      },
      {"matmul", "f32[5]", "1-D"});
  expect_error(
      [&] {
        ops::matmul(Tensor::zeros({2, 3, 5}), Tensor::zeros({4, 5, 7}));
      },
      {"matmul", "batch", "f32[2, 3, 5]", "f32[4, 5, 7]"});
  expect_error(
      [&] {
        ops::matmul(Tensor::zeros({3, 5}, DType::i64), Tensor::zeros({5, 7}, DType::i64));
      },
      {"matmul", "f32, f64, bf16 or f16", "i64[3, 5]"});
  expect_error(
      [&] {
        ops::linear(Tensor::zeros({2, 5}), Tensor::zeros({4, 6}));
      },
      {"linear", "f32[2, 5]", "f32[4, 6]", "(N, K)"});
  expect_error(
      [&] {
        ops::linear(Tensor::zeros({2, 5}), Tensor::zeros({5}));
      },
      {"linear", "f32[5]"});
}

}  // namespace
}  // namespace reprise::testing
