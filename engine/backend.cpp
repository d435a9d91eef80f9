#include "engine/backend.h"

#include <atomic>

namespace reprise {

namespace {
std::atomic<Backend*> cpu_override{nullptr};
}  // namespace

Backend& backend(Device device) {
  if (!device.is_cpu()) return cuda_backend(device.index());
  Backend* b = cpu_override.load(std::memory_order_relaxed);
  return b ? *b : cpu_backend();
}

ScopedCpuBackend::ScopedCpuBackend(Backend& b) : previous_(nullptr) {
  REPRISE_CHECK(b.device().is_cpu(), "ScopedCpuBackend: ", b.name(), " is not a CPU backend");
  previous_ = cpu_override.exchange(&b);
}
ScopedCpuBackend::~ScopedCpuBackend() { cpu_override.store(previous_); }

std::string Backend::name() const { return to_string(device_); }

std::string Backend::missing_reason() const { return "this backend has no such kernel"; }

KernelSet Backend::kernels() const { return {}; }

void Backend::require(const KernelSet& needed, const std::string& what) const {
  const KernelSet lacking = needed & ~kernels();
  REPRISE_CHECK(lacking.none(), name(), " lacks ", lacking.count(), " of the ", needed.count(),
                " kernels ", what, " needs: ", kernel_names(lacking), " (", missing_reason(), ")");
}

void Backend::missing(const char* kernel) const {
  REPRISE_FAIL(kernel, " on ", name(), ": ", missing_reason());
}

// Memory a backend does not provide raises.
void* Backend::allocate(size_t) { missing("allocate"); }
void Backend::release(void*, size_t) { missing("release"); }
void Backend::copy_from_host(void*, const void*, size_t) { missing("copy_from_host"); }
void Backend::copy_to_host(void*, const void*, size_t) { missing("copy_to_host"); }
// Not kernels: a backend without a queue, an allocator cache or a known peak
// has nothing to wait for or report.
void Backend::synchronize() {}
DeviceMemoryInfo Backend::memory_info() { return {}; }
double Backend::peak_flops(DType) { return 0; }

// Every kernel a backend does not override raises.
#define REPRISE_KERNEL(Ret, name, params, args) \
  Ret Backend::name params { missing(#name); }
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise
