// Indexing kernels of the CUDA backend, simulated, against the CPU backend:
// gather and scatter-add along every dim (scatter-add's repeated targets
// summed by sorted segments in the CPU's order), index bounds, topk in
// both orders with ties and NaN, and the embedding and its backward.
#include "cuda/kernels/indexing.h"

#include <gtest/gtest.h>

#include "cuda/kernels/moe_route.h"
#include "engine/backend.h"
#include "tests/cuda/sim_support.h"

namespace reprise::testing {
namespace {

using cuda::SimExec;

// Values in [0, bound) with repeats, of `shape`.
Tensor index_tensor(const Shape& shape, int64_t bound, uint64_t seed, DType dtype = DType::i64) {
  std::vector<int64_t> v(static_cast<size_t>(numel(shape)));
  uint64_t s = seed;
  for (int64_t& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = int64_t((s >> 33) % uint64_t(bound));
  }
  return Tensor::from_vector(v, shape).to(dtype);
}

TEST(CudaSimIndexing, GatherAndScatterAddMatchTheCpuAlongEveryDim) {
  const Tensor x = random_tensor({6, 5, 4}, 1);
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape ishape = {6, 5, 4};
    ishape[size_t(dim)] = 9;
    for (DType it : {DType::i32, DType::i64}) {
      const Tensor index = index_tensor(ishape, x.size(dim), 2 + uint64_t(dim), it);
      const Tensor src = random_tensor(ishape, 3);
      // index_add's form: one index vector broadcast over the other dims.
      Shape vshape(3, 1);
      vshape[size_t(dim)] = 9;
      const Tensor shared = index_tensor(vshape, x.size(dim), 4, it).expand(ishape);
      const Tensor want_g = cpu_backend().gather(x, dim, index);
      std::vector<Tensor> want{want_g};
      for (const Tensor& idx : {index, shared}) {
        Tensor out = x.clone();
        cpu_backend().scatter_add(out, dim, idx, src);
        want.push_back(out);
      }
      const auto got = simulate([&](const SimExec& ex) {
        std::vector<Tensor> out{cuda::gather(ex, x, dim, index)};
        for (const Tensor& idx : {index, shared}) {
          Tensor o = x.clone();
          cuda::scatter_add(ex, o, dim, idx, src);
          out.push_back(o);
        }
        return out;
      });
      expect_same(got, want, "dim " + std::to_string(dim));
    }
  }
}

TEST(CudaSimIndexing, IndexRangeMatchesTheCpu) {
  const Tensor idx = index_tensor({3000}, 97, 5).slice(0, 0, 3000, 3);
  const IndexRange want = cpu_backend().index_range(idx), got = cuda::index_range(SimExec(), idx);
  EXPECT_EQ(got.min, want.min);
  EXPECT_EQ(got.max, want.max);
}

TEST(CudaSimIndexing, TopkMatchesTheCpuWithTiesAndNan) {
  // Few distinct values, so ties are common, and one NaN.
  Tensor x = index_tensor({4, 23, 3}, 5, 6).to(DType::f32);
  x.select(0, 2).select(0, 7).select(0, 1).fill_(std::nan(""));
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (int64_t k : {int64_t(1), std::min<int64_t>(3, x.size(dim))}) {
      for (bool largest : {true, false}) {
        for (bool sorted : {true, false}) {
          const Tensors want = cpu_backend().topk(x, k, dim, largest, sorted);
          const auto got = simulate([&](const SimExec& ex) {
            const Tensors out = cuda::topk(ex, x, k, dim, largest, sorted);
            return std::vector<Tensor>(out.begin(), out.end());
          });
          expect_same(got, want, "topk dim " + std::to_string(dim));
        }
      }
    }
  }
}

TEST(CudaSimIndexing, EmbeddingAndItsBackwardMatchTheCpu) {
  const Tensor w = random_tensor({11, 7}, 7);
  for (DType it : {DType::i32, DType::i64}) {
    const Tensor ids = index_tensor({5, 9}, 11, 8, it);
    const Tensor g = random_tensor({5, 9, 7}, 9);
    const std::vector<Tensor> want{cpu_backend().embedding(w, ids),
                                   cpu_backend().embedding_backward(g, ids, 11)};
    const auto got = simulate([&](const SimExec& ex) {
      return std::vector<Tensor>{cuda::embedding(ex, w, ids),
                                 cuda::embedding_backward(ex, g, ids, 11)};
    });
    expect_same(got, want, dtype_name(it));
  }
}

TEST(CudaSimIndexing, MoeRouteMatchesTheCpu) {
  // Plain top-k; DeepSeek-V3's biased choice in the best 2 of 4 groups of
  // 3 experts, with scaled gates.
  const Tensor bias = random_tensor({12}, 13, DType::f64, -0.5, 0.5);
  const std::vector<std::pair<RouteParams, Tensor>> rules = {
      {RouteParams{.k = 2, .renormalize = true}, Tensor()},
      {RouteParams{.k = 3, .renormalize = true, .n_group = 4, .topk_group = 2, .scale = 2.5}, bias},
      {RouteParams{.k = 2, .renormalize = false, .n_group = 4, .topk_group = 1, .scale = 0.75},
       bias}};
  for (const auto& [rule, b] : rules) {
    for (int64_t capacity : {int64_t(-1), int64_t(3)}) {
      for (bool renormalize : {true, false}) {
        RouteParams p = rule;
        p.capacity = capacity;
        p.renormalize = renormalize;
        // Scores with ties between experts.
        const Tensor scores = index_tensor({29, 12}, 4, 10).to(DType::f64);
        const Tensors want = cpu_backend().moe_route(scores, b, p);
        const Tensor gw = random_tensor({want[0].size(0)}, 11, DType::f64);
        std::vector<Tensor> w(want.begin(), want.end());
        w.push_back(cpu_backend().moe_route_backward(gw, want[1], want[6], want[7], 12, p));
        const auto got = simulate([&](const SimExec& ex) {
          const Tensors out = cuda::moe_route(ex, scores, b, p);
          std::vector<Tensor> r(out.begin(), out.end());
          r.push_back(cuda::moe_route_backward(ex, gw, out[1], out[6], out[7], 12, p));
          return r;
        });
        expect_same(
            got, w,
            "groups " + std::to_string(p.n_group) + ", capacity " + std::to_string(capacity));
      }
    }
  }
  Tensor bad = random_tensor({4, 3}, 12);
  bad.select(0, 2).select(0, 1).fill_(std::nan(""));
  EXPECT_THROW(cuda::moe_route(SimExec(), bad, Tensor(), RouteParams{.k = 1, .renormalize = true}),
               Error);
}

}  // namespace
}  // namespace reprise::testing
