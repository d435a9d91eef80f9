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
// Reading opens the file, reads and validates the header with pread, and
// maps the data region read-only; get() and read_into() copy one tensor's
// bytes out of the mapping into tensor storage, converting the dtype on
// the way when asked, and then drop those pages from the process's
// resident set. Why map rather than read: a model checkpoint is as large
// as the model, and loading bf16 weights into f32 tensors through a read
// buffer would hold the buffer and the tensor at once; from the mapping,
// the pages are converted a few megabytes at a time and released, so
// loading peaks near the tensors' own bytes. The tensors stay 64-byte
// aligned, MemoryStats-counted storage like every other: the mapping is
// never handed out. The price of a mapping is SIGBUS: a file that another
// process truncates while a tensor is being copied out of it kills the
// reader. So each read first checks that the file still has the size it
// had when it was opened, which turns a truncation before the read into
// an Error; only one during the copy itself still raises SIGBUS. Writers
// that replace a file by rename, as write_safetensors does, never truncate
// the file a reader holds open; writers that rewrite it in place (Python's
// safetensors.save_file) must not run while it is being read.

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

// For an error about a missing tensor: "3 tensors: 'a', 'b', 'c'", the first
// five names and "..." after them.
std::string describe_tensor_names(const std::vector<std::string>& names);

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
  // Copies tensor `name` into `dst`, a contiguous CPU tensor of the stored
  // shape, converting from the stored dtype to dst's: F32, F64, BF16 and
  // F16 into f32, f64, bf16 or f16 (engine/dtype.h convert, the rounding
  // Tensor::to uses: 16-bit widening is exact, narrowing rounds to nearest
  // even), I64, I32 and BOOL only into their own dtype; the same dtype is a
  // byte copy. Reads straight from the mapping and releases each page it
  // read (madvise MADV_DONTNEED), so the file's bytes do not stay in the
  // process's RSS. Raises an Error naming the file, the tensor, the stored
  // and the destination shapes and dtypes when dst does not fit, when the
  // name is absent, or when the file changed size since it was opened;
  // after an Error raised while copying (a BOOL byte other than 0 or 1)
  // dst's contents are unspecified. Safe to call from several threads at
  // once, into distinct destinations.
  void read_into(const std::string& name, Tensor& dst) const;
  // The stored bytes of tensor `name`, of any format dtype (U16, U8, ...,
  // which get() refuses), little-endian as the format keeps them. Raises an
  // Error when the name is absent or the file changed size since it was
  // opened.
  std::vector<uint8_t> raw_bytes(const std::string& name) const;

 private:
  friend SafetensorsFile read_safetensors(const std::string& path);
  SafetensorsFile() = default;

  // Fails unless the file still has the size it had when it was opened.
  void check_unchanged(const std::string& name) const;
  void unmap();

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;   // at open
  uint64_t data_start_ = 0;  // 8 + N
  uint64_t data_bytes_ = 0;
  // The read-only mapping of the file from the page that holds data_start_
  // to its end; null when the data buffer is empty.
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint8_t* data_ = nullptr;  // the data buffer's first byte, inside the mapping
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

// A tensor of a format dtype reprise has no type for, as its bytes
// (little-endian): {"U16", {P, L, k}, bytes}.
struct RawTensor {
  std::string dtype_name;
  Shape shape;
  std::vector<uint8_t> bytes;
};

// write_safetensors with raw tensors after `tensors`. Raises an Error when
// a raw tensor's dtype is not the format's, or its bytes are not its
// shape's.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::vector<std::pair<std::string, RawTensor>>& raw,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace reprise::io
