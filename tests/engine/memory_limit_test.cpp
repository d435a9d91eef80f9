// Memory limits (engine/memory_limit.h): REPRISE_MAX_MEMORY's values, and
// the OutOfMemoryError an allocation past the cap or beyond the device
// raises instead of std::bad_alloc, naming the op and scope running, the
// shape and bytes asked and the live bytes by kind.
#include "engine/memory_limit.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/backward.h"
#include "autograd/scope.h"
#include "engine/tensor.h"
#include "ops/matmul.h"
#include "ops/reduce.h"

namespace reprise {
namespace {

// Caps the CPU at its live bytes plus `headroom` while alive.
class CapAbove {
 public:
  explicit CapAbove(int64_t headroom) {
    memory_limit::set_max_memory(memory_stats::snapshot().total.live + headroom);
  }
  ~CapAbove() { memory_limit::set_max_memory(0); }
  CapAbove(const CapAbove&) = delete;
  CapAbove& operator=(const CapAbove&) = delete;
};

// The OutOfMemoryError f raises; a test failure when it raises none.
template <class F>
OutOfMemoryError out_of_memory(F&& f) {
  try {
    f();
  } catch (const OutOfMemoryError& e) {
    return e;
  }
  ADD_FAILURE() << "no OutOfMemoryError raised";
  return OutOfMemoryError("no error", "", Device::cpu(), 0, 0, {});
}

void expect_parts(const std::string& what, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' is not in: " << what;
  }
}

TEST(MemoryLimit, ParsesBytesAndSuffixes) {
  EXPECT_EQ(memory_limit::parse_bytes("4096", "V"), 4096);
  EXPECT_EQ(memory_limit::parse_bytes("0", "V"), 0);
  EXPECT_EQ(memory_limit::parse_bytes("3k", "V"), 3 << 10);
  EXPECT_EQ(memory_limit::parse_bytes("512M", "V"), int64_t(512) << 20);
  EXPECT_EQ(memory_limit::parse_bytes("2G", "V"), int64_t(2) << 30);
  EXPECT_EQ(memory_limit::parse_bytes("1T", "V"), int64_t(1) << 40);
}

TEST(MemoryLimit, MalformedValuesAreErrorsNamingTheVariable) {
  for (const char* bad :
       {"", "M", "12Q", "-5", "1.5G", "2 G", "99999999999999999999", "9000000000T"}) {
    try {
      memory_limit::parse_bytes(bad, "REPRISE_MAX_MEMORY");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      expect_parts(e.what(), {"REPRISE_MAX_MEMORY", "'" + std::string(bad) + "'", "512M"});
    }
  }
  EXPECT_THROW(memory_limit::set_max_memory(-1), Error);
}

TEST(MemoryLimit, AnAllocationPastTheCapNamesTheOpScopeShapeAndLiveBytes) {
  const Tensor a = Tensor::ones({256, 256}, DType::f32), b = Tensor::ones({256, 256}, DType::f32);
  const CapAbove cap(100 << 10);  // less than matmul's 256 KiB output
  const OutOfMemoryError e = out_of_memory([&] {
    autograd::Scope layer("layers.3.attn");
    ops::matmul(a, b);
  });
  expect_parts(e.what(), {"out of memory on cpu", "matmul (forward) at layers.3.attn",
                          "262144 bytes", "[256, 256] f32", "REPRISE_MAX_MEMORY",
                          "live tensors: total live", "parameter live", "saved_activation live"});
  EXPECT_EQ(e.requested, 262144);
  EXPECT_EQ(e.limit, memory_limit::max_memory());
  EXPECT_GT(e.memory.total.live + e.requested, e.limit);
  // Below the cap, allocations go on.
  EXPECT_NO_THROW(Tensor::empty({1024}, DType::f32));
}

TEST(MemoryLimit, ABackwardRuleNamesItsOpAndTheOpItCalls) {
  Tensor w = Tensor::ones({256, 256}, DType::f32);
  w.requires_grad(true);
  const Tensor x = Tensor::ones({256, 256}, DType::f32);
  Tensor loss;
  {
    autograd::Scope mlp("mlp");
    loss = ops::sum(ops::matmul(x, w));
  }
  const CapAbove cap(100 << 10);
  const OutOfMemoryError e = out_of_memory([&] { autograd::backward(loss); });
  expect_parts(e.what(), {"(backward)", "262144 bytes", "REPRISE_MAX_MEMORY"});
}

TEST(MemoryLimit, NoCapMeansNoLimit) {
  memory_limit::set_max_memory(0);
  EXPECT_EQ(memory_limit::max_memory(), 0);
  EXPECT_NO_THROW(Tensor::empty({1 << 20}, DType::f32));
}

// The sanitizers' allocators abort on a request this large instead of
// returning nullptr (allocator_may_return_null=0).
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(MemoryLimit, AnAllocationTheDeviceCannotServeIsAnErrorNotBadAlloc) {
  const OutOfMemoryError e = out_of_memory([] { Tensor::empty({int64_t(1) << 50}, DType::f32); });
  expect_parts(e.what(), {"out of memory on cpu", "no op", "4503599627370496 bytes",
                          "the device has no room", "live tensors"});
  EXPECT_EQ(e.limit, 0);
}
#endif

}  // namespace
}  // namespace reprise
