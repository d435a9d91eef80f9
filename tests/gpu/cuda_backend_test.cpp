// The CUDA backend on a device: kernels whose math is IEEE operations and
// exp_poly give the CPU's bits at sizes a model uses (attention, dropout,
// softmax, the norms, the sorted-segment sums), products are the same bits
// on every run, the allocator reuses and reports, running out of memory is
// a clear Error, and a side stream works. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cuda/device_memory.h"
#include "cuda/sdpa_cudnn.h"
#include "cuda/stream.h"
#include "engine/backend.h"
#include "engine/memory_stats.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"
#include "tests/support/gradcheck.h"
#include "tests/support/tiny_train.h"

namespace reprise::testing {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!built_with_cuda()) GTEST_SKIP() << "built without CUDA";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  }
};

Tensor rand(const Shape& shape, uint64_t seed, double lo = -2, double hi = 2) {
  return uniform(shape, lo, hi, seed, DType::f32);
}

TEST_F(CudaBackendTest, AttentionGivesTheCpusBitsWithDropout) {
  // (B, Hq, T, D) with grouped kv heads, causal, dropout from a reservation.
  const Tensor q = rand({2, 8, 200, 64}, 1), k = rand({2, 2, 200, 64}, 2);
  const Tensor v = rand({2, 2, 200, 64}, 3), dout = rand({2, 8, 200, 64}, 4);
  AttentionParams params{.scale = 0.125, .causal = true};
  params.dropout = AttentionDropout{
      .words = {.seed = 1, .subsequence = 2, .offset = 3, .count = uint64_t(1) << 40}, .p = 0.1};
  Backend& cpu = cpu_backend();
  Backend& gpu = backend(kGpu);
  const Tensors want = cpu.sdpa(q, k, v, params);
  const Tensors got = gpu.sdpa(q.to(kGpu), k.to(kGpu), v.to(kGpu), params);
  EXPECT_TRUE(same_bits(got[0], want[0])) << "out";
  EXPECT_LE(max_abs_diff(got[1].to(Device::cpu()), want[1]), 1e-5) << "lse (the log's last bits)";
  // Backward from the CPU's lse: the same bits.
  const Tensors gw = cpu.sdpa_backward(q, k, v, want[0], want[1], dout, params, true, true);
  const Tensors gg = gpu.sdpa_backward(q.to(kGpu), k.to(kGpu), v.to(kGpu), want[0].to(kGpu),
                                       want[1].to(kGpu), dout.to(kGpu), params, true, true);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(gg[size_t(i)], gw[size_t(i)])) << "grad " << i;
}

// bf16 attention runs on cuDNN's fused kernel: the same bits on every run
// (forward and the deterministic backward, with and without dropout), the
// same dropout mask for the same reservation and another for the next one,
// and close to the CPU's bf16 attention (the f32 kernel on the widened
// inputs): cuDNN rounds the probabilities to bf16 before P V and sums in
// its own order, so outputs differ by a few bf16 ulps (we allow 2^-6
// relative to the largest output, gradients 2% in L2) and lse, kept in f32,
// by far less.
TEST_F(CudaBackendTest, Bf16AttentionRunsOnCudnnDeterministicallyAndNearTheCpu) {
  if (!cuda::built_with_cudnn_attention()) GTEST_SKIP() << "built without the cuDNN frontend";
  Backend& gpu = backend(kGpu);
  const DType bf16 = DType::bf16;
  const Tensor q = rand({2, 8, 256, 64}, 20).to(bf16), k = rand({2, 2, 256, 64}, 21).to(bf16);
  const Tensor v = rand({2, 2, 256, 64}, 22).to(bf16), dout = rand({2, 8, 256, 64}, 23).to(bf16);
  const Tensor qg = q.to(kGpu), kg = k.to(kGpu), vg = v.to(kGpu), dg = dout.to(kGpu);
  AttentionParams params{.scale = 0.125, .causal = true};
  auto run = [&](const AttentionParams& p) {
    Tensors r = gpu.sdpa(qg, kg, vg, p);
    for (const Tensor& g : gpu.sdpa_backward(qg, kg, vg, r[0], r[1], dg, p, true, true))
      r.push_back(g);
    return r;  // out, lse, dq, dk, dv
  };
  auto same = [](const Tensors& a, const Tensors& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (!same_bits(a[i], b[i])) return false;
    }
    return true;
  };
  const Tensors first = run(params);
  EXPECT_EQ(first[0].dtype(), bf16);
  EXPECT_EQ(first[1].dtype(), DType::f32);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(run(params), first)) << "run " << i;

  Backend& cpu = cpu_backend();
  const Tensors want = cpu.sdpa(q, k, v, params);
  const Tensors want_grads = cpu.sdpa_backward(q, k, v, want[0], want[1], dout, params, true, true);
  const Tensor out = first[0].to(Device::cpu()).to(DType::f32);
  EXPECT_LE(max_abs_diff(out, want[0].to(DType::f32)), std::ldexp(max_abs(out), -6));
  EXPECT_LE(max_abs_diff(first[1].to(Device::cpu()), want[1]), 1e-3);
  for (int i = 0; i < 3; ++i) {
    const Tensor got = first[2 + i].to(Device::cpu()).to(DType::f32);
    const Tensor ref = want_grads[size_t(i)].to(DType::f32);
    const Tensor diff = ops::sub(got, ref);
    EXPECT_LE(std::sqrt(ops::sum(ops::mul(diff, diff)).item<double>() /
                        ops::sum(ops::mul(ref, ref)).item<double>()),
              0.02)
        << "gradient " << i;
  }

  params.dropout = AttentionDropout{
      .words = {.seed = 5, .subsequence = 1, .offset = 0, .count = 1 << 20}, .p = 0.1};
  const Tensors dropped = run(params);
  EXPECT_TRUE(same(run(params), dropped));
  EXPECT_FALSE(same_bits(dropped[0], first[0]));
  AttentionParams next = params;
  next.dropout->words.offset = 1 << 20;
  EXPECT_FALSE(same_bits(run(next)[0], dropped[0]));
}

TEST_F(CudaBackendTest, RowKernelsDropoutAndSegmentSumsGiveTheCpusBits) {
  Backend& cpu = cpu_backend();
  Backend& gpu = backend(kGpu);
  const Tensor x = rand({1000, 4096}, 5), w = rand({4096}, 6), g = rand({1000, 4096}, 7);
  const Tensor xg = x.to(kGpu), wg = w.to(kGpu), gg = g.to(kGpu);
  EXPECT_TRUE(
      same_bits(gpu.softmax(SoftmaxKind::softmax, xg), cpu.softmax(SoftmaxKind::softmax, x)));
  const Tensors rc = cpu.rmsnorm(x, w, 1e-6), rg = gpu.rmsnorm(xg, wg, 1e-6);
  EXPECT_TRUE(same_bits(rg[0], rc[0]));
  const Tensors bc = cpu.rmsnorm_backward(x, w, rc[1], g, true, true);
  const Tensors bg = gpu.rmsnorm_backward(xg, wg, rg[1], gg, true, true);
  EXPECT_TRUE(same_bits(bg[0], bc[0]));
  EXPECT_TRUE(same_bits(bg[1], bc[1]));
  const rng::Reservation r{.seed = 9, .subsequence = 1, .offset = 5, .count = 1 << 23};
  EXPECT_TRUE(same_bits(gpu.dropout(xg, 0.3, r), cpu.dropout(x, 0.3, r)));
  // Embedding gradient of 4096 ids over a vocabulary of 512: many repeats.
  std::vector<int64_t> ids(4096);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 2654435761u) % 512);
  const Tensor id = Tensor::from_vector(ids, {4096}), ge = rand({4096, 64}, 8);
  EXPECT_TRUE(same_bits(gpu.embedding_backward(ge.to(kGpu), id.to(kGpu), 512),
                        cpu.embedding_backward(ge, id, 512)));
}

TEST_F(CudaBackendTest, ProductsAreTheSameBitsOnEveryRunAndCloseToTheCpu) {
  Backend& gpu = backend(kGpu);
  const Tensor a = rand({4, 257, 1031}, 10), b = rand({1031, 259}, 11);
  const Tensor first = gpu.matmul(a.to(kGpu), b.to(kGpu)).to(Device::cpu());
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(same_bits(gpu.matmul(a.to(kGpu), b.to(kGpu)), first)) << "run " << run;
  }
  const Tensor want = cpu_backend().matmul(a, b);
  EXPECT_LE(max_abs_diff(first, want), 1e-3);
  // bf16 inputs accumulate in f32 and round once to bf16, like the CPU's
  // bf16 product; only the f32 summation order differs. So each element is
  // within one bf16 ulp (at most 2^-7 relative) of the CPU's, plus the f32
  // order's error, which stays below K x 4 x 2^-24 for terms of |a b| < 4.
  const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  const Tensor got16 = gpu.matmul(a16.to(kGpu), b16.to(kGpu));
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(same_bits(gpu.matmul(a16.to(kGpu), b16.to(kGpu)), got16)) << "bf16 run " << run;
  }
  const std::vector<float> g = got16.to(Device::cpu()).to_vector<float>(),
                           w = cpu_backend().matmul(a16, b16).to_vector<float>();
  const double order = 1031 * 4 * std::ldexp(1.0, -24);
  int64_t far = 0;
  for (size_t i = 0; i < g.size(); ++i)
    far += std::abs(double(g[i]) - w[i]) > std::ldexp(std::abs(double(w[i])), -7) + order;
  EXPECT_EQ(far, 0);
}

TEST_F(CudaBackendTest, TheAllocatorReusesBlocksAndReportsWhatItHolds) {
  cuda::DeviceMemory& memory = cuda::DeviceMemory::of(kGpu);
  backend(kGpu).synchronize();
  const int64_t hits = memory.stats().cache_hits;
  { Tensor t = Tensor::empty({1 << 20}, DType::f32, kGpu); }
  { Tensor t = Tensor::empty({1 << 20}, DType::f32, kGpu); }
  EXPECT_GT(memory.stats().cache_hits, hits);
  const DeviceMemoryInfo info = backend(kGpu).memory_info();
  EXPECT_GE(info.reserved, info.cached);
  EXPECT_GT(info.capacity, 0);
  expect_error(
      [] { Tensor::empty({int64_t(1) << 50}, DType::f32, kGpu); },
      {"out of memory", "cuda:0", "4503599627370496 bytes", "live tensors", "the allocator holds"});
}

TEST_F(CudaBackendTest, WorkOnASideStreamAndLargeTransfers) {
  const Tensor big = rand({3, 1 << 20}, 12);  // 12 MiB: several staging chunks
  cuda::Stream side(kGpu);
  Tensor doubled;
  {
    const cuda::StreamGuard guard(side);
    const Tensor g = big.to(kGpu);
    doubled = backend(kGpu).unary(UnaryOp::mul_scalar, 2.0, g);
  }
  side.synchronize();
  EXPECT_TRUE(same_bits(doubled, cpu_backend().unary(UnaryOp::mul_scalar, 2.0, big)));
}

}  // namespace
}  // namespace reprise::testing
