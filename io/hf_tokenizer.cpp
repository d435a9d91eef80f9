#include "io/hf_tokenizer.h"

#include <filesystem>

#include "base/error.h"
#include "io/read_file.h"

namespace reprise::io {

namespace {

// Llama 3's tokenizer.json is 9 MB; the largest in common use are about
// 35 MB.
constexpr uint64_t kMaxJsonBytes = 128 << 20;

std::vector<AddedToken> read_added_tokens(const json::Value& json, const hf::BpeModel& model) {
  std::vector<AddedToken> added;
  const json::Value* list = hf::member(json, "added_tokens", "tokenizer.json");
  if (list == nullptr) return added;
  REPRISE_CHECK(list->is_array(), "added_tokens must be an array");
  for (size_t i = 0; i < list->as_array().size(); ++i) {
    const json::Value& t = list->as_array()[i];
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    const int64_t id = hf::int_member(t, "id", -1, at);
    REPRISE_CHECK(id >= 0 && id < hf::kMaxVocab, at, ".id must be an id in [0, ", hf::kMaxVocab,
                  ")");
    AddedToken token{
        .content = hf::string_member(t, "content", at),
        .id = int32_t(id),
        .single_word = hf::bool_member(t, "single_word", false, at),
        .lstrip = hf::bool_member(t, "lstrip", false, at),
        .rstrip = hf::bool_member(t, "rstrip", false, at),
        .normalized = hf::bool_member(t, "normalized", true, at),
        .special = hf::bool_member(t, "special", false, at),
    };
    REPRISE_CHECK(!token.content.empty(), at, ".content is empty");
    // The library gives an added token that is also in the model's
    // vocabulary the model's id; a file that says otherwise is refused.
    const std::optional<int32_t> in_model = model.find(token.content);
    REPRISE_CHECK(!in_model || *in_model == token.id, at, ": \"", token.content, "\" has id ",
                  token.id, " but the model's vocabulary gives it ", in_model.value_or(-1));
    const std::string* model_token = model.token(token.id);
    REPRISE_CHECK(model_token == nullptr || *model_token == token.content, at, ": id ", token.id,
                  " of \"", token.content, "\" is the model's token \"",
                  model_token ? *model_token : "", "\"");
    for (const AddedToken& other : added) {
      REPRISE_CHECK(other.id != token.id && other.content != token.content, at, ": \"",
                    token.content, "\" (id ", token.id, ") repeats \"", other.content, "\" (id ",
                    other.id, ")");
    }
    added.push_back(std::move(token));
  }
  return added;
}

// tokenizer_config.json names its special tokens as "<s>" or as
// {"content": "<s>", ...}.
std::optional<std::string> config_token(const json::Value* config, std::string_view key) {
  if (config == nullptr) return std::nullopt;
  const json::Value* v = hf::member(*config, key, "tokenizer_config.json");
  if (v == nullptr) return std::nullopt;
  if (v->is_object()) {
    return hf::string_member(*v, "content", "tokenizer_config.json." + std::string(key));
  }
  REPRISE_CHECK(v->is_string(), "tokenizer_config.json.", key,
                " must be a string or {\"content\": ...}");
  return v->as_string();
}

}  // namespace

HfTokenizer::HfTokenizer(const json::Value& json, const json::Value* config,
                         const std::string& path) try
    : path_(path),
      model_(hf::required(json, "model", "tokenizer.json"), "model"),
      normalizer_(hf::member(json, "normalizer", "tokenizer.json"), "normalizer"),
      pre_tokenizer_(hf::member(json, "pre_tokenizer", "tokenizer.json"), "pre_tokenizer"),
      decoder_(hf::member(json, "decoder", "tokenizer.json"), "decoder"),
      template_(hf::read_template(hf::member(json, "post_processor", "tokenizer.json"),
                                  "post_processor")),
      added_(read_added_tokens(json, model_)) {
  if (const json::Value* version = hf::member(json, "version", "tokenizer.json")) {
    REPRISE_CHECK(version->is_string() && version->as_string() == "1.0",
                  "version must be \"1.0\", the only tokenizer.json format there is");
  }
  vocab_size_ = model_.size();
  std::vector<AddedTokenSplitter::Pattern> raw, normalized;
  for (const AddedToken& t : added_) vocab_size_ = std::max<int64_t>(vocab_size_, t.id + 1);
  added_by_id_.resize(size_t(vocab_size_));
  for (const AddedToken& t : added_) {
    // A normalized token is found, and decodes, in its normalized form.
    std::string text = t.normalized ? normalizer_.apply(t.content) : t.content;
    REPRISE_CHECK(!text.empty(), "added token \"", t.content, "\" normalizes to nothing");
    added_by_id_[t.id] = text;
    (t.normalized ? normalized : raw).push_back({std::move(text), t});
  }
  raw_added_ = AddedTokenSplitter(std::move(raw));
  normalized_added_ = AddedTokenSplitter(std::move(normalized));

  for (const std::vector<int64_t>* ids : {&template_.before, &template_.after}) {
    for (int64_t id : *ids) {
      REPRISE_CHECK(id >= 0 && id < vocab_size_ && (added_by_id_[id] || model_.token(int32_t(id))),
                    "post_processor adds id ", id, ", which has no token");
    }
  }
  auto special = [&](std::string_view key) -> std::optional<int64_t> {
    const std::optional<std::string> name = config_token(config, key);
    if (!name) return std::nullopt;
    const std::optional<int64_t> id = token_id(*name);
    REPRISE_CHECK(id.has_value(), "tokenizer_config.json names ", key, " \"", *name,
                  "\", which is not a token of tokenizer.json");
    return id;
  };
  bos_ = special("bos_token");
  eos_ = special("eos_token");
  if (config == nullptr && !template_.before.empty()) bos_ = template_.before.front();
} catch (const Error& e) {
  REPRISE_FAIL(path, ": ", e.what());
}

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::string& path) {
  auto parse = [](const std::string& file) {
    const std::string text = read_file(file, kMaxJsonBytes, "a Hugging Face tokenizer JSON file");
    try {
      return json::parse(text);
    } catch (const Error& e) {
      REPRISE_FAIL(file, ": ", e.what());
    }
  };
  const json::Value json = parse(path);
  const std::filesystem::path config_path =
      std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::optional<json::Value> config;
  if (std::filesystem::is_regular_file(config_path)) config = parse(config_path.string());
  return std::make_unique<HfTokenizer>(json, config ? &*config : nullptr, path);
}

void HfTokenizer::encode_text(std::string_view text, bool at_start, BpeWord& word,
                              std::vector<int64_t>& ids) const {
  const std::string normalized = normalizer_.apply(text);
  for (const AddedTokenSplitter::Span& s : normalized_added_.split(normalized)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      pre_tokenizer_.run(std::string_view(normalized).substr(s.begin, s.end - s.begin),
                         at_start && s.begin == 0,
                         [&](std::string_view piece) { model_.encode(piece, word, ids); });
    }
  }
}

std::vector<int64_t> HfTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int64_t> ids;
  BpeWord word = model_.word();
  if (add_special) ids.assign(template_.before.begin(), template_.before.end());
  for (const AddedTokenSplitter::Span& s : raw_added_.split(text)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_text(text.substr(s.begin, s.end - s.begin), s.begin == 0, word, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), template_.after.begin(), template_.after.end());
  return ids;
}

std::string HfTokenizer::decode(std::span<const int64_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    REPRISE_CHECK(id >= 0 && id < vocab_size_, "decode: id ", id, " is outside the vocabulary [0, ",
                  vocab_size_, ") of ", path_);
    if (added_by_id_[id]) {
      tokens.push_back(*added_by_id_[id]);
    } else {
      const std::string* token = model_.token(int32_t(id));
      REPRISE_CHECK(token != nullptr, "decode: id ", id, " has no token in ", path_);
      tokens.push_back(*token);
    }
  }
  return decoder_.apply(std::move(tokens));
}

std::optional<int64_t> HfTokenizer::token_id(std::string_view token) const {
  for (const AddedToken& t : added_) {
    if (t.content == token) return t.id;
  }
  return model_.find(token);
}

std::string HfTokenizer::describe() const {
  return path_ + ": tokenizer.json, BPE, " + std::to_string(vocab_size_) + " ids (" +
         std::to_string(added_.size()) + " added tokens)";
}

}  // namespace reprise::io
