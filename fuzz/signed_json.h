#pragma once
// What the targets that read signed checkpoint files share
// (nn/signed_metadata.h): the JSON under a metadata key is covered by a
// hash under "<key>.fnv1a64", so nearly every mutation of the JSON would
// stop at the hash check (which the unit tests cover) and the fuzzer would
// never reach the checks behind it. Before an input is written, the 16 hex
// digits of its hash are set to the hash of its JSON text. The digits are
// patched in place, found by their key in the compact header the writer
// produces, so every other byte stays as the fuzzer made it; an input
// where either is not found is written as it is.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "io/json.h"
#include "nn/signed_metadata.h"

namespace reprise::fuzz {

struct SignedInput {
  std::string bytes;
  std::optional<uint64_t> hash;  // of the JSON text, when it was found
  json::Value text;              // that text, parsed as the header's string
};

inline SignedInput with_json_hash(const uint8_t* data, size_t size, std::string_view key) {
  SignedInput out{std::string(reinterpret_cast<const char*>(data), size), {}, {}};
  std::string& bytes = out.bytes;
  const std::string state_key = "\"" + std::string(key) + "\":";
  const std::string hash_key = "\"" + std::string(key) + ".fnv1a64\":\"";
  const size_t state = bytes.find(state_key), hash = bytes.find(hash_key);
  if (state == std::string::npos || hash == std::string::npos) return out;
  // The JSON's string literal: from its quote to the next unescaped one.
  const size_t open = state + state_key.size();
  size_t close = open + 1;
  while (close < bytes.size() && bytes[close] != '"') close += bytes[close] == '\\' ? 2 : 1;
  const size_t digits = hash + hash_key.size();
  if (close >= bytes.size() || digits + 16 > bytes.size()) return out;
  try {
    out.text = json::parse(std::string_view(bytes).substr(open, close + 1 - open));
  } catch (const Error&) {
    return out;
  }
  if (!out.text.is_string()) return out;
  out.hash = nn::fnv1a64(out.text.as_string());
  bytes.replace(digits, 16, nn::hex64(*out.hash));
  return out;
}

}  // namespace reprise::fuzz
