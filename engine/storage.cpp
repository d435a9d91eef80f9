#include "engine/storage.h"

#include <new>

#include "base/error.h"
#include "engine/backend.h"
#include "engine/memory_limit.h"

namespace reprise {
namespace {

// nbytes from the device's backend, or an Error naming what asked for it.
void* allocate_or_raise(size_t nbytes, Device device) {
  memory_limit::check(nbytes, device);
  void* data = nullptr;
  try {
    data = backend(device).allocate(nbytes);
  } catch (const std::bad_alloc&) {
    // data stays nullptr: the Error below names what asked for it
  }
  if (data == nullptr) memory_limit::raise_out_of_memory(nbytes, device, 0);
  return data;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, MemoryKind kind) {
  void* data = allocate_or_raise(nbytes, device);
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
  if (!resident()) return;
  memory_stats::add(device_, kind(), -int64_t(nbytes_));
  if (external_release_) {
    external_release_();
  } else {
    backend(device_).release(data_, nbytes_);
  }
}

void Storage::evict() {
  REPRISE_CHECK(!external_release_, "Storage::evict: memory wrapped from elsewhere (", nbytes_,
                " bytes on ", to_string(device_), ") cannot be evicted");
  if (!resident()) return;
  memory_stats::add(device_, kind(), -int64_t(nbytes_));
  backend(device_).release(data_, nbytes_);
  data_ = nullptr;
}

void Storage::reload() {
  if (resident()) return;
  data_ = allocate_or_raise(nbytes_, device_);
  memory_stats::add(device_, kind(), int64_t(nbytes_));
}

MemoryKind Storage::kind() const {
  if (saved_refs_ > 0 && base_kind_ == MemoryKind::temporary) return MemoryKind::saved_activation;
  return base_kind_;
}

void Storage::move_accounting(MemoryKind from, MemoryKind to) {
  if (from == to || !resident()) return;
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
