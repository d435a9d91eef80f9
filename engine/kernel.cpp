#include "engine/kernel.h"

namespace reprise {

const char* kernel_name(Kernel k) {
  static constexpr const char* kNames[] = {
#define REPRISE_KERNEL(Ret, name, params, args) #name,
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL
  };
  static_assert(std::size(kNames) == kKernelCount);
  return kNames[size_t(k)];
}

KernelSet all_kernels() { return KernelSet().set(); }

std::string kernel_names(const KernelSet& set) {
  std::string out;
  size_t listed = 0;
  for (size_t i = 0; i < kKernelCount; ++i) {
    if (!set.test(i)) continue;
    ++listed;
    if (listed > 1) out += listed == set.count() ? " and " : ", ";
    out += kernel_name(Kernel(i));
  }
  return out;
}

}  // namespace reprise
