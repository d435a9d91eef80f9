#pragma once
// The stages around the model in a Hugging Face tokenizer.json, read from
// its JSON and run as the tokenizers library runs them:
//
//   text -> added tokens split out -> normalizer -> pre-tokenizer -> model
//        -> post-processor (the special tokens a sequence gets)
//   ids  -> tokens -> decoder -> text
//
// Each stage supports the components that GPT-2, Llama 2 and Llama 3
// tokenizer.json files use, and raises an Error naming the component for
// any other, so that an unsupported file fails to load instead of encoding
// differently.
//
//   normalizer:     Prepend, Replace, Sequence (or null)
//   pre_tokenizer:  ByteLevel, Split, Metaspace, Sequence (or null)
//   decoder:        ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence (or null)
//   post_processor: TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence
//
// Decoded text is bytes: where Hugging Face replaces bytes that are not
// UTF-8 with U+FFFD, these stages keep them.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "io/json.h"
#include "io/regex.h"

namespace reprise::io::hf {

// ---- reading tokenizer.json: members with their path in error messages ----

// The member `key` of the object `v` (at `path`), or nullptr when it is
// absent or null. Raises when `v` is not an object.
const json::Value* member(const json::Value& v, std::string_view key, const std::string& path);
// Required members of a given kind.
const json::Value& required(const json::Value& v, std::string_view key, const std::string& path);
const std::string& string_member(const json::Value& v, std::string_view key,
                                 const std::string& path);
// Optional members: `fallback` when absent or null.
bool bool_member(const json::Value& v, std::string_view key, bool fallback,
                 const std::string& path);
int64_t int_member(const json::Value& v, std::string_view key, int64_t fallback,
                   const std::string& path);

// ---- the stages -------------------------------------------------------------

using Found = std::function<void(size_t, size_t)>;  // a byte span [begin, end)

// A Split or Replace pattern: {"String": s} (found literally) or
// {"Regex": r} (io/regex.h).
class Pattern {
 public:
  Pattern(const json::Value& v, const std::string& path);
  explicit Pattern(std::string literal) : pattern_(std::move(literal)) {}
  explicit Pattern(Regex regex) : pattern_(std::move(regex)) {}
  // Calls found() for each match in `text`, left to right.
  void for_each_match(std::string_view text, const Found& found) const;

 private:
  std::variant<std::string, Regex> pattern_;
};

class Normalizer {
 public:
  // config: the "normalizer" member, or nullptr for none.
  Normalizer(const json::Value* config, const std::string& path);
  std::string apply(std::string_view text) const;

  struct Prepend {
    std::string text;
  };
  struct Replace {
    Pattern pattern;
    std::string content;
  };

 private:
  std::vector<std::variant<Prepend, Replace>> steps_;
};

class PreTokenizer {
 public:
  PreTokenizer(const json::Value* config, const std::string& path);

  // Splits and rewrites `text` (at_start: it begins the input, which
  // Metaspace's prepend_scheme "first" reads) and calls piece() with each
  // resulting non-empty piece in order. The pieces stream through the
  // steps, so no step holds more than the piece it works on.
  void run(std::string_view text, bool at_start,
           const std::function<void(std::string_view)>& piece) const;

  enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  enum class PrependScheme { always, first, never };
  struct ByteLevel {
    bool add_prefix_space;
    bool use_regex;  // split with GPT-2's pattern first
  };
  struct Split {
    Pattern pattern;
    Behavior behavior;
    bool invert;
  };
  struct Metaspace {
    std::string replacement;  // UTF-8 of one character, normally U+2581
    PrependScheme prepend;
    bool split;
  };

 private:
  // Step `step` onwards for one piece; `buffers` holds two per step for
  // the text a step rewrites.
  void run_from(size_t step, std::string_view text, bool at_start,
                const std::function<void(std::string_view)>& piece,
                std::vector<std::string>& buffers) const;

  std::vector<std::variant<ByteLevel, Split, Metaspace>> steps_;
};

class Decoder {
 public:
  Decoder(const json::Value* config, const std::string& path);
  // The text of `tokens` (the vocabulary strings of the ids, in order).
  std::string apply(std::vector<std::string> tokens) const;

  struct ByteLevel {};
  struct ByteFallback {};
  struct Fuse {};
  struct Replace {
    Pattern pattern;
    std::string content;
  };
  struct Strip {
    char32_t content;
    int64_t start, stop;  // at most this many from the start / the end
  };
  struct Metaspace {
    std::string replacement;
    bool strip_first;  // prepend_scheme is not "never"
  };

 private:
  bool present_ = false;  // without a decoder the tokens are joined with spaces
  std::vector<std::variant<ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace>> steps_;
};

// The special tokens the post-processor puts around one sequence when
// encode() is asked to add them.
struct Template {
  std::vector<int64_t> before, after;  // ids as the file gives them; the caller checks them
};
// config: the "post_processor" member, or nullptr.
Template read_template(const json::Value* config, const std::string& path);

}  // namespace reprise::io::hf
