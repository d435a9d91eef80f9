#pragma once
// A Storage is one allocation on one device. Tensors are views into a
// Storage; all views of one storage share its version counter, which in-place
// writes bump so that the tape can detect a saved tensor that was modified.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/device.h"
#include "engine/memory_stats.h"

namespace reprise {

class Storage {
 public:
  // CPU memory is 64-byte aligned (one cache line, one AVX-512 register).
  static constexpr size_t kAlignment = 64;

  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device,
                                           MemoryKind kind = MemoryKind::temporary);
  // Memory that another library owns (a buffer imported through DLPack),
  // shared without a copy: `release` runs instead of the backend's release
  // when the storage dies, and must not throw. It counts as live memory
  // like any other.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device,
                                       std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // The kind this memory is accounted as. Temporary memory that the tape
  // saves for backward counts as saved_activation while it is saved.
  MemoryKind kind() const;
  void set_kind(MemoryKind kind);
  void retain_saved();
  void release_saved();

  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  // A storage can give its memory back while its tensors live on (the
  // parameters of a run split over processes, ZeRO-3, between their
  // gathers): evict() frees it, reload() allocates it again, its contents
  // undefined until written, the version unchanged (whoever reloads puts
  // the same values back). Reading a tensor of an evicted storage is an
  // Error (Tensor::raw_data). Memory wrap()ped from elsewhere cannot be
  // evicted.
  void evict();
  void reload();
  bool resident() const { return data_ != nullptr || nbytes_ == 0; }

 private:
  Storage(void* data, size_t nbytes, Device device, MemoryKind kind);
  void move_accounting(MemoryKind from, MemoryKind to);

  void* data_;
  size_t nbytes_;
  Device device_;
  MemoryKind base_kind_;
  int saved_refs_ = 0;
  uint64_t version_ = 0;
  std::function<void()> external_release_;  // wrap() only
};

}  // namespace reprise
