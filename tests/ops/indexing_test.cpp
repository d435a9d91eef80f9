// index_select, gather, scatter_add, index_add, where, topk, sort: forward values
// against hand-computed ones, bitwise determinism across thread counts with
// many repeated indices, and bad input. Their cases are in
// tests/cases/indexing.cpp.
#include "ops/indexing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "autograd/backward.h"
#include "engine/threads.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/capabilities.h"
#include "tests/support/cuda_sim_backend.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using autograd::Tensors;
using reprise::Tensor;

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// f at 1 thread and at 2 threads.
template <class F>
std::pair<Tensor, Tensor> at_one_and_two_threads(F f) {
  int before = threads::num_threads();
  threads::set_num_threads(1);
  Tensor one = f();
  threads::set_num_threads(2);
  Tensor two = f();
  threads::set_num_threads(before);
  return {one, two};
}

TEST(Indexing, IndexSelectAndGatherValues) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}, {3, 4});
  EXPECT_EQ(ops::index_select(x, 1, i64({3, 0, 3})).to_vector<float>(),
            (std::vector<float>{3, 0, 3, 13, 10, 13, 23, 20, 23}));
  EXPECT_EQ(ops::index_select(x, 0, i64({2, 2})).to_vector<float>(),
            (std::vector<float>{20, 21, 22, 23, 20, 21, 22, 23}));
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor g = ops::gather(t, 1, Tensor::from_vector<int64_t>({0, 0, 1, 0}, {2, 2}));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1, 1, 4, 3}));
  Tensor g0 = ops::gather(x, 0, Tensor::from_vector<int32_t>({2, 0, 1}, {1, 3}));
  EXPECT_EQ(g0.to_vector<float>(), (std::vector<float>{20, 1, 12}));
  // Any dtype is copied: bool and i64.
  Tensor b = Tensor::empty({3}, DType::boolean);
  b.data<bool>()[0] = true, b.data<bool>()[1] = false, b.data<bool>()[2] = true;
  Tensor bs = ops::index_select(b, 0, i64({1, 2}));
  EXPECT_FALSE(bs.data<bool>()[0]);
  EXPECT_TRUE(bs.data<bool>()[1]);
  EXPECT_EQ(ops::index_select(i64({5, 6, 7}), 0, i64({2, 0})).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 5}));
}

TEST(Indexing, ScatterAddAndIndexAddValuesAreOutOfPlace) {
  Tensor x = Tensor::zeros({3});
  Tensor s = ops::scatter_add(x, 0, i64({0, 1, 0, 0, 2}),
                              Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{8, 2, 5}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  Tensor ones = Tensor::ones({2, 4});
  Tensor s2 = ops::scatter_add(ones, 1, Tensor::from_vector<int64_t>({0, 0, 3, 1, 1, 1}, {2, 3}),
                               Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(s2.to_vector<float>(), (std::vector<float>{4, 1, 1, 4, 1, 16, 1, 1}));
  Tensor a = ops::index_add(Tensor::zeros({4, 2}), 0, i64({3, 0, 3}),
                            Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 4, 0, 0, 0, 0, 6, 8}));
  // Integer counting, as for expert token counts.
  Tensor counts = ops::index_add(Tensor::zeros({4}, DType::i64), 0, i64({3, 0, 3}),
                                 Tensor::ones({3}, DType::i64));
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 2}));
}

TEST(Indexing, WhereValues) {
  Tensor c = Tensor::empty({3}, DType::boolean);
  c.data<bool>()[0] = true, c.data<bool>()[1] = false, c.data<bool>()[2] = true;
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  EXPECT_EQ(ops::where(c, a, Tensor::scalar(0)).to_vector<float>(), (std::vector<float>{1, 0, 3}));
  // cond (3) against a (2, 1) and b (1): result (2, 3).
  Tensor a2 = Tensor::from_vector<int64_t>({10, 20}, {2, 1});
  Tensor w = ops::where(c, a2, i64({-1}));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.to_vector<int64_t>(), (std::vector<int64_t>{10, -1, 10, 20, -1, 20}));
}

TEST(Indexing, TopkOrderTiesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>({3, 1, 3, nan, 2, 3}, {6});
  auto top = ops::topk(x, 4);
  EXPECT_EQ(top.indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 2, 5}));
  std::vector<float> v = top.values.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(std::vector<float>(v.begin() + 1, v.end()), (std::vector<float>{3, 3, 3}));
  auto low = ops::topk(x, 6, 0, /*largest=*/false);
  EXPECT_EQ(low.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 0, 2, 5, 3}));
  auto unsorted = ops::topk(x, 3, 0, true, /*sorted=*/false);
  EXPECT_EQ(unsorted.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3}));
  // -0 and +0 are equal: lower index first.
  Tensor zeros = Tensor::from_vector<float>({0.f, -0.f, 0.f}, {3});
  EXPECT_EQ(ops::topk(zeros, 2).indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  // Along dim 0 of (3, 2).
  Tensor m = Tensor::from_vector<double>({1, 5, 3, 4, 2, 6}, {3, 2});
  auto col = ops::topk(m, 2, 0);
  EXPECT_EQ(col.values.shape(), (Shape{2, 2}));
  EXPECT_EQ(col.values.to_vector<double>(), (std::vector<double>{3, 6, 2, 5}));
  EXPECT_EQ(col.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2, 0}));
  auto ints = ops::topk(Tensor::from_vector<int32_t>({5, 7, 5}, {3}), 2);
  EXPECT_EQ(ints.values.to_vector<int32_t>(), (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(ints.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ops::topk(m, 0, 1).values.shape(), (Shape{3, 0}));
}

// Many ties (5 distinct values) and some NaNs, against a stable sort per
// row, at row lengths that take either selection path (k * 16 <= n or not),
// largest and smallest, sorted and not; the same bits at 1 and 2 threads.
TEST(Indexing, TopkMatchesStableSortWithManyTiesAndNaNs) {
  const int64_t rows = 37;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{50, 10}, {600, 7}}) {
    std::vector<float> xv = indices({rows, n}, 5, 6).to(DType::f32).to_vector<float>();
    for (size_t i = 0; i < xv.size(); i += 97) xv[i] = std::numeric_limits<float>::quiet_NaN();
    Tensor x = Tensor::from_vector(xv, {rows, n});
    for (bool largest : {true, false}) {
      auto [i1, i2] = at_one_and_two_threads([&] { return ops::topk(x, k, 1, largest).indices; });
      EXPECT_EQ(i1.to_vector<int64_t>(), i2.to_vector<int64_t>());
      std::vector<int64_t> got = i1.to_vector<int64_t>();
      std::vector<int64_t> unsorted =
          ops::topk(x, k, 1, largest, /*sorted=*/false).indices.to_vector<int64_t>();
      for (int64_t r = 0; r < rows; ++r) {
        // NaN above every number; stable_sort keeps equal values in index order.
        auto rank = [&](int64_t i) {
          float v = xv[size_t(r * n + i)];
          return std::isnan(v) ? (largest ? -1e9f : 1e9f) : (largest ? -v : v);
        };
        std::vector<int64_t> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return rank(a) < rank(b); });
        std::vector<int64_t> want(order.begin(), order.begin() + k);
        EXPECT_EQ(std::vector<int64_t>(got.begin() + r * k, got.begin() + (r + 1) * k), want)
            << "n " << n << " largest " << largest << " row " << r;
        std::sort(want.begin(), want.end());
        EXPECT_EQ(std::vector<int64_t>(unsorted.begin() + r * k, unsorted.begin() + (r + 1) * k),
                  want)
            << "unsorted, n " << n << " largest " << largest << " row " << r;
      }
    }
  }
}

// sort against a stable sort of each line, with many ties and NaNs, at
// line lengths that are and are not powers of two, along the last dim and
// a middle one; on the CUDA simulator, threads in either order, the same.
TEST(Indexing, SortIsStableWithTiesAndNaNs) {
  for (int64_t n : {1, 2, 64, 300, 1000}) {
    const int64_t rows = 7;
    std::vector<float> xv = indices({rows, n}, 5, 9).to(DType::f32).to_vector<float>();
    for (size_t i = 3; i < xv.size(); i += 41) xv[i] = std::numeric_limits<float>::quiet_NaN();
    const Tensor x = Tensor::from_vector(xv, {rows, n});
    for (bool descending : {false, true}) {
      const ops::TopKResult got = ops::sort(x, -1, descending);
      const std::vector<int64_t> order = got.indices.to_vector<int64_t>();
      const std::vector<float> values = got.values.to_vector<float>();
      for (int64_t r = 0; r < rows; ++r) {
        auto rank = [&](int64_t i) {
          const float v = xv[size_t(r * n + i)];
          return std::isnan(v) ? (descending ? -1e9f : 1e9f) : (descending ? -v : v);
        };
        std::vector<int64_t> want(static_cast<size_t>(n));
        std::iota(want.begin(), want.end(), 0);
        std::stable_sort(want.begin(), want.end(),
                         [&](int64_t a, int64_t b) { return rank(a) < rank(b); });
        ASSERT_EQ(std::vector<int64_t>(order.begin() + r * n, order.begin() + (r + 1) * n), want)
            << "n " << n << " descending " << descending << " row " << r;
        for (int64_t i = 0; i < n; ++i) {
          const float v = values[size_t(r * n + i)], w = xv[size_t(r * n + want[size_t(i)])];
          EXPECT_TRUE(v == w || (std::isnan(v) && std::isnan(w)));
        }
      }
      EXPECT_EQ(ops::argsort(x, -1, descending).to_vector<int64_t>(), order);
      // Along dim 0 of the transpose: the same lines.
      const ops::TopKResult cols = ops::sort(ops::transpose(x, 0, 1), 0, descending);
      EXPECT_EQ(ops::transpose(cols.indices, 0, 1).contiguous().to_vector<int64_t>(), order);
      CudaSimBackend in_order(false), reversed(true);
      for (CudaSimBackend* sim : {&in_order, &reversed}) {
        ScopedCpuBackend use(*sim);
        const ops::TopKResult on_sim = ops::sort(x, -1, descending);
        EXPECT_EQ(on_sim.indices.to_vector<int64_t>(), order) << sim->name() << " n " << n;
        EXPECT_EQ(bits(on_sim.values), bits(got.values)) << sim->name() << " n " << n;
      }
    }
  }
  // -0 equals +0 (they keep their order, and their bits); i32 and i64.
  const Tensor zeros = Tensor::from_vector<float>({0.f, -0.f, 1.f, 0.f, -1.f}, {5});
  for (bool descending : {false, true}) {
    const ops::TopKResult z = ops::sort(zeros, 0, descending);
    const std::vector<int64_t> want =
        descending ? std::vector<int64_t>{2, 0, 1, 3, 4} : std::vector<int64_t>{4, 0, 1, 3, 2};
    EXPECT_EQ(z.indices.to_vector<int64_t>(), want);
    EXPECT_TRUE(std::signbit(z.values.to_vector<float>()[2]));  // the -0, in place
  }
  EXPECT_EQ(
      ops::sort(Tensor::from_vector<int32_t>({3, -7, 3, 0}, {4})).indices.to_vector<int64_t>(),
      (std::vector<int64_t>{1, 3, 0, 2}));
  const ops::TopKResult ints = ops::sort(Tensor::from_vector<int64_t>({4, -1, 4, 0}, {4}), 0, true);
  EXPECT_EQ(ints.values.to_vector<int64_t>(), (std::vector<int64_t>{4, 4, 0, -1}));
  EXPECT_EQ(ints.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(ops::sort(Tensor::zeros({3, 0}), 1).values.shape(), (Shape{3, 0}));
}

TEST(Indexing, SortRejectsBadInput) {
  expect_error([] { ops::sort(Tensor::zeros({3}).to(DType::boolean)); },
               {"sort", "bool", "expected x of dtype f32, f64, i32 or i64"});
  expect_error([] { ops::sort(Tensor::zeros({3}, DType::bf16)); }, {"sort", "bf16"});
  expect_error([] { ops::argsort(Tensor::zeros({2, 3}), 2); }, {"sort", "dim 2"});
  expect_error([] { ops::sort(Tensor::scalar(1.0)); }, {"sort", "at least one dim"});
}

// index_add along dim 0 with 5000 indices into 11 rows: every sum adds in
// index order, so it equals a serial loop bit for bit, at any thread count.
TEST(Indexing, IndexAddIsBitwiseDeterministic) {
  const int64_t V = 11, N = 5000, C = 300;
  Tensor index = indices({N}, V, 7);
  Tensor src = uniform({N, C}, -1, 1, 8, DType::f32);
  auto [one, two] = at_one_and_two_threads([&] {
    return ops::index_add(Tensor::zeros({V, C}), 0, index, src);
  });
  EXPECT_EQ(bits(one), bits(two));
  std::vector<float> ref(size_t(V * C), 0.f), s = src.to_vector<float>();
  std::vector<int64_t> iv = index.to_vector<int64_t>();
  for (int64_t j = 0; j < N; ++j)
    for (int64_t c = 0; c < C; ++c) ref[size_t(iv[size_t(j)] * C + c)] += s[size_t(j * C + c)];
  EXPECT_EQ(bits(one), bits(Tensor::from_vector(ref, {V, C})));
}

TEST(Indexing, ScatterAddIsBitwiseDeterministic) {
  const int64_t R = 64, X = 13, N = 4000;
  Tensor index = indices({R, N}, X, 9);
  Tensor src = uniform({R, N}, -1, 1, 10, DType::f32);
  auto [one, two] = at_one_and_two_threads([&] {
    return ops::scatter_add(Tensor::zeros({R, X}), 1, index, src);
  });
  EXPECT_EQ(bits(one), bits(two));
  std::vector<float> ref(size_t(R * X), 0.f), s = src.to_vector<float>();
  std::vector<int64_t> iv = index.to_vector<int64_t>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < N; ++j)
      ref[size_t(r * X + iv[size_t(r * N + j)])] += s[size_t(r * N + j)];
  EXPECT_EQ(bits(one), bits(Tensor::from_vector(ref, {R, X})));
}

// The backward of index_select and gather accumulates repeated indices.
TEST(Indexing, SelectAndGatherBackwardAreBitwiseDeterministic) {
  Tensor x = uniform({9, 200}, -1, 1, 11, DType::f32).requires_grad(true);
  Tensor index = indices({6000}, 9, 12);
  Tensor gy = uniform({6000, 200}, -1, 1, 13, DType::f32);
  auto [s1, s2] = at_one_and_two_threads(
      [&] { return autograd::grad({ops::index_select(x, 0, index)}, {x}, {gy})[0]; });
  EXPECT_EQ(bits(s1), bits(s2));
  Tensor gindex = indices({9, 3000}, 200, 14);
  Tensor gg = uniform({9, 3000}, -1, 1, 15, DType::f32);
  auto [g1, g2] = at_one_and_two_threads(
      [&] { return autograd::grad({ops::gather(x, 1, gindex)}, {x}, {gg})[0]; });
  EXPECT_EQ(bits(g1), bits(g2));
}

// Forward and gradients against PyTorch (tests/fixtures/golden_index_ops.py),
// f32. Copies and selections are exact; sums of repeated indices may add in
// another order than torch's, so they get a few ulps.
TEST(Indexing, MatchesPyTorchGolden) {
  std::map<std::string, Tensor> g = load_golden("index_ops.safetensors");
  auto grads = [](const Tensor& y, const Tensors& inputs, const Tensor& dy) {
    return autograd::grad({y}, inputs, {dy});
  };
  auto leaf = [&](const std::string& key) { return g.at(key).clone().requires_grad(true); };
  {
    Tensor x = leaf("index_select.x");
    Tensor y = ops::index_select(x, 1, g.at("index_select.index"));
    EXPECT_TRUE(all_close(y, g.at("index_select.y"), 0, 0));
    EXPECT_TRUE(
        all_close(grads(y, {x}, g.at("index_select.dy"))[0], g.at("index_select.dx"), 1e-6, 1e-6));
  }
  {
    Tensor x = leaf("gather.x");
    Tensor y = ops::gather(x, 2, g.at("gather.index"));
    EXPECT_TRUE(all_close(y, g.at("gather.y"), 0, 0));
    EXPECT_TRUE(all_close(grads(y, {x}, g.at("gather.dy"))[0], g.at("gather.dx"), 1e-6, 1e-6));
  }
  {
    Tensor x = leaf("scatter_add.x"), src = leaf("scatter_add.src");
    Tensor y = ops::scatter_add(x, 1, g.at("scatter_add.index"), src);
    EXPECT_TRUE(all_close(y, g.at("scatter_add.y"), 1e-6, 1e-6));
    Tensors d = grads(y, {x, src}, g.at("scatter_add.dy"));
    EXPECT_TRUE(all_close(d[0], g.at("scatter_add.dx"), 0, 0));
    EXPECT_TRUE(all_close(d[1], g.at("scatter_add.dsrc"), 0, 0));
  }
  {
    Tensor x = leaf("index_add.x"), src = leaf("index_add.src");
    Tensor y = ops::index_add(x, 0, g.at("index_add.index"), src);
    EXPECT_TRUE(all_close(y, g.at("index_add.y"), 1e-6, 1e-6));
    Tensors d = grads(y, {x, src}, g.at("index_add.dy"));
    EXPECT_TRUE(all_close(d[0], g.at("index_add.dx"), 0, 0));
    EXPECT_TRUE(all_close(d[1], g.at("index_add.dsrc"), 0, 0));
  }
  {
    Tensor a = leaf("where.a"), b = leaf("where.b");
    Tensor y = ops::where(g.at("where.cond"), a, b);
    EXPECT_TRUE(all_close(y, g.at("where.y"), 0, 0));
    Tensors d = grads(y, {a, b}, g.at("where.dy"));
    EXPECT_TRUE(all_close(d[0], g.at("where.da"), 0, 0));
    EXPECT_TRUE(all_close(d[1], g.at("where.db"), 1e-6, 1e-6));
  }
  {
    Tensor x = leaf("topk.x");
    ops::TopKResult top = ops::topk(x, 3, 1);
    EXPECT_TRUE(all_close(top.values, g.at("topk.y"), 0, 0));
    EXPECT_EQ(top.indices.to_vector<int64_t>(), g.at("topk.indices").to_vector<int64_t>());
    EXPECT_TRUE(all_close(grads(top.values, {x}, g.at("topk.dy"))[0], g.at("topk.dx"), 0, 0));
  }
}

TEST(Indexing, BadIndexNamesOpValueAndDimSize) {
  Tensor x = Tensor::zeros({5, 3});
  expect_error(
      [&] {
        ops::index_select(x, 0, i64({0, 7}));
      },
      {"index_select", "index 7", "dim 0 of size 5", "f32[5, 3]"});
  expect_error([&] { ops::index_select(x, 1, i64({-1})); }, {"index_select", "index -1", "size 3"});
  expect_error(
      [&] {
        ops::gather(x, 1, Tensor::from_vector<int32_t>({0, 3}, {1, 2}));
      },
      {"gather", "index 3", "dim 1 of size 3"});
  expect_error(
      [&] {
        ops::scatter_add(x, 0, Tensor::from_vector<int64_t>({5}, {1, 1}), Tensor::zeros({1, 1}));
      },
      {"scatter_add", "index 5", "size 5"});
  expect_error(
      [&] {
        ops::index_add(x, 0, i64({9}), Tensor::zeros({1, 3}));
      },
      {"index_add", "index 9", "size 5"});
}

TEST(Indexing, BadShapesAndDtypesNameOpAndShapes) {
  Tensor x = Tensor::zeros({5, 3});
  expect_error([&] { ops::index_select(x, 0, Tensor::zeros({2}, DType::f32)); },
               {"index_select", "i32 or i64", "f32[2]"});
  expect_error(
      [&] {
        ops::index_select(x, 0, Tensor::zeros({2, 1}, DType::i64));
      },
      {"index_select", "rank 1", "i64[2, 1]"});
  expect_error([&] { ops::index_select(x, 2, i64({0})); }, {"index_select", "dim 2", "f32[5, 3]"});
  expect_error([&] { ops::gather(x, 0, Tensor::zeros({2}, DType::i64)); },
               {"gather", "rank 2", "i64[2]"});
  expect_error(
      [&] {
        ops::gather(x, 0, Tensor::zeros({2, 4}, DType::i64));
      },
      {"gather", "i64[2, 4]", "f32[5, 3]", "dim 1"});
  expect_error(
      [&] {
        ops::scatter_add(x, 0, Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({2, 2}));
      },
      {"scatter_add", "i64[2, 3]", "f32[2, 2]"});
  expect_error(
      [&] {
        ops::scatter_add(x, 0, Tensor::zeros({2, 3}, DType::i64),
                         Tensor::zeros({2, 3}, DType::f64));
      },
      {"scatter_add", "f32[5, 3]", "f64[2, 3]"});
  expect_error(
      [&] {
        ops::index_add(x, 1, i64({0, 1}), Tensor::zeros({5, 3}));
      },
      {"index_add", "[5, 2]", "f32[5, 3]"});
  expect_error([&] { ops::where(Tensor::zeros({5, 3}), x, x); }, {"where", "bool", "f32[5, 3]"});
  expect_error([&] { ops::where(mask({4}, 1), x, x); }, {"where", "bool[4]", "f32[5, 3]"});
  expect_error([&] { ops::where(mask({3}, 1), x, Tensor::zeros({3}, DType::f64)); },
               {"where", "f32[5, 3]", "f64[3]"});
  expect_error([&] { ops::topk(x, 4, 1); }, {"topk", "k = 4", "f32[5, 3]"});
  expect_error([&] { ops::topk(mask({3}, 1), 1); }, {"topk", "bool[3]"});
}

}  // namespace
}  // namespace reprise::testing
