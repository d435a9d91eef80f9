// Fuzzes nn/train_state's reader: the input is a train_state.safetensors.
// Reading its summary, building the trainer it describes and loading it
// either raise a reprise::Error or succeed.
//
// The state's JSON is covered by a hash in the same header. Before the
// input is written, its "reprise.train_state.fnv1a64" is set to the hash of
// its "reprise.train_state" text: otherwise nearly every mutation of the
// JSON would stop at the hash check (which the unit tests cover) and the
// fuzzer would never reach the checks behind it. An input whose header does
// not parse is written as it is.
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
  if (size < 8) return bytes;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | data[i];
  if (n > size - 8) return bytes;
  json::Value header;
  try {
    header = json::parse(std::string_view(bytes).substr(8, n));
  } catch (const Error&) {
    return bytes;
  }
  const json::Value* meta = header.is_object() ? header.find("__metadata__") : nullptr;
  if (meta == nullptr || !meta->is_object()) return bytes;
  const json::Value* state = meta->find("reprise.train_state");
  if (state == nullptr || !state->is_string()) return bytes;
  json::Value fixed = *meta;
  fixed.set("reprise.train_state.fnv1a64", fnv1a64_hex(state->as_string()));
  header.set("__metadata__", std::move(fixed));
  std::string text = json::dump(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = char(uint64_t(text.size()) >> (8 * i));
  return out + text + bytes.substr(8 + n);
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
