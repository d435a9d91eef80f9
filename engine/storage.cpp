#include "engine/storage.h"

#include <cstdlib>

#include "engine/cuda_runtime.h"
#include "engine/error.h"

namespace reprise {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, MemoryKind kind) {
  void* data = nullptr;
  if (device.is_cpu()) {
    // aligned_alloc needs a size that is a multiple of the alignment.
    size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    data = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    REPRISE_CHECK(data != nullptr, "Storage::allocate: out of host memory allocating ", nbytes,
                  " bytes");
  } else {
    data = cuda_runtime::allocate(nbytes, device.index());
  }
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, kind));
}

Storage::Storage(void* data, size_t nbytes, Device device, MemoryKind kind)
    : data_(data), nbytes_(nbytes), device_(device), base_kind_(kind) {
  memory_stats::add(device_, base_kind_, int64_t(nbytes_));
}

Storage::~Storage() {
  memory_stats::add(device_, kind(), -int64_t(nbytes_));
  if (device_.is_cpu()) {
    std::free(data_);
  } else {
    cuda_runtime::release(data_, device_.index());
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
