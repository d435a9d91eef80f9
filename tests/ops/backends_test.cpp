// The op registry drives the comparison of backends: every registered op has
// a case in the table (tests/cases/op_case.h), and every case gives
// the same bits, forward and backward, at every CPU capability this machine
// supports (scalar is the reference), in f32 and f64. The same cases run
// the CUDA kernels against the CPU (bitwise for data movement and random
// ops, within a stated tolerance otherwise): always on the simulator, and
// on a CUDA device when there is one. And the cases reach every kernel
// row (engine/kernels/all.def) that an op calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "autograd/backward.h"
#include "autograd/op_registry.h"
#include "autograd/policy.h"
#include "engine/backend.h"
#include "engine/kernel.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "tests/support/capabilities.h"
#include "tests/support/cuda_sim_backend.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

// A case's inputs in `dtype` (floating inputs converted, the others as they
// are), requiring grad as the f64 originals do, on `device`.
Inputs inputs_as(const OpCase& c, DType dtype, Device device) {
  Inputs out;
  for (const Tensor& t : c.inputs()) {
    if (!t.defined()) {
      out.push_back(t);
      continue;
    }
    Tensor u = (is_floating(t.dtype()) ? t.detach().to(dtype) : t.detach()).to(device);
    if (t.requires_grad()) u.requires_grad(true);
    out.push_back(u);
  }
  return out;
}

// What a run of a case produced, on the host: its outputs, then the
// gradient of weighted_loss (tests/support/gradcheck.h) for each input that
// requires grad.
std::vector<Tensor> run_case(const OpCase& c, const Inputs& inputs) {
  const Outputs out = c.fn(inputs);
  std::vector<Tensor> results;
  for (const Tensor& y : out) results.push_back(y.detach().to(Device::cpu()));
  Inputs diff;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) diff.push_back(t);
  }
  const Tensor loss = weighted_loss(out, output_weights(out));
  if (diff.empty() || !loss.defined()) return results;
  for (const Tensor& g : autograd::grad({loss}, diff, {}, {}, /*allow_unused=*/true)) {
    results.push_back(g.defined() ? g.to(Device::cpu()) : g);
  }
  return results;
}

TEST(OpRegistry, EveryOpHasACaseAndEveryCaseNamesAnOp) {
  std::set<std::string> covered;
  for (const OpCase& c : op_cases()) {
    EXPECT_NE(autograd::find_op(op_of(c)), nullptr)
        << "case '" << c.name << "' names no registered op";
    covered.insert(op_of(c));
  }
  for (const autograd::OpInfo* op : ops::registry::all()) {
    EXPECT_TRUE(covered.count(op->name)) << "op '" << op->name << "' has no case in the table";
    EXPECT_EQ(autograd::find_op(op->name), op) << op->name << " is not registered";
  }
}

// bench_ops times one case per op, on its model-sized inputs.
TEST(OpRegistry, EveryOpHasOneTimedCase) {
  std::map<std::string, int> timed;
  for (const OpCase& c : op_cases()) {
    if (c.perf) ++timed[op_of(c)];
  }
  for (const autograd::OpInfo* op : ops::registry::all())
    EXPECT_EQ(timed[op->name], 1) << "op '" << op->name << "': timed cases";
}

TEST(OpRegistry, UnknownOpNamesAreErrorsListingCloseOnes) {
  expect_error(
      [] {
        autograd::policies::save_ops({"sdpa", "lineer"});
      },
      {"policies::save_ops", "'lineer'", "closest", "linear"});
  expect_error([] { autograd::policies::op_sac({"sdpa"}, "matmull"); },
               {"policies::save_every_nth", "'matmull'", "matmul"});
  EXPECT_NO_THROW(autograd::policies::op_sac({"linear", "sdpa", "sdpa_dropout"}));
}

// The CPU backend, recording which kernels the ops call.
class KernelRecorder final : public Backend {
 public:
  KernelRecorder() : Backend(Device::cpu()) {}
  std::string name() const override { return "kernel recorder"; }
  void* allocate(size_t nbytes) override { return cpu_backend().allocate(nbytes); }
  void release(void* ptr, size_t nbytes) override { cpu_backend().release(ptr, nbytes); }
  void copy_from_host(void* dst, const void* src, size_t nbytes) override {
    cpu_backend().copy_from_host(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, size_t nbytes) override {
    cpu_backend().copy_to_host(dst, src, nbytes);
  }
  KernelSet kernels() const override { return cpu_backend().kernels(); }
#define REPRISE_KERNEL(Ret, name, params, args)          \
  Ret name params override {                             \
    called.set(size_t(Kernel::name));                    \
    return cpu_backend().name(REPRISE_KERNEL_ARGS args); \
  }
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

  KernelSet called;
};

// The op table's cases, forward and backward in f32, reach every kernel
// but those that code outside the ops calls, so that the backend
// comparisons over the cases (below) cover every other kernel a backend
// declares. A new kernel row either gets a case or joins this list with a
// test of its own.
TEST(OpRegistry, TheCasesReachEveryKernelButThoseOfInitNoiseAndOptimizers) {
  KernelRecorder recorder;
  {
    const ScopedCpuBackend use(recorder);
    for (const OpCase& c : op_cases()) run_case(c, inputs_as(c, DType::f32, Device::cpu()));
  }
  KernelSet outside_ops;
  for (const Kernel k : {
           Kernel::fill_uniform, Kernel::fill_normal, Kernel::fill_bernoulli,  // parameter init
           Kernel::fill_trunc_normal,                    // tests/cuda/random_test.cpp
           Kernel::representable, Kernel::perturb_ulps,  // recompute noise: elementwise_test.cpp
           Kernel::chunk_square_sums, Kernel::scale_,    // gradient clipping: rows_test.cpp
           Kernel::adamw_step, Kernel::sgd_step,         // optimizers: random_test.cpp
       })
    outside_ops.set(size_t(k));
  const KernelSet unreached = all_kernels() & ~recorder.called;
  EXPECT_EQ(unreached, outside_ops) << "no op case calls " << kernel_names(unreached)
                                    << "; expected only " << kernel_names(outside_ops);
}

class Backends : public ::testing::TestWithParam<DType> {};

// Each case at every capability against the scalar build, bit for bit.
TEST_P(Backends, EveryCaseHasTheSameBitsAtEveryCpuCapability) {
  if (supported_cpu_capabilities().size() == 1) GTEST_SKIP() << "only the scalar level here";
  for (const OpCase& c : op_cases()) {
    std::vector<Tensor> reference;
    for_each_capability([&](CpuCapability cap) {
      const std::vector<Tensor> got = run_case(c, inputs_as(c, GetParam(), Device::cpu()));
      if (cap == CpuCapability::scalar) {
        reference = got;
        return;
      }
      ASSERT_EQ(got.size(), reference.size()) << c.name;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(same_bits(got[i], reference[i]))
            << c.name << " at " << to_string(cap) << ", result " << i
            << " (the outputs, then the gradients)";
      }
    });
  }
}

// A case's results on a CUDA backend against the CPU's: bitwise for ops
// that move data or draw random numbers, otherwise within 2e-5 relative
// (f32) or 1e-12 (f64) of the largest value, the room that a different
// order of the device's reductions leaves.
void expect_matches_cpu(const OpCase& c, const std::vector<Tensor>& got,
                        const std::vector<Tensor>& cpu, DType dtype, const std::string& where) {
  static const std::set<std::string> bitwise = {
      "reshape",    "transpose", "permute", "slice", "expand", "squeeze",      "unsqueeze",
      "contiguous", "cat",       "split",   "stack", "gather", "index_select", "where",
      "embedding",  "dropout",   "cast",    "neg",   "relu",   "topk",         "max"};
  const double rtol = dtype == DType::f32 ? 2e-5 : 1e-12;
  ASSERT_EQ(got.size(), cpu.size()) << c.name << " on " << where;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (bitwise.count(op_of(c))) {
      EXPECT_TRUE(same_bits(got[i], cpu[i])) << c.name << " on " << where << ", result " << i;
      continue;
    }
    const double scale =
        std::max(1.0, max_abs_diff(cpu[i], Tensor::zeros(cpu[i].shape(), cpu[i].dtype())));
    EXPECT_LE(max_abs_diff(got[i], cpu[i]), rtol * scale)
        << c.name << " on " << where << ", result " << i;
  }
}

TEST_P(Backends, EveryCaseOnCudaMatchesTheCpu) {
  if (cuda_device_count() == 0) {
    GTEST_SKIP() << (built_with_cuda() ? "no CUDA device present" : "built without CUDA");
  }
  for (const OpCase& c : op_cases()) {
    const std::vector<Tensor> cpu = run_case(c, inputs_as(c, GetParam(), Device::cpu()));
    const std::vector<Tensor> gpu = run_case(c, inputs_as(c, GetParam(), Device::cuda(0)));
    expect_matches_cpu(c, gpu, cpu, GetParam(), "cuda");
  }
}

// Every case's CUDA kernels on the simulator, forward and backward, give
// the CPU's bits: the kernels share the CPU's functors, sum in the CPU's
// orders, and the simulator's products are the CPU's FMA chains and its
// exp, log and tanh the C library's. And the same bits again with the
// simulator's threads and blocks in reverse order: no kernel's threads race.
TEST_P(Backends, EveryCaseOnTheCudaSimulatorHasTheCpusBits) {
  CudaSimBackend in_order(false), reversed(true);
  for (const OpCase& c : op_cases()) {
    const std::vector<Tensor> cpu = run_case(c, inputs_as(c, GetParam(), Device::cpu()));
    for (CudaSimBackend* sim : {&in_order, &reversed}) {
      ScopedCpuBackend use(*sim);
      const std::vector<Tensor> got = run_case(c, inputs_as(c, GetParam(), Device::cpu()));
      ASSERT_EQ(got.size(), cpu.size()) << c.name;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(same_bits(got[i], cpu[i]))
            << c.name << " on " << sim->name() << ", result " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Backends, ::testing::Values(DType::f32, DType::f64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// A build without CUDA still has cuda devices as values; asking one for
// memory or a kernel is an Error that says why.
TEST(CudaStub, WithoutCudaEveryRequestIsAClearError) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA";
  EXPECT_EQ(cuda_device_count(), 0);
  expect_error([] { Tensor::zeros({4}, DType::f32, Device::cuda(0)); },
               {"allocate", "cuda:0", "built without CUDA"});
  expect_error(
      [] {
        backend(Device::cuda(1)).matmul(Tensor::ones({2, 2}), Tensor::ones({2, 2}));
      },
      {"matmul", "cuda:1", "built without CUDA"});
  expect_error([] { Tensor::ones({3}).to(Device::cuda(0)); }, {"cuda:0", "built without CUDA"});
}

}  // namespace
}  // namespace reprise::testing
