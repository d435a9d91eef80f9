#pragma once
// The per-process files of a training checkpoint whose optimizer state is
// split over the processes (--shard optimizer|gradients|parameters; the
// checkpoint itself is nn/train_state.h).
//
// Each process writes the AdamW moments it keeps (AdamW::kept_moments) to
// a file of its own,
//   <dir>/train_state.rank<r>-of-<R>.<h>.safetensors
//   tensors   "<param>.exp_avg", "<param>.exp_avg_sq"   f32 (end - begin):
//             elements [begin, end) of that parameter's moments, flattened
//   metadata  "reprise.optimizer_shard": a JSON object with the format
//             version, rank, ranks, step, "pieces" {"<param>": [begin, end,
//             numel]} and every tensor's checksum, signed
//             (nn/signed_metadata.h)
// where h is the hex of the JSON's hash: the name changes with the
// contents, so a new file never replaces one that a checkpoint lists. The
// main file lists the R hashes. Every process writes its file atomically
// before rank 0 writes the main file; the main file's rename is what makes
// a checkpoint of them, and rank 0 then removes the files it does not list.
//
// Read back, the files are pieces of each parameter's moments that cover
// it exactly once. Whatever layout the resuming run splits its state in
// (another shard mode, or none), each process reads its own elements out
// of them (MomentShards::read), exactly.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/json.h"
#include "io/safetensors.h"
#include "nn/optim.h"

namespace reprise::nn {

// train_state.rank<rank>-of-<ranks>.<hex64(hash)>.safetensors
std::string moment_shard_name(int64_t rank, int64_t ranks, uint64_t hash);

// Writes this process's moments, taken at step `step`, to <dir>
// atomically; returns the hash that names the file. Raises an Error
// naming the file when it cannot.
uint64_t write_moment_shard(const std::string& dir, int rank, int ranks, int64_t step,
                            const std::vector<AdamW::MomentSlice>& slices);

// The moments of a checkpoint's per-process files.
class MomentShards {
 public:
  // Opens the files that `hashes` name (one per process, in rank order) in
  // `dir`, of a checkpoint taken at `step`. Checks each one's JSON against
  // its listed hash, its rank, process count and step, its pieces against
  // its tensors, and that the pieces of each parameter cover it exactly
  // once. Errors name the file and what is wrong.
  MomentShards(const std::string& dir, const std::vector<uint64_t>& hashes, int64_t step);

  // The parameters the files hold moments of, with their element counts.
  const std::map<std::string, int64_t>& numels() const { return numels_; }
  // An AdamW::MomentReader: elements [begin, end) of "<param>.exp_avg" or
  // "<param>.exp_avg_sq", from the pieces that hold them, each checked
  // against its checksum as it is read.
  Tensor read(const std::string& key, int64_t begin, int64_t end) const;

 private:
  struct Piece {
    size_t file;
    int64_t begin, end;
  };
  std::vector<io::SafetensorsFile> files_;
  std::vector<json::Value> checksums_;                // per file
  std::map<std::string, std::vector<Piece>> pieces_;  // per parameter, by begin
  std::map<std::string, int64_t> numels_;
};

// Removes what an interrupted writer left in <dir>: the temporary files of
// train_state.safetensors and of the per-process files.
void remove_train_state_temporaries(const std::string& dir);
// Removes the per-process files in <dir> that `hashes` (of a checkpoint of
// `ranks` processes) do not name; all of them when `hashes` is empty.
void remove_unlisted_moment_shards(const std::string& dir, int64_t ranks,
                                   const std::vector<uint64_t>& hashes);

}  // namespace reprise::nn
