#include "io/hf_pipeline.h"

#include <array>

#include "base/error.h"
#include "io/bpe.h"
#include "io/unicode.h"

namespace reprise::io::hf {

// ---- reading tokenizer.json ---------------------------------------------------

const json::Value* member(const json::Value& v, std::string_view key, const std::string& path) {
  REPRISE_CHECK(v.is_object(), path, " must be an object, got ", json::kind_name(v.kind()));
  const json::Value* m = v.find(key);
  return m == nullptr || m->is_null() ? nullptr : m;
}

const json::Value& required(const json::Value& v, std::string_view key, const std::string& path) {
  const json::Value* m = member(v, key, path);
  REPRISE_CHECK(m != nullptr, path, " has no \"", key, "\"");
  return *m;
}

namespace {

const json::Value& of_kind(const json::Value& v, json::Kind kind, std::string_view key,
                           const std::string& path) {
  REPRISE_CHECK(v.kind() == kind || (kind == json::Kind::real && v.is_int()), path, ".", key,
                " must be ", json::kind_name(kind), ", got ", json::kind_name(v.kind()));
  return v;
}

}  // namespace

const std::string& string_member(const json::Value& v, std::string_view key,
                                 const std::string& path) {
  return of_kind(required(v, key, path), json::Kind::string, key, path).as_string();
}

bool bool_member(const json::Value& v, std::string_view key, bool fallback,
                 const std::string& path) {
  const json::Value* m = member(v, key, path);
  return m == nullptr ? fallback : of_kind(*m, json::Kind::boolean, key, path).as_bool();
}

int64_t int_member(const json::Value& v, std::string_view key, int64_t fallback,
                   const std::string& path) {
  const json::Value* m = member(v, key, path);
  return m == nullptr ? fallback : of_kind(*m, json::Kind::integer, key, path).as_int();
}

namespace {

const json::Array& array_member(const json::Value& v, std::string_view key,
                                const std::string& path) {
  return of_kind(required(v, key, path), json::Kind::array, key, path).as_array();
}

std::string element_path(const std::string& path, std::string_view key, size_t i) {
  return path + "." + std::string(key) + "[" + std::to_string(i) + "]";
}

[[noreturn]] void unsupported(const std::string& path, std::string_view stage,
                              const std::string& type, std::string_view supported) {
  REPRISE_FAIL(path, ": ", stage, " type \"", type, "\" is not supported (supported: ", supported,
               ")");
}

// The single character of a "replacement" or "content" member.
char32_t one_character(const json::Value& v, std::string_view key, const std::string& path) {
  const std::string& s = string_member(v, key, path);
  const unicode::Decoded d =
      s.empty() ? unicode::Decoded{unicode::kInvalidByte, 0} : unicode::decode_utf8(s, 0);
  REPRISE_CHECK(d.cp != unicode::kInvalidByte && d.length == s.size(), path, ".", key,
                " must be one character, got \"", s, "\"");
  return d.cp;
}

// GPT-2's byte-to-unicode alphabet: the printable bytes stand for
// themselves and the other 68 (controls, space, 0x7F-0xA0, 0xAD) for
// U+0100.., so that every byte is a visible character of a token string.
struct ByteAlphabet {
  std::array<std::string, 256> utf8;   // byte -> its character, as UTF-8
  std::array<int16_t, 0x144> byte_of;  // character -> byte, or -1

  ByteAlphabet() {
    byte_of.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? char32_t(b) : next++;
      unicode::append_utf8(utf8[b], c);
      byte_of[c] = int16_t(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

const Pattern& gpt2_pattern() {
  static const Pattern re(
      Regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"));
  return re;
}

std::string replace_all(std::string_view text, const Pattern& pattern, std::string_view content) {
  std::string out;
  size_t done = 0;
  pattern.for_each_match(text, [&](size_t begin, size_t end) {
    out.append(text.substr(done, begin - done));
    out.append(content);
    done = end;
  });
  out.append(text.substr(done));
  return out;
}

// Hugging Face's split of `text` around the matches of `pattern` by a
// delimiter behaviour, streamed: the text arrives as alternating parts
// (matches and the text between them) and each finished piece goes to
// emit() at once; at most one part is held back, for the merging behaviours.
void split(std::string_view text, const Pattern& pattern, PreTokenizer::Behavior behavior,
           bool invert, const Found& emit) {
  using Behavior = PreTokenizer::Behavior;
  bool held = false;  // a part waits in [held_begin, held_end)
  size_t held_begin = 0, held_end = 0;
  bool previous_match = false;
  auto flush = [&] {
    if (held && held_end > held_begin) emit(held_begin, held_end);
    held = false;
  };
  auto part = [&](size_t begin, size_t end, bool is_match) {
    is_match = is_match != invert;
    switch (behavior) {
      case Behavior::isolated:
        if (end > begin) emit(begin, end);
        break;
      case Behavior::removed:
        if (!is_match && end > begin) emit(begin, end);
        break;
      case Behavior::contiguous:              // runs of matches, and of non-matches, join
      case Behavior::merged_with_previous: {  // a match joins the part before it
        const bool join = behavior == Behavior::contiguous ? is_match == previous_match
                                                           : is_match && !previous_match;
        if (held && join) {
          held_end = end;
        } else {
          flush();
          held = true, held_begin = begin, held_end = end;
        }
        break;
      }
      case Behavior::merged_with_next:  // a match joins the non-match after it
        if (is_match) {
          flush();
          held = true, held_begin = begin, held_end = end;
        } else {
          if (held) begin = held_begin;
          held = false;
          if (end > begin) emit(begin, end);
        }
        break;
    }
    previous_match = is_match;
  };
  size_t done = 0;
  pattern.for_each_match(text, [&](size_t begin, size_t end) {
    if (begin != done) part(done, begin, false);
    part(begin, end, true);
    done = end;
  });
  if (done != text.size()) part(done, text.size(), false);
  flush();
}

PreTokenizer::Behavior read_behavior(const json::Value& v, const std::string& path) {
  const std::string& b = string_member(v, "behavior", path);
  using Behavior = PreTokenizer::Behavior;
  if (b == "Removed") return Behavior::removed;
  if (b == "Isolated") return Behavior::isolated;
  if (b == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (b == "MergedWithNext") return Behavior::merged_with_next;
  if (b == "Contiguous") return Behavior::contiguous;
  REPRISE_FAIL(path, ".behavior \"", b,
               "\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
               "Contiguous");
}

PreTokenizer::PrependScheme read_prepend_scheme(const json::Value& v, const std::string& path) {
  using Scheme = PreTokenizer::PrependScheme;
  // Files written before prepend_scheme existed say add_prefix_space.
  const json::Value* scheme = member(v, "prepend_scheme", path);
  if (scheme == nullptr) {
    return bool_member(v, "add_prefix_space", true, path) ? Scheme::always : Scheme::never;
  }
  const std::string& s = string_member(v, "prepend_scheme", path);
  if (s == "always") return Scheme::always;
  if (s == "first") return Scheme::first;
  if (s == "never") return Scheme::never;
  REPRISE_FAIL(path, ".prepend_scheme \"", s, "\" is not one of always, first, never");
}

// Runs `add` on `config` or, for a Sequence, on each of its members.
template <class Add>
void flatten(const json::Value& config, std::string_view list_key, const std::string& path,
             const Add& add) {
  const std::string& type = string_member(config, "type", path);
  if (type != "Sequence") {
    add(config, type, path);
    return;
  }
  const json::Array& list = array_member(config, list_key, path);
  for (size_t i = 0; i < list.size(); ++i) {
    flatten(list[i], list_key, element_path(path, list_key, i), add);
  }
}

}  // namespace

// ---- Pattern --------------------------------------------------------------------

Pattern::Pattern(const json::Value& v, const std::string& path) : pattern_(std::string()) {
  if (member(v, "String", path) != nullptr) {
    pattern_ = string_member(v, "String", path);
  } else if (member(v, "Regex", path) != nullptr) {
    pattern_.emplace<Regex>(string_member(v, "Regex", path));
  } else {
    REPRISE_FAIL(path, " must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

void Pattern::for_each_match(std::string_view text, const Found& found) const {
  if (const auto* regex = std::get_if<Regex>(&pattern_)) return regex->for_each_match(text, found);
  const std::string& literal = std::get<std::string>(pattern_);
  if (literal.empty()) return;  // matches nothing, as in the library
  for (size_t at = text.find(literal); at != std::string_view::npos;
       at = text.find(literal, at + literal.size())) {
    found(at, at + literal.size());
  }
}

// ---- Normalizer -------------------------------------------------------------------

Normalizer::Normalizer(const json::Value* config, const std::string& path) {
  if (config == nullptr) return;
  flatten(*config, "normalizers", path,
          [&](const json::Value& c, const std::string& type, const std::string& at) {
            if (type == "Prepend") {
              steps_.push_back(Prepend{string_member(c, "prepend", at)});
            } else if (type == "Replace") {
              steps_.push_back(Replace{Pattern(required(c, "pattern", at), at + ".pattern"),
                                       string_member(c, "content", at)});
            } else {
              unsupported(at, "normalizer", type, "Prepend, Replace, Sequence");
            }
          });
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const auto& step : steps_) {
    if (const auto* prepend = std::get_if<Prepend>(&step)) {
      if (!out.empty()) out = prepend->text + out;
    } else {
      const auto& replace = std::get<Replace>(step);
      out = replace_all(out, replace.pattern, replace.content);
    }
  }
  return out;
}

// ---- PreTokenizer ---------------------------------------------------------------------

PreTokenizer::PreTokenizer(const json::Value* config, const std::string& path) {
  if (config == nullptr) return;
  flatten(*config, "pretokenizers", path,
          [&](const json::Value& c, const std::string& type, const std::string& at) {
            if (type == "ByteLevel") {
              steps_.push_back(ByteLevel{bool_member(c, "add_prefix_space", true, at),
                                         bool_member(c, "use_regex", true, at)});
            } else if (type == "Split") {
              steps_.push_back(Split{Pattern(required(c, "pattern", at), at + ".pattern"),
                                     read_behavior(c, at), bool_member(c, "invert", false, at)});
            } else if (type == "Metaspace") {
              std::string replacement;
              unicode::append_utf8(replacement, one_character(c, "replacement", at));
              steps_.push_back(Metaspace{replacement, read_prepend_scheme(c, at),
                                         bool_member(c, "split", true, at)});
            } else {
              unsupported(at, "pre_tokenizer", type, "ByteLevel, Split, Metaspace, Sequence");
            }
          });
}

void PreTokenizer::run(std::string_view text, bool at_start,
                       const std::function<void(std::string_view)>& piece) const {
  std::vector<std::string> buffers(2 * steps_.size());
  run_from(0, text, at_start, piece, buffers);
}

void PreTokenizer::run_from(size_t step, std::string_view text, bool at_start,
                            const std::function<void(std::string_view)>& piece,
                            std::vector<std::string>& buffers) const {
  if (text.empty()) return;
  if (step == steps_.size()) {
    piece(text);
    return;
  }
  // Parts of `t` go on to the next step; a part that starts `t` starts the
  // input if `t` does.
  auto next = [&](std::string_view t) {
    return [&, t](size_t begin, size_t end) {
      run_from(step + 1, t.substr(begin, end - begin), at_start && begin == 0, piece, buffers);
    };
  };
  std::string& rewritten = buffers[2 * step];
  if (const auto* s = std::get_if<Split>(&steps_[step])) {
    split(text, s->pattern, s->behavior, s->invert, next(text));
  } else if (const auto* meta = std::get_if<Metaspace>(&steps_[step])) {
    rewritten = replace_all(text, Pattern(" "), meta->replacement);
    const bool prepend = meta->prepend == PrependScheme::always ||
                         (meta->prepend == PrependScheme::first && at_start);
    if (prepend && !rewritten.starts_with(meta->replacement)) {
      rewritten = meta->replacement + rewritten;
    }
    if (meta->split) {
      split(rewritten, Pattern(meta->replacement), Behavior::merged_with_next, false,
            next(rewritten));
    } else {
      next(rewritten)(0, rewritten.size());
    }
  } else {
    const auto& byte_level = std::get<ByteLevel>(steps_[step]);
    std::string_view source = text;
    if (byte_level.add_prefix_space && !text.starts_with(' ')) {
      rewritten.assign(1, ' ').append(text);
      source = rewritten;
    }
    // Each piece's bytes become characters of the byte alphabet.
    std::string& mapped = buffers[2 * step + 1];
    auto map = [&](size_t begin, size_t end) {
      const ByteAlphabet& alphabet = byte_alphabet();
      mapped.clear();
      for (char b : source.substr(begin, end - begin)) mapped += alphabet.utf8[uint8_t(b)];
      run_from(step + 1, mapped, at_start && begin == 0, piece, buffers);
    };
    if (byte_level.use_regex) {
      split(source, gpt2_pattern(), Behavior::isolated, false, map);
    } else {
      map(0, source.size());
    }
  }
}

// ---- Decoder ---------------------------------------------------------------------------

Decoder::Decoder(const json::Value* config, const std::string& path) {
  if (config == nullptr) return;
  present_ = true;
  flatten(*config, "decoders", path,
          [&](const json::Value& c, const std::string& type, const std::string& at) {
            if (type == "ByteLevel") {
              steps_.push_back(ByteLevel{});
            } else if (type == "ByteFallback") {
              steps_.push_back(ByteFallback{});
            } else if (type == "Fuse") {
              steps_.push_back(Fuse{});
            } else if (type == "Replace") {
              steps_.push_back(Replace{Pattern(required(c, "pattern", at), at + ".pattern"),
                                       string_member(c, "content", at)});
            } else if (type == "Strip") {
              steps_.push_back(Strip{one_character(c, "content", at), int_member(c, "start", 0, at),
                                     int_member(c, "stop", 0, at)});
            } else if (type == "Metaspace") {
              std::string replacement;
              unicode::append_utf8(replacement, one_character(c, "replacement", at));
              steps_.push_back(Metaspace{
                  replacement, read_prepend_scheme(c, at) != PreTokenizer::PrependScheme::never});
            } else {
              unsupported(at, "decoder", type,
                          "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence");
            }
          });
}

namespace {

std::string join(const std::vector<std::string>& tokens, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out.append(separator);
    out.append(tokens[i]);
  }
  return out;
}

// The characters of `token` mapped back to bytes, or the token as it is
// when one of them is outside the byte alphabet (an added token).
std::string unmap_bytes(const std::string& token) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const unicode::Decoded d = unicode::decode_utf8(token, pos);
    if (d.cp >= alphabet.byte_of.size() || alphabet.byte_of[d.cp] < 0) return token;
    bytes += char(alphabet.byte_of[d.cp]);
    pos += d.length;
  }
  return bytes;
}

std::string strip(const std::string& token, const Decoder::Strip& s) {
  std::vector<std::pair<char32_t, size_t>> chars;  // (code point, byte offset)
  for (size_t pos = 0; pos < token.size();) {
    const unicode::Decoded d = unicode::decode_utf8(token, pos);
    chars.emplace_back(d.cp, pos);
    pos += d.length;
  }
  size_t first = 0, last = chars.size();  // characters kept: [first, last)
  while (first < chars.size() && int64_t(first) < s.start && chars[first].first == s.content)
    ++first;
  while (last > first && int64_t(chars.size() - last) < s.stop &&
         chars[last - 1].first == s.content) {
    --last;
  }
  const size_t begin = first < chars.size() ? chars[first].second : token.size();
  const size_t end = last < chars.size() ? chars[last].second : token.size();
  return token.substr(begin, end - begin);
}

}  // namespace

std::string Decoder::apply(std::vector<std::string> tokens) const {
  if (!present_) return join(tokens, " ");
  for (const auto& step : steps_) {
    if (std::holds_alternative<ByteLevel>(step)) {
      std::string bytes;
      for (const std::string& t : tokens) bytes += unmap_bytes(t);
      tokens = {std::move(bytes)};
    } else if (std::holds_alternative<ByteFallback>(step)) {
      std::vector<std::string> out;
      bool in_bytes = false;  // out.back() collects a run of byte tokens
      for (std::string& t : tokens) {
        const int b = byte_of_token(t);
        if (b < 0) {
          out.push_back(std::move(t));
        } else if (in_bytes) {
          out.back() += char(b);
        } else {
          out.emplace_back(1, char(b));
        }
        in_bytes = b >= 0;
      }
      tokens = std::move(out);
    } else if (std::holds_alternative<Fuse>(step)) {
      tokens = {join(tokens, "")};
    } else if (const auto* replace = std::get_if<Replace>(&step)) {
      for (std::string& t : tokens) t = replace_all(t, replace->pattern, replace->content);
    } else if (const auto* s = std::get_if<Strip>(&step)) {
      for (std::string& t : tokens) t = strip(t, *s);
    } else {
      const auto& meta = std::get<Metaspace>(step);
      for (size_t i = 0; i < tokens.size(); ++i) {
        const bool drop = i == 0 && meta.strip_first;
        tokens[i] = replace_all(tokens[i], Pattern(meta.replacement), drop ? "" : " ");
      }
    }
  }
  return join(tokens, "");
}

// ---- post-processor -------------------------------------------------------------------

namespace {

int64_t token_id(const json::Value& pair, const std::string& path) {
  REPRISE_CHECK(pair.is_array() && pair.as_array().size() == 2 && pair.as_array()[1].is_int(), path,
                " must be [token, id]");
  return pair.as_array()[1].as_int();
}

// Adds `config`'s tokens around the sequence `t` already has.
void wrap(Template& t, const json::Value& config, const std::string& type,
          const std::string& path) {
  Template inner;
  if (type == "ByteLevel") return;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    inner.before = {token_id(required(config, "cls", path), path + ".cls")};
    inner.after = {token_id(required(config, "sep", path), path + ".sep")};
  } else if (type == "TemplateProcessing") {
    const json::Value& specials = required(config, "special_tokens", path);
    const json::Array& single = array_member(config, "single", path);
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string at = element_path(path, "single", i);
      if (const json::Value* s = member(single[i], "SpecialToken", at)) {
        const std::string& name = string_member(*s, "id", at + ".SpecialToken");
        const json::Value& entry = required(specials, name, path + ".special_tokens");
        for (const json::Value& id : array_member(entry, "ids", path + ".special_tokens." + name)) {
          REPRISE_CHECK(id.is_int(), path, ".special_tokens.", name, ".ids must hold integers");
          (seen_sequence ? inner.after : inner.before).push_back(id.as_int());
        }
      } else if (const json::Value* seq = member(single[i], "Sequence", at)) {
        REPRISE_CHECK(string_member(*seq, "id", at + ".Sequence") == "A" && !seen_sequence, at,
                      ": a single-sequence template holds one Sequence, $A");
        seen_sequence = true;
      } else {
        REPRISE_FAIL(at, " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      }
    }
    REPRISE_CHECK(seen_sequence, path, ".single has no Sequence item ($A)");
  } else {
    unsupported(path, "post_processor", type,
                "TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence");
  }
  // A later processor wraps what the earlier ones made.
  t.before.insert(t.before.begin(), inner.before.begin(), inner.before.end());
  t.after.insert(t.after.end(), inner.after.begin(), inner.after.end());
}

}  // namespace

Template read_template(const json::Value* config, const std::string& path) {
  Template t;
  if (config == nullptr) return t;
  flatten(*config, "processors", path,
          [&](const json::Value& c, const std::string& type, const std::string& at) {
            wrap(t, c, type, at);
          });
  return t;
}

}  // namespace reprise::io::hf
