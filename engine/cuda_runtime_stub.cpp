// Linked when reprise is built without CUDA: every CUDA request is an error.
#include "engine/cuda_runtime.h"
#include "engine/device.h"
#include "engine/error.h"

namespace reprise {

bool built_with_cuda() { return false; }

namespace cuda_runtime {

int device_count() { return 0; }
void* allocate(size_t, int device) {
  REPRISE_FAIL("allocate on cuda:", device, ": reprise was built without CUDA");
}
void release(void*, int) {}
void copy(void*, const void*, size_t, CopyKind, int device) {
  REPRISE_FAIL("copy to or from cuda:", device, ": reprise was built without CUDA");
}

}  // namespace cuda_runtime
}  // namespace reprise
