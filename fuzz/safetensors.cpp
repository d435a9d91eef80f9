// Fuzzes io/safetensors: the input is a whole .safetensors file. Opening it
// and reading every tensor either raises a reprise::Error or succeeds;
// anything else (a crash, a sanitizer report, an allocation over
// -malloc_limit_mb) is a bug.
//
// The file lives in a memfd, so no input touches the disk; read_safetensors
// opens it by its /proc/self/fd path as it would any other file.
#include "io/safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"

using namespace reprise;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("reprise_fuzz_safetensors", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != ssize_t(size)) {
    __builtin_trap();  // the harness itself failed, not the reader
  }
  try {
    const io::SafetensorsFile file = io::read_safetensors(path);
    for (const std::string& name : file.names()) {
      try {
        file.get(name);
      } catch (const Error&) {
        // A dtype reprise cannot load, or a BOOL byte other than 0 or 1.
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
