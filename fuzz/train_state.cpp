// Fuzzes nn/train_state's reader: the input is a train_state.safetensors.
// Reading its summary, building the trainer it describes and loading it
// either raise a reprise::Error or succeed.
//
// The state's JSON is covered by a hash in the same header. Before the
// input is written, the 16 hex digits of its "reprise.train_state.fnv1a64"
// are set to the hash of its "reprise.train_state" text: otherwise nearly
// every mutation of the JSON would stop at the hash check (which the unit
// tests cover) and the fuzzer would never reach the checks behind it. The
// digits are patched in place, found by their key in the compact header
// the writer produces, so every other byte stays as the fuzzer made it; an
// input where either is not found is written as it is.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/threads.h"
#include "fuzz/files.h"
#include "fuzz/seeds.h"
#include "io/json.h"

using namespace reprise;

namespace {

// The checkpoint's hash of its JSON (nn/train_state.cpp): 64-bit FNV-1a, as
// 16 lowercase hex digits.
std::string fnv1a64_hex(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[size_t(i)] = "0123456789abcdef"[h & 15];
  return s;
}

std::string with_state_hash(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kState = "\"reprise.train_state\":";
  constexpr std::string_view kHash = "\"reprise.train_state.fnv1a64\":\"";
  const size_t state = bytes.find(kState), hash = bytes.find(kHash);
  if (state == std::string::npos || hash == std::string::npos) return bytes;
  // The state's JSON string literal: from its quote to the next unescaped one.
  const size_t open = state + kState.size();
  size_t close = open + 1;
  while (close < bytes.size() && bytes[close] != '"') close += bytes[close] == '\\' ? 2 : 1;
  const size_t digits = hash + kHash.size();
  if (close >= bytes.size() || digits + 16 > bytes.size()) return bytes;
  json::Value text;
  try {
    text = json::parse(std::string_view(bytes).substr(open, close + 1 - open));
  } catch (const Error&) {
    return bytes;
  }
  if (!text.is_string()) return bytes;
  bytes.replace(digits, 16, fnv1a64_hex(text.as_string()));
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  threads::set_num_threads(1);  // one fuzzer, one core: no pool to wake per op
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const std::string bytes = with_state_hash(data, size);
  fuzz::write_file(nn::train_state_path(dir), reinterpret_cast<const uint8_t*>(bytes.data()),
                   bytes.size());
  try {
    const nn::TrainStateInfo info = nn::read_train_state_info(dir);
    nn::Trainer trainer(info.config, fuzz::seed_dataset());
    nn::load_train_state(trainer, dir);
  } catch (const Error&) {
  }
  return 0;
}
