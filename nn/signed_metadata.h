#pragma once
// The signed JSON metadata of reprise's checkpoint files (nn/train_state.h).
//
// A file keeps a JSON object under a metadata key, and the hex of the
// text's 64-bit FNV-1a hash under "<key>.fnv1a64". The object's
// "checksums" list each tensor's autograd::hash_values, so every byte of
// the file is covered by a check, and the hash of the JSON names the whole
// contents of the file.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace reprise::nn {

// 16 lowercase hex digits.
std::string hex64(uint64_t v);
uint64_t fnv1a64(std::string_view text);

// The two metadata entries that sign `text` under `key`.
std::map<std::string, std::string> signed_metadata(const std::string& key, const std::string& text);

struct SignedJson {
  json::Value value;
  uint64_t hash = 0;  // fnv1a64 of its text
};
// What a kind of file signs: its metadata key, the "format" and "version"
// its JSON holds, and what errors call it ("training state").
struct SignedFormat {
  const char* key;
  const char* format;
  int64_t version;
  const char* noun;
};
// The JSON object of `format` in `file`, checked: present, matching its
// recorded hash, well formed, of that format and version. Errors name the
// file and say what is wrong.
SignedJson read_signed_metadata(const io::SafetensorsFile& file, const SignedFormat& format);

// {"<name>": hex64(autograd::hash_values(tensor)), ...} in order.
json::Value tensor_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors);
// Raises an Error naming `path` and the tensor unless `value` has the hash
// that `checksum` (an entry of a checksum list) records.
void check_tensor_hash(const std::string& path, const std::string& name,
                       const json::Value& checksum, const Tensor& value);

}  // namespace reprise::nn
