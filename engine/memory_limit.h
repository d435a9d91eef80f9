#pragma once
// A cap on the bytes live tensors may hold on each device, and the Error
// raised when an allocation fails or would pass it.
//
// REPRISE_MAX_MEMORY caps every device's live bytes (MemoryStats' total):
// plain bytes, or a number with a K, M, G or T suffix (powers of 1024:
// "512M", "2G"); unset or empty, there is no cap. It is read at the first
// allocation; a malformed value raises an Error naming it there (and at
// every allocation after). With no cap, an allocation costs one more branch.
//
// An allocation that would pass the cap, or that the device cannot serve,
// raises OutOfMemoryError, never std::bad_alloc: its message names the op
// running and its scope (engine/current_op.h), the shape and bytes asked,
// and the live and peak bytes by kind.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "engine/device.h"
#include "engine/memory_stats.h"

namespace reprise {

class OutOfMemoryError : public Error {
 public:
  // The message is `request` ("out of memory on cpu: matmul (forward) at
  // layers.0 asked for 4096 bytes") followed by `context` (the cap, the live
  // bytes, what the allocator holds).
  OutOfMemoryError(std::string request, std::string context, Device device, int64_t requested,
                   int64_t limit, const MemorySnapshot& memory)
      : Error(request + context),
        device(device),
        requested(requested),
        limit(limit),
        memory(memory),
        request_(std::move(request)),
        context_(std::move(context)) {}

  // This error with the tensor the bytes were for ("[256, 256] f32") named
  // after the bytes.
  OutOfMemoryError for_tensor(const std::string& tensor) const {
    return OutOfMemoryError(request_ + " (" + tensor + ")", context_, device, requested, limit,
                            memory);
  }

  Device device;
  int64_t requested;      // bytes
  int64_t limit;          // the cap it would have passed; 0 when the device had no room
  MemorySnapshot memory;  // the device's live and peak bytes when it was raised

 private:
  std::string request_, context_;
};

namespace memory_limit {

// The bytes `text` says ("4096", "512M", "2G"); an Error naming `variable`
// and the text otherwise.
int64_t parse_bytes(std::string_view text, std::string_view variable);

// The cap on every device in bytes, 0 when there is none: REPRISE_MAX_MEMORY
// until set_max_memory is called.
int64_t max_memory();
// Sets the cap (0: none) in place of REPRISE_MAX_MEMORY.
void set_max_memory(int64_t bytes);

namespace detail {
// The cap in bytes; 0: none; kUnread until REPRISE_MAX_MEMORY is read (a
// malformed value leaves it unread, so that every allocation raises).
inline constexpr int64_t kUnread = -1;
inline std::atomic<int64_t> cap{kUnread};
void check_slow(size_t nbytes, Device device);
}  // namespace detail

// Raises OutOfMemoryError when nbytes more on `device` would pass the cap
// (the first call reads REPRISE_MAX_MEMORY). With no cap: one load and one
// branch.
inline void check(size_t nbytes, Device device) {
  if (detail::cap.load(std::memory_order_relaxed) != 0) [[unlikely]]
    detail::check_slow(nbytes, device);
}

// Raises OutOfMemoryError for nbytes on `device`: past the cap `limit`, or
// with limit 0 because the device has no room (its allocator's figures
// added when it has them).
[[noreturn]] void raise_out_of_memory(size_t nbytes, Device device, int64_t limit);

}  // namespace memory_limit
}  // namespace reprise
