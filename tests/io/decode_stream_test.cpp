// io/decode_stream.h (text handed out token by token while a model
// generates), io/byte_tokenizer.h, and tokenizer_files / has_tokenizer.

#include "io/decode_stream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/byte_tokenizer.h"
#include "io/tokenizer.h"
#include "tests/support/expect_error.h"

namespace reprise::io {
namespace {

using testing::expect_error;

const std::string kTokenizersDir = std::string(REPRISE_FIXTURES_DIR) + "/tokenizers";

// What a stream hands out, piece by piece, for `ids` generated after
// `prompt`; each piece must be whole UTF-8 when the text is.
std::vector<std::string> pieces(const Tokenizer& tok, const std::vector<int64_t>& prompt,
                                const std::vector<int64_t>& ids) {
  DecodeStream s(tok, prompt);
  std::vector<std::string> out;
  for (int64_t id : ids) out.push_back(s.push(id));
  out.push_back(s.finish());
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += p;
  return s;
}

// No piece ends inside a UTF-8 sequence (every piece decodes on its own).
bool whole_characters(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (i + n > s.size()) return false;
    i += n;
  }
  return true;
}

// The continuation is the whole sequence's text after the prompt's, for
// byte-level BPE (characters split over tokens), SentencePiece with byte
// fallback (the first piece's space) and the tokenizer.json forms of it.
TEST(DecodeStream, HandsOutTheTextAfterThePromptInWholeCharacters) {
  const std::string prompt_text = "Hello";
  const std::string more = " world 你好 😀👍🏽 über 123\n";
  for (const char* name : {"gpt2_bpe", "llama3_bpe", "llama2_sp", "llama2_hf_metaspace"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<Tokenizer> tok = load_tokenizer(kTokenizersDir + "/" + name);
    const std::vector<int64_t> prompt = tok->encode(prompt_text, true);
    std::vector<int64_t> all = tok->encode(prompt_text + more, true);
    ASSERT_EQ(std::vector<int64_t>(all.begin(), all.begin() + int64_t(prompt.size())), prompt);
    const std::vector<int64_t> gen(all.begin() + int64_t(prompt.size()), all.end());
    const std::vector<std::string> parts = pieces(*tok, prompt, gen);
    EXPECT_EQ(joined(parts), tok->decode(all).substr(tok->decode(prompt).size()));
    EXPECT_EQ(joined(parts), more);
    for (const std::string& p : parts) EXPECT_TRUE(whole_characters(p)) << p;
  }
}

TEST(DecodeStream, HoldsBackAnIncompleteCharacterUntilItEnds) {
  const std::unique_ptr<Tokenizer> bytes = make_byte_tokenizer();
  // "€" is E2 82 AC: nothing until its last byte; then "€!" as it comes.
  EXPECT_EQ(pieces(*bytes, {'a'}, {0xE2, 0x82, 0xAC, '!'}),
            (std::vector<std::string>{"", "", "\xE2\x82\xAC", "!", ""}));
  // A tail that never completes comes out at the end; a stray continuation
  // byte at once.
  EXPECT_EQ(pieces(*bytes, {'a'}, {'x', 0xF0, 0x9F}),
            (std::vector<std::string>{"x", "", "", "\xF0\x9F"}));
  EXPECT_EQ(pieces(*bytes, {'a'}, {0x82, 'y'}), (std::vector<std::string>{"\x82", "y", ""}));
}

TEST(DecodeStream, RejectsIdsTheTokenizerHasNoTextFor) {
  const std::unique_ptr<Tokenizer> bytes = make_byte_tokenizer();
  DecodeStream s(*bytes, {1});
  expect_error([&] { s.push(256); }, {"id 256", "bytes, 256 tokens"});
}

TEST(ByteTokenizer, IdsAreBytes) {
  const std::unique_ptr<Tokenizer> t = make_byte_tokenizer();
  const std::string text("a\0\xff\n", 4);
  EXPECT_EQ(t->encode(text, true), (std::vector<int64_t>{'a', 0, 255, '\n'}));
  EXPECT_EQ(t->decode(t->encode(text, false)), text);
  EXPECT_EQ(t->vocab_size(), 256);
  EXPECT_FALSE(t->bos_id().has_value());
  EXPECT_FALSE(t->eos_id().has_value());
  expect_error([&] { t->decode(std::vector<int64_t>{-1}); }, {"id -1", "0..255"});
}

TEST(TokenizerFiles, NamesWhatLoadTokenizerReadsAsAModelFolderNamesIt) {
  const auto llama3 = tokenizer_files(kTokenizersDir + "/llama3_bpe");
  ASSERT_EQ(llama3.size(), 2u);
  EXPECT_EQ(llama3[0].path, kTokenizersDir + "/llama3_bpe/tokenizer.json");
  EXPECT_EQ(llama3[0].name, "tokenizer.json");
  EXPECT_EQ(llama3[1].name, "tokenizer_config.json");
  const auto sp = tokenizer_files(kTokenizersDir + "/llama2_sp/tokenizer.model");
  ASSERT_EQ(sp.size(), 1u);
  EXPECT_EQ(sp[0].name, "tokenizer.model");
  EXPECT_EQ(tokenizer_files(kTokenizersDir + "/gpt2_bpe").size(), 1u);
  EXPECT_TRUE(has_tokenizer(kTokenizersDir + "/llama2_sp"));
  EXPECT_FALSE(has_tokenizer(kTokenizersDir));
  expect_error([&] { tokenizer_files(kTokenizersDir); }, {"found neither"});
}

}  // namespace
}  // namespace reprise::io
