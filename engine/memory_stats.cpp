#include "engine/memory_stats.h"

#include <algorithm>
#include <mutex>
#include <sstream>

#include "base/error.h"

namespace reprise {

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::temporary:
      return "temporary";
    case MemoryKind::parameter:
      return "parameter";
    case MemoryKind::gradient:
      return "gradient";
    case MemoryKind::optimizer_state:
      return "optimizer_state";
    case MemoryKind::saved_activation:
      return "saved_activation";
  }
  return "unknown";
}

std::string MemorySnapshot::to_string() const {
  std::ostringstream s;
  s << "total live " << total.live << " peak " << total.peak;
  for (size_t k = 0; k < kMemoryKindCount; ++k) {
    s << "; " << memory_kind_name(MemoryKind(k)) << " live " << by_kind[k].live << " peak "
      << by_kind[k].peak;
  }
  return s.str();
}

namespace memory_stats {
namespace {

constexpr int kMaxDevices = 17;  // cpu + 16 CUDA devices

struct DeviceCounters {
  std::mutex mutex;
  MemorySnapshot snap;
};

DeviceCounters& counters(Device d) {
  static DeviceCounters all[kMaxDevices];
  int slot = d.is_cpu() ? 0 : 1 + d.index();
  REPRISE_CHECK(slot >= 0 && slot < kMaxDevices, "memory_stats: device ", reprise::to_string(d),
                " is out of range");
  return all[slot];
}

void bump(MemoryCounters& c, int64_t bytes) {
  c.live += bytes;
  c.peak = std::max(c.peak, c.live);
}

}  // namespace

MemorySnapshot snapshot(Device d) {
  auto& c = counters(d);
  std::lock_guard lock(c.mutex);
  return c.snap;
}

void reset_peaks(Device d) {
  auto& c = counters(d);
  std::lock_guard lock(c.mutex);
  for (auto& k : c.snap.by_kind) k.peak = k.live;
  c.snap.total.peak = c.snap.total.live;
}

void add(Device d, MemoryKind k, int64_t bytes) {
  auto& c = counters(d);
  std::lock_guard lock(c.mutex);
  bump(c.snap.by_kind[size_t(k)], bytes);
  bump(c.snap.total, bytes);
}

}  // namespace memory_stats
}  // namespace reprise
