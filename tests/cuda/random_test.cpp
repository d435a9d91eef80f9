// Random fills, dropout, the optimizer updates and rotary of the CUDA
// backend, simulated, against the CPU backend: a reservation gives the
// CPU's bits, also when it does not start on a Philox block.
#include "cuda/kernels/random.h"

#include <gtest/gtest.h>

#include "cuda/kernels/optim.h"
#include "cuda/kernels/rotary.h"
#include "engine/backend.h"
#include "ops/rotary.h"
#include "tests/cuda/sim_support.h"

namespace reprise::testing {
namespace {

using cuda::SimExec;

rng::Reservation reservation(uint64_t offset) {
  return {.seed = 0x1234'5678'9abcull, .subsequence = 7, .offset = offset, .count = 1 << 20};
}

TEST(CudaSimRandom, FillsAndDropoutMatchTheCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (uint64_t offset : {uint64_t(0), uint64_t(5), uint64_t(1) << 33}) {
      for (int64_t n : {int64_t(1), int64_t(7), int64_t(1001)}) {
        const rng::Reservation r = reservation(offset);
        const Tensor x = random_tensor({n}, 1, dtype);
        std::vector<Tensor> want(3);
        for (Tensor& t : want) t = Tensor::empty({n}, dtype);
        cpu_backend().fill_uniform(want[0], r, -0.5, 3);
        cpu_backend().fill_normal(want[1], r, 1, 0.25);
        cpu_backend().fill_bernoulli(want[2], r, 0.3);
        want.push_back(cpu_backend().dropout(x, 0.4, r));
        const auto got = simulate([&](const SimExec& ex) {
          std::vector<Tensor> out(3);
          for (Tensor& t : out) t = Tensor::empty({n}, dtype);
          cuda::fill_uniform(ex, out[0], r, -0.5, 3);
          cuda::fill_normal(ex, out[1], r, 1, 0.25);
          cuda::fill_bernoulli(ex, out[2], r, 0.3);
          out.push_back(cuda::dropout(ex, x, 0.4, r));
          return out;
        });
        expect_same(got, want,
                    std::string(dtype_name(dtype)) + " offset " + std::to_string(offset) + " n " +
                        std::to_string(n));
      }
    }
  }
}

TEST(CudaSimRandom, AShortReservationIsAnError) {
  rng::Reservation r = reservation(0);
  r.count = 3;
  EXPECT_THROW(cuda::fill_uniform(SimExec(), Tensor::empty({4}), r, 0, 1), Error);
}

TEST(CudaSimOptim, UpdatesMatchTheCpu) {
  const Tensor w0 = random_tensor({1000}, 2), g = random_tensor({1000}, 3);
  const Tensor m0 = random_tensor({1000}, 4), v0 = random_tensor({1000}, 5, DType::f32, 0, 1);
  const AdamWStep adam{.decay = true,
                       .shrink = 0.999f,
                       .w1 = 0.1f,
                       .b2 = 0.999f,
                       .w2 = 0.001f,
                       .neg_step = -3e-3f,
                       .bc2_sqrt = 0.3f,
                       .eps = 1e-8f};
  const SgdStep sgd{.wd = 0.01f,
                    .mu = 0.9f,
                    .keep = 0.9f,
                    .neg_lr = -0.1f,
                    .momentum = true,
                    .first = false,
                    .nesterov = true};
  auto run = [&](auto adamw, auto sgd_step, auto scale) {
    Tensor w = w0.clone(), m = m0.clone(), v = v0.clone(), w2 = w0.clone(), buf = m0.clone();
    adamw(w, m, v);
    sgd_step(w2, buf);
    scale(w2);
    return std::vector<Tensor>{w, m, v, w2, buf};
  };
  const auto want =
      run([&](auto& w, auto& m, auto& v) { cpu_backend().adamw_step(w, g, m, v, adam); },
          [&](auto& w, auto& b) { cpu_backend().sgd_step(w, g, b, sgd); },
          [&](auto& w) { cpu_backend().scale_(w, 0.37); });
  const auto got = simulate([&](const SimExec& ex) {
    return run([&](auto& w, auto& m, auto& v) { cuda::adamw_step(ex, w, g, m, v, adam); },
               [&](auto& w, auto& b) { cuda::sgd_step(ex, w, g, b, sgd); },
               [&](auto& w) { cuda::scale_(ex, w, 0.37); });
  });
  expect_same(got, want, "optimizers");
}

TEST(CudaSimRotary, MatchesTheCpuOnTheSimulatorsLibm) {
  for (DType dtype : {DType::f32, DType::f64}) {
    // (B, H, T, D) as the transpose of (B, T, H, D), as attention makes it.
    const Tensor x = random_tensor({2, 5, 3, 8}, 6, dtype).transpose(1, 2);
    const Tensor shared = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4}, {5});
    const Tensor per_batch = Tensor::from_vector<int64_t>({3, 4, 5, 6, 7, 0, 2, 4, 6, 8}, {2, 5});
    // The default frequencies, and scaled ones with YaRN's attention factor.
    const Tensor inv_freq = ops::rope_inv_freq(8, 10000.0, dtype);
    const Tensor scaled = random_tensor({4}, 7, dtype, 0.01, 1.0);
    for (const auto& [freq, scaling] : {std::pair{inv_freq, 1.0}, std::pair{scaled, 1.17}}) {
      for (const Tensor& pos : {shared, per_batch}) {
        for (int sign : {1, -1}) {
          const Tensor want = cpu_backend().rotary(x, pos, freq, scaling, sign);
          const auto got = simulate([&](const SimExec& ex) {
            return std::vector<Tensor>{cuda::rotary(ex, x, pos, freq, scaling, sign)};
          });
          expect_same(got, {want}, dtype_name(dtype));
        }
      }
    }
  }
}

}  // namespace
}  // namespace reprise::testing
