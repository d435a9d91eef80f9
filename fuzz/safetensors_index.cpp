// Fuzzes io/safetensors_folder: the input is a sharded weights folder,
//
//   model.safetensors.index.json's text, a NUL byte,
//   a 4-byte little-endian length n, n bytes of model-00001-of-00002.safetensors,
//   the rest: model-00002-of-00002.safetensors
//
// (strict JSON holds no NUL, so the first one ends the index; a shard the
// input does not reach is absent from the folder, and n past the end means
// the rest is shard 1). Opening the folder and reading every tensor, as
// stored and into f32, either raises a reprise::Error or succeeds, and a
// folder that opens must describe itself consistently; anything else is a bug.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "engine/threads.h"
#include "fuzz/files.h"
#include "io/safetensors_folder.h"

using namespace reprise;

namespace {

// Writes `path` from [data, data + size), or removes it when absent.
void put(const std::string& path, const uint8_t* data, size_t size, bool absent) {
  if (absent) {
    ::unlink(path.c_str());
  } else {
    fuzz::write_file(path, data, size);
  }
}

// What an opened folder promises: names sorted and each in one of files(),
// data_bytes() the sum of the tensors' byte ranges.
bool consistent(const io::SafetensorsFolder& folder) {
  if (!std::is_sorted(folder.names().begin(), folder.names().end())) return false;
  uint64_t bytes = 0;
  for (const std::string& name : folder.names()) {
    const io::TensorInfo& info = folder.info(name);
    bytes += info.end - info.begin;
    const auto& files = folder.files();
    if (std::find(files.begin(), files.end(), folder.file_of(name)) == files.end()) return false;
  }
  return bytes == folder.data_bytes() && folder.files().size() <= 2;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  threads::set_num_threads(1);  // one fuzzer, one core
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const uint8_t* end = data + size;
  const uint8_t* nul = std::find(data, end, uint8_t(0));
  fuzz::write_file(dir + "/model.safetensors.index.json", data, size_t(nul - data));

  const uint8_t* rest = nul == end ? end : nul + 1;
  const bool has_shards = nul != end && end - rest >= 4;
  uint32_t n = 0;
  if (has_shards) {
    for (int i = 3; i >= 0; --i) n = (n << 8) | rest[i];
    rest += 4;
  }
  const size_t first = std::min(size_t(n), size_t(end - rest));
  put(dir + "/model-00001-of-00002.safetensors", rest, first, !has_shards);
  put(dir + "/model-00002-of-00002.safetensors", rest + first, size_t(end - rest) - first,
      !has_shards || first == size_t(end - rest));

  try {
    const io::SafetensorsFolder folder = io::read_safetensors_folder(dir);
    if (!consistent(folder)) __builtin_trap();
    for (const std::string& name : folder.names()) {
      try {
        folder.get(name);
        Tensor f32 = Tensor::empty(folder.info(name).shape, DType::f32);
        folder.read_into(name, f32);
      } catch (const Error&) {
        // A dtype reprise cannot load or convert, or a BOOL byte other than 0 or 1.
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
