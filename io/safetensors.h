#pragma once
// Reading and writing the safetensors format
// (https://github.com/huggingface/safetensors):
//
//   [8 bytes]  N, unsigned little-endian: the header length
//   [N bytes]  JSON header, UTF-8, padded with trailing spaces:
//              {"__metadata__": {"key": "value", ...},
//               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     the byte buffer; offsets are relative to its start, tensors
//              are row-major little-endian, and together they cover the
//              buffer exactly (no holes, no overlaps).
//
// Reading opens the file, reads and validates the header and keeps the file
// open; get() reads one tensor's bytes straight into a new CPU tensor with
// pread. Why not read the whole file or mmap it: a model checkpoint is as
// large as the model, so reading it whole doubles peak memory while it
// loads; an mmap'd file that another process truncates kills the reader
// with SIGBUS, and its pages alias the file rather than the 64-byte aligned,
// MemoryStats-counted storage every other tensor has. pread costs one copy,
// the same copy either alternative needs to produce owned tensors, and a
// file that shrinks under us becomes a short read, hence an Error.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace reprise::io {

// One entry of a safetensors header. dtype_name is the format's name
// ("F32", "BF16", ...); dtype is reprise's type, empty for format dtypes
// reprise has no type for (U8, F8_E4M3, ...): such tensors are listed and
// validated but get() refuses them.
struct TensorInfo {
  std::string name;
  std::string dtype_name;
  std::optional<DType> dtype;
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data buffer
  uint64_t end = 0;
};

// The most tensors read_safetensors accepts in one file: far above what a
// model or a training checkpoint holds (a 126-layer Llama has about 1,100
// tensors, its training state four times that), low enough that the work
// per tensor stays small.
inline constexpr size_t kMaxSafetensorsTensors = size_t(1) << 17;

// The format's dtype name for a reprise dtype: f32 -> "F32", boolean -> "BOOL".
const char* safetensors_dtype_name(DType dtype);

class SafetensorsFile {
 public:
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Tensor names in header order (the order the writer gave them).
  const std::vector<std::string>& names() const { return names_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The size of the data buffer, which the tensors tile: their bytes together.
  uint64_t data_bytes() const { return data_bytes_; }
  bool contains(const std::string& name) const;
  // Raises an Error naming the tensor, and some that exist, when absent.
  const TensorInfo& info(const std::string& name) const;
  // A new contiguous CPU tensor with the stored bytes. Raises an Error when
  // the name is absent, its dtype has no reprise type, or the file changed
  // size since it was opened. Safe to call from several threads at once.
  Tensor get(const std::string& name) const;

 private:
  friend SafetensorsFile read_safetensors(const std::string& path);
  SafetensorsFile() = default;

  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // 8 + N
  uint64_t data_bytes_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, TensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
};

// Opens `path` and validates its header: the sizes, the JSON, every dtype,
// shape and offset pair, and that the offsets tile the data buffer. Errors
// name the file and the tensor.
//
// Limits on untrusted files, each an Error before anything of the claimed
// size is allocated: the header length must fit the file and be at most
// 100,000,000 bytes (the reference implementation's limit), its JSON at
// most 4 levels deep and 2,097,152 values (json::ParseOptions); at most
// 131,072 tensors and 131,072 metadata entries, shapes of at most 64
// dimensions. A tensor's bytes are allocated by get(), only after its shape
// and data_offsets were found to agree and to lie within the file.
SafetensorsFile read_safetensors(const std::string& path);

// Every tensor of the file, by name.
std::map<std::string, Tensor> load_safetensors(const std::string& path);

// Writes `tensors` (CPU tensors, any layout; stored contiguous, in the given
// order, offsets ascending) with string metadata. The header is padded with
// spaces to a multiple of 8 bytes, as the reference writer does. Atomic:
// writes a temporary file in the same directory, fsyncs it, renames it over
// `path` and fsyncs the directory, so `path` is either its old contents or
// the complete new file, and no temporary is left behind on failure.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace reprise::io
