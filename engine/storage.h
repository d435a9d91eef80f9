#pragma once
// A Storage is one allocation on one device. Tensors are views into a
// Storage; all views of one storage share its version counter, which in-place
// writes bump so that the tape can detect a saved tensor that was modified.

#include <cstddef>
#include <cstdint>
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

 private:
  Storage(void* data, size_t nbytes, Device device, MemoryKind kind);
  void move_accounting(MemoryKind from, MemoryKind to);

  void* data_;
  size_t nbytes_;
  Device device_;
  MemoryKind base_kind_;
  int saved_refs_ = 0;
  uint64_t version_ = 0;
};

}  // namespace reprise
