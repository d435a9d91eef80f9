#include "engine/storage.h"

#include <new>

#include "engine/backend.h"
#include "engine/current_op.h"
#include "engine/error.h"
#include "engine/memory_limit.h"

namespace reprise {
namespace {

// limit: the cap the allocation would pass, or 0 when the device had no room.
[[noreturn]] void raise_out_of_memory(size_t nbytes, Device device, int64_t limit) {
  const MemorySnapshot memory = memory_stats::snapshot(device);
  std::string request = detail::concat("out of memory on ", to_string(device), ": ",
                                       describe_current_op(), " asked for ", nbytes, " bytes");
  std::string context =
      limit > 0 ? detail::concat(", which would pass REPRISE_MAX_MEMORY (", limit, " bytes)")
                : std::string(", and the device has no room");
  context += "; live tensors: " + memory.to_string();
  if (limit == 0) {
    const DeviceMemoryInfo info = backend(device).memory_info();
    if (info.capacity > 0) {
      context += detail::concat("; the allocator holds ", info.reserved, " bytes (", info.cached,
                                " cached); the device has ", info.device_free, " of ",
                                info.capacity, " bytes free");
    }
  }
  throw OutOfMemoryError(std::move(request), std::move(context), device, int64_t(nbytes), limit,
                         memory);
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, MemoryKind kind) {
  if (const int64_t cap = memory_limit::max_memory(); cap != 0) [[unlikely]] {
    if (memory_stats::snapshot(device).total.live + int64_t(nbytes) > cap)
      raise_out_of_memory(nbytes, device, cap);
  }
  void* data = nullptr;
  try {
    data = backend(device).allocate(nbytes);
  } catch (const std::bad_alloc&) {
    data = nullptr;  // raised below, with what the Error names
  }
  if (data == nullptr) raise_out_of_memory(nbytes, device, 0);
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, kind));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device,
                                       std::function<void()> release) {
  auto storage = std::shared_ptr<Storage>(new Storage(data, nbytes, device, MemoryKind::temporary));
  storage->external_release_ = std::move(release);
  return storage;
}

Storage::Storage(void* data, size_t nbytes, Device device, MemoryKind kind)
    : data_(data), nbytes_(nbytes), device_(device), base_kind_(kind) {
  memory_stats::add(device_, base_kind_, int64_t(nbytes_));
}

Storage::~Storage() {
  memory_stats::add(device_, kind(), -int64_t(nbytes_));
  if (external_release_) {
    external_release_();
  } else {
    backend(device_).release(data_, nbytes_);
  }
}

MemoryKind Storage::kind() const {
  if (saved_refs_ > 0 && base_kind_ == MemoryKind::temporary) return MemoryKind::saved_activation;
  return base_kind_;
}

void Storage::move_accounting(MemoryKind from, MemoryKind to) {
  if (from == to) return;
  memory_stats::add(device_, from, -int64_t(nbytes_));
  memory_stats::add(device_, to, int64_t(nbytes_));
}

void Storage::set_kind(MemoryKind kind) {
  MemoryKind before = this->kind();
  base_kind_ = kind;
  move_accounting(before, this->kind());
}

void Storage::retain_saved() {
  MemoryKind before = kind();
  ++saved_refs_;
  move_accounting(before, kind());
}

void Storage::release_saved() {
  MemoryKind before = kind();
  --saved_refs_;
  move_accounting(before, kind());
}

}  // namespace reprise
