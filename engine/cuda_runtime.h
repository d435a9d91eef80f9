#pragma once
// The few CUDA runtime services the engine needs (memory and copies). A
// build without CUDA links a stub whose functions raise "built without CUDA".

#include <cstddef>

namespace reprise::cuda_runtime {

int device_count();  // 0 when built without CUDA or when no device is present
void* allocate(size_t nbytes, int device);
void release(void* ptr, int device);

enum class CopyKind { host_to_device, device_to_host, device_to_device };
void copy(void* dst, const void* src, size_t nbytes, CopyKind kind, int device);

}  // namespace reprise::cuda_runtime
