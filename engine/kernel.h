#pragma once
// The kernels a Backend has (engine/backend.h), as values: one Kernel per
// row of engine/kernels/all.def, in its order, and sets of them. A backend
// says which it implements (Backend::kernels), so a device that lacks one
// is found before a run starts (Backend::require), not inside it.

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>

namespace reprise {

enum class Kernel : uint8_t {
#define REPRISE_KERNEL(Ret, name, params, args) name,
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL
};

inline constexpr size_t kKernelCount = 0
#define REPRISE_KERNEL(Ret, name, params, args) +1
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL
    ;

using KernelSet = std::bitset<kKernelCount>;

// The row's name: "matmul", "scale_".
const char* kernel_name(Kernel k);

// Every row.
KernelSet all_kernels();

// "rmsnorm, softmax and matmul": the kernels of `set`, in row order.
std::string kernel_names(const KernelSet& set);

}  // namespace reprise
