#pragma once
// Training checkpoints: the state of an nn::Trainer (nn/trainer.h) saved
// to a folder, and loaded into a fresh Trainer to resume the run bit for
// bit.
//
// A training checkpoint is one file, <dir>/train_state.safetensors:
//   tensors   "<HF parameter name>"            f32, the model
//             "optimizer.<AdamW state name>"   f32 moments, i64 step counts
//   metadata  "reprise.train_state": a JSON object with the format version,
//             step, tokens seen, the number of processes ("ranks"), the
//             TrainConfig, the generator state (hex of
//             GeneratorState::to_bytes), the dataset's name, size,
//             tokenizer (its path) and fingerprint, and every tensor's
//             autograd::hash_values (hex);
//             "reprise.train_state.fnv1a64": the 64-bit FNV-1a hash of that
//             JSON text (hex), so every byte of the file is covered by a
//             check.
// It is written atomically (temporary file, fsync, rename, fsync of the
// directory; a directory it creates is fsynced in its parent) and loading
// checks every part before it changes anything. With several processes
// rank 0 writes it, once, holding the whole model (the experts of an
// expert-parallel model gathered from their processes, in the order one
// process lists them); each process of a resumed run reads the file and
// takes its part. The generator state is the same on every process (every
// stream advances by the global batch's words).
//
// When the processes split the optimizer state (--shard optimizer,
// gradients or parameters), no process holds it whole: each writes the
// moments it keeps to a file of its own beside the main file
// (nn/train_state_shards.h), the main file keeps the step counts and lists
// those files' hashes under "optimizer_shards", and it is written last, so
// a checkpoint is whole or the previous one stays. A run that resumes it
// reads its own elements out of those files, whatever it splits (another
// shard mode reads the same moments exactly); a run of another number of
// processes is refused, as ever (check_resume_ranks).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/json.h"
#include "nn/llama.h"
#include "nn/train_config.h"
#include "nn/trainer.h"

namespace reprise::nn {

// <dir>/train_state.safetensors
std::string train_state_path(const std::string& dir);

// Writes the trainer's state to <dir> (created when absent), atomically:
// the previous checkpoint stays whole until the new one has replaced it,
// then its per-process files are removed. Raises an Error on every
// process, writing nothing, when any holds a NaN or an infinity. Removes
// temporary files that an earlier writer killed while saving left in
// <dir>. Collective with several processes (rank 0 writes the main file).
// `session`, when not null, is kept in the metadata JSON as "session" for
// people and tools to read (the trainers store their resolved settings
// there); loading ignores it.
void save_train_state(const Trainer& trainer, const std::string& dir,
                      const json::Value& session = {});

// What <dir> holds, to build the Trainer that loads it.
struct TrainStateInfo {
  TrainConfig config;
  int64_t step = 0;
  int ranks = 1;               // the processes that wrote it
  std::string data_name;       // TextDataset::name()
  std::string data_path;       // TextDataset::path(): empty for the built-in corpus
  std::string tokenizer_path;  // DataTokenizer::path: empty for bytes
};
TrainStateInfo read_train_state_info(const std::string& dir);

// Raises an Error naming `path` unless a checkpoint that `saved` processes
// wrote may resume on `ranks` (the same number).
void check_resume_ranks(const std::string& path, int64_t saved, int64_t ranks);

// The model of the checkpoint in <dir> (its config and parameters, each
// checked against its recorded hash), for inference; the optimizer state
// and the generator are not read.
std::unique_ptr<LlamaForCausalLM> load_train_state_model(const std::string& dir);

// Restores a checkpoint into `trainer`, which must have the same run config
// (TrainConfig::run_differences empty), as many processes as the run that
// wrote it, and a dataset with the same fingerprint. Checks the file
// (format, version, JSON, the tensor list,
// shapes, dtypes, every tensor's hash, the generator bytes) before changing
// anything; raises an Error naming the file and what is wrong.
void load_train_state(Trainer& trainer, const std::string& dir);

// Every tensor of the checkpoint in <dir>, each checked against its hash,
// in the order the file of one process lists them: the model, then per
// parameter "optimizer.<param>.exp_avg", ".exp_avg_sq" and ".step", then
// "optimizer.step". Moments split over per-process files are put together
// whole. For tools that compare checkpoints: it holds the whole state.
std::vector<std::pair<std::string, Tensor>> read_train_state_tensors(const std::string& dir);

}  // namespace reprise::nn
