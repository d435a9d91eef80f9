#include "io/tokenizer.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/hf_tokenizer.h"
#include "io/sentencepiece.h"

namespace reprise::io {

namespace {

// A tokenizer.json is a JSON object; a serialized ModelProto is not text
// (it starts with field 1, its pieces: byte 0x0A, then a length).
bool looks_like_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c == '{';
  }
  return false;
}

// The tokenizer file `path` names: itself, or in a folder its
// tokenizer.json, else its tokenizer.model.
std::string tokenizer_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
      const fs::path file = fs::path(path) / name;
      if (fs::is_regular_file(file, ec)) return file.string();
    }
    REPRISE_FAIL(path,
                 ": expected a tokenizer.json or tokenizer.model in this folder, found neither");
  }
  REPRISE_CHECK(
      fs::is_regular_file(path, ec), path,
      ": no such file; expected a tokenizer.json, a tokenizer.model or a folder with one");
  return path;
}

}  // namespace

bool has_tokenizer(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  return fs::is_regular_file(fs::path(folder) / "tokenizer.json", ec) ||
         fs::is_regular_file(fs::path(folder) / "tokenizer.model", ec);
}

std::vector<TokenizerFile> tokenizer_files(const std::string& path) {
  const std::string file = tokenizer_file(path);
  if (!looks_like_json(file)) return {{.path = file, .name = "tokenizer.model"}};
  std::vector<TokenizerFile> out{{.path = file, .name = "tokenizer.json"}};
  const std::filesystem::path config =
      std::filesystem::path(file).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(config, ec))
    out.push_back({.path = config.string(), .name = "tokenizer_config.json"});
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const std::string file = tokenizer_file(path);
  if (looks_like_json(file)) return HfTokenizer::load(file);
  try {
    return SentencePieceTokenizer::load(file);
  } catch (const Error& e) {
    REPRISE_FAIL(e.what(), " (the file is not JSON, so it was read as a SentencePiece model)");
  }
}

}  // namespace reprise::io
