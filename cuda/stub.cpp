// The CUDA backend of a build without CUDA: Device::cuda(i) is a valid
// value, and everything asked of it raises "built without CUDA".
#include <map>
#include <mutex>

#include "base/error.h"
#include "engine/backend.h"

namespace reprise {
namespace {

class CudaStub final : public Backend {
 public:
  explicit CudaStub(int index) : Backend(Device::cuda(index)) {}
  std::string name() const override { return to_string(device()) + " (built without CUDA)"; }
  void release(void*, size_t) override {}

 protected:
  std::string missing_reason() const override {
    return "reprise was built without CUDA (configure with REPRISE_CUDA=ON on a machine with "
           "the CUDA toolkit)";
  }
};

}  // namespace

bool built_with_cuda() { return false; }

int cuda_device_count() { return 0; }

Backend& cuda_backend(int index) {
  // One per device, never destroyed: storage that outlives static
  // destruction still frees through it.
  static std::mutex mutex;
  static auto* backends = new std::map<int, CudaStub*>;
  const std::lock_guard<std::mutex> lock(mutex);
  CudaStub*& b = (*backends)[index];
  if (b == nullptr) b = new CudaStub(index);
  return *b;
}

}  // namespace reprise
