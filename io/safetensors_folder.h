#pragma once
// A model folder's weights as the Hugging Face Hub holds them: one
// <dir>/model.safetensors, or shards named model-00001-of-00003.safetensors,
// ... listed by <dir>/model.safetensors.index.json:
//
//   {"metadata": {"total_parameters": 19616, "total_size": 39232},
//    "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors",
//                   "model.embed_tokens.weight": "model-00001-of-00002.safetensors", ...}}
//
// total_size is the bytes of all tensors' data, total_parameters their
// elements. Every shard is opened (and memory-mapped) by
// read_safetensors_folder, which checks the index against the shards'
// headers, so a folder that opens serves every tensor the index names.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "io/safetensors.h"

namespace reprise::io {

// Limits on an untrusted index, each an Error before the work it bounds:
// the file's size, its weight_map's entries, and the shards those name (each
// open shard holds a file descriptor and a mapping). The largest released
// checkpoints name about 100,000 tensors in under 10 MB of index over a few
// hundred shards.
inline constexpr uint64_t kMaxSafetensorsIndexBytes = 100'000'000;
inline constexpr size_t kMaxSafetensorsFolderTensors = size_t(1) << 20;
inline constexpr size_t kMaxSafetensorsShards = 8192;

// The weights of a model folder: <dir>/model.safetensors, or the shards named
// by <dir>/model.safetensors.index.json. Cheap to move; every const method is
// safe to call from several threads at once.
class SafetensorsFolder {
 public:
  const std::string& dir() const { return dir_; }
  // Every tensor, sorted by name.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }
  // Raises an Error naming the folder, and some tensors it has, when absent.
  const TensorInfo& info(const std::string& name) const;
  // The path of the file that holds tensor `name`.
  const std::string& file_of(const std::string& name) const;
  // The shards' paths in the order the index first names them (or the one file).
  const std::vector<std::string>& files() const { return files_; }
  // All shards' tensor bytes together.
  uint64_t data_bytes() const { return data_bytes_; }
  // SafetensorsFile::get and read_into on the shard that holds `name`.
  Tensor get(const std::string& name) const;
  void read_into(const std::string& name, Tensor& dst) const;

 private:
  friend SafetensorsFolder read_safetensors_folder(const std::string& dir);
  SafetensorsFolder() = default;
  const SafetensorsFile& shard(const std::string& name) const;

  std::string dir_;
  std::vector<SafetensorsFile> shards_;  // in files() order
  std::vector<std::string> files_;
  std::vector<std::string> names_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
  uint64_t data_bytes_ = 0;
};

// Opens the folder and checks it. Errors, each naming the file: neither
// model.safetensors nor the index present, or both (which one holds the
// weights is ambiguous); the index is not JSON, or lacks weight_map, or maps
// a tensor to something other than a string; a shard the index names is not
// a plain file name inside dir (no '/', not "." or ".."), or is missing; a
// tensor the index maps to a shard is not in that shard; a shard holds a
// tensor the index does not list or maps to another shard (a tensor in two
// shards); metadata.total_size, when present, differs from the shards'
// tensor bytes; any error of read_safetensors on a shard. Limits: the index
// is at most kMaxSafetensorsIndexBytes, its JSON at most 4 levels deep and
// 2,097,152 values, its weight_map at most kMaxSafetensorsFolderTensors
// entries over at most kMaxSafetensorsShards shards.
SafetensorsFolder read_safetensors_folder(const std::string& dir);

// Writes `tensors` as transformers' save_pretrained does (huggingface_hub's
// split_state_dict_into_shards_factory): walking them in the given order, a
// tensor of more than max_shard_bytes goes alone into a shard of its own,
// and any other joins the current shard, which is closed first when the
// tensor would take it past max_shard_bytes. One shard is written as
// <dir>/model.safetensors; more as model-%05d-of-%05d.safetensors (in the
// order they were closed) and model.safetensors.index.json with metadata
// {total_parameters, total_size} and the weight_map, keys sorted, in
// transformers' layout (indent 2, a final newline). `metadata` goes into
// every shard's __metadata__ (e.g. {"format": "pt"}). Creates dir when
// absent. Every file is written atomically, the index last; then the weight
// files of an earlier save that this one did not write (model.safetensors,
// model-NNNNN-of-NNNNN.safetensors, the index) are removed, so the folder
// never holds two layouts. Errors: a duplicate or "__metadata__" name, an
// undefined tensor, more than 99,999 shards, any failed write.
void write_safetensors_folder(const std::string& dir,
                              const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              uint64_t max_shard_bytes);

}  // namespace reprise::io
