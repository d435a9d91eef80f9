// Fuzzes nn/train_state_shards' reader: the input is one process's file of
// a split optimizer state, opened as the only file of a checkpoint of one
// process. Opening it and reading every parameter's moments, whole and in
// part, either raise a reprise::Error or succeed.
//
// The file's JSON hash is set to match its text before the input is
// written (fuzz/signed_json.h), and the file is named by that hash, as a
// checkpoint lists it; the step the checkpoint expects is the JSON's own.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "engine/threads.h"
#include "fuzz/files.h"
#include "fuzz/signed_json.h"
#include "nn/train_state_shards.h"

using namespace reprise;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  threads::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const fuzz::SignedInput input = fuzz::with_json_hash(data, size, "reprise.optimizer_shard");
  const uint64_t hash = input.hash.value_or(0);
  const std::string path =
      (std::filesystem::path(dir) / nn::moment_shard_name(0, 1, hash)).string();
  fuzz::write_file(path, reinterpret_cast<const uint8_t*>(input.bytes.data()), input.bytes.size());
  int64_t step = 0;
  if (input.hash) {
    try {
      const json::Value meta = json::parse(input.text.as_string());
      if (const json::Value* s = meta.find("step"); s != nullptr && s->is_int()) step = s->as_int();
    } catch (const Error&) {
    }
  }
  try {
    const nn::MomentShards shards(dir, {hash}, step);
    for (const auto& [param, numel] : shards.numels()) {
      shards.read(param + ".exp_avg", 0, numel);
      shards.read(param + ".exp_avg_sq", numel / 3, numel);
    }
  } catch (const Error&) {
  }
  std::filesystem::remove(path);
  return 0;
}
