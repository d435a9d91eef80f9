#pragma once
// Live and peak bytes per device, split by what the memory holds. Storage
// updates these counters on allocation, free and change of kind, so the
// figures a checkpointing policy claims can be read off directly.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/device.h"

namespace reprise {

enum class MemoryKind : uint8_t {
  temporary,         // everything not classified below
  parameter,         // model weights
  gradient,          // parameter gradients
  optimizer_state,   // e.g. Adam moments
  saved_activation,  // tensors the tape keeps for backward
};
inline constexpr size_t kMemoryKindCount = 5;
const char* memory_kind_name(MemoryKind k);

struct MemoryCounters {
  int64_t live = 0;
  int64_t peak = 0;
};

struct MemorySnapshot {
  std::array<MemoryCounters, kMemoryKindCount> by_kind{};
  MemoryCounters total;

  const MemoryCounters& operator[](MemoryKind k) const { return by_kind[size_t(k)]; }
  std::string to_string() const;
};

namespace memory_stats {

// Counters for one device. CPU is device index 0; CUDA devices follow.
MemorySnapshot snapshot(Device d = Device::cpu());

// Sets every peak to the current live value (start of a measured region).
void reset_peaks(Device d = Device::cpu());

// Called by Storage. bytes may be negative (a release).
void add(Device d, MemoryKind k, int64_t bytes);

}  // namespace memory_stats

}  // namespace reprise
