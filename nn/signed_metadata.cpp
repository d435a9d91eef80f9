#include "nn/signed_metadata.h"

#include "autograd/verifier.h"
#include "base/error.h"
#include "nn/train_config.h"

namespace reprise::nn {

using train_json::int_field, train_json::parse_u64, train_json::string_field;

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

std::map<std::string, std::string> signed_metadata(const std::string& key,
                                                   const std::string& text) {
  return {{key, text}, {key + ".fnv1a64", hex64(fnv1a64(text))}};
}

SignedJson read_signed_metadata(const io::SafetensorsFile& file, const SignedFormat& format) {
  const std::string& path = file.path();
  const std::string key = format.key;
  const auto it = file.metadata().find(key);
  REPRISE_CHECK(it != file.metadata().end(), path, ": not a reprise ", format.noun, " (no \"", key,
                "\" metadata)");
  const std::string hash_key = key + ".fnv1a64";
  const auto hash = file.metadata().find(hash_key);
  REPRISE_CHECK(hash != file.metadata().end(), path, ": no \"", hash_key, "\" metadata");
  SignedJson out;
  out.hash = fnv1a64(it->second);
  REPRISE_CHECK(parse_u64(hash->second, 16, path + " metadata hash") == out.hash, path, ": the ",
                format.noun, " JSON is corrupted: it does not match its recorded hash");
  try {
    out.value = json::parse(it->second);
  } catch (const Error& e) {
    REPRISE_FAIL(path, ": bad ", format.noun, " JSON: ", e.what());
  }
  REPRISE_CHECK(out.value.is_object() && string_field(out.value, "format", path) == format.format,
                path, ": metadata is not a reprise ", format.noun);
  const int64_t v = int_field(out.value, "version", path);
  REPRISE_CHECK(v == format.version, path, ": ", format.noun, " version ", v,
                "; this build reads version ", format.version);
  return out;
}

json::Value tensor_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  json::Value checksums = json::Object{};
  for (const auto& [name, value] : tensors)
    checksums.set(name, hex64(autograd::hash_values(value)));
  return checksums;
}

void check_tensor_hash(const std::string& path, const std::string& name,
                       const json::Value& checksum, const Tensor& value) {
  REPRISE_CHECK(checksum.is_string(), path, ": the checksum of '", name, "' must be a string, got ",
                json::kind_name(checksum.kind()));
  const uint64_t expected =
      parse_u64(checksum.as_string(), 16, path + " checksum of '" + name + "'");
  REPRISE_CHECK(autograd::hash_values(value) == expected, path, ": tensor '", name, "' (",
                value.describe(), ") is corrupted: its bytes do not match the recorded hash");
}

}  // namespace reprise::nn
