// io/tokenizer: the ids and decodings that Hugging Face's tokenizers and
// SentencePiece give for tricky text (tests/fixtures/golden_tokenizers.py),
// byte-exact round trips, and one test per malformed or unsupported file.

#include "io/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "io/json.h"
#include "io/read_file.h"
#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"

namespace reprise::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

const std::string kDir = std::string(REPRISE_FIXTURES_DIR) + "/tokenizers";

const json::Value& golden() {
  static const json::Value g = [] {
    json::Value v = json::parse(read_file(kDir + "/golden.json", 16 << 20, "the golden file"));
    EXPECT_EQ(v.at("format").as_string(), "reprise-tokenizers-golden-v1");
    return v;
  }();
  return g;
}

const json::Value& entry(const std::string& name) {
  for (const json::Value& e : golden().at("tokenizers_under_test").as_array()) {
    if (e.at("name").as_string() == name) return e;
  }
  throw Error("no golden entry " + name);
}

std::vector<int64_t> ids_of(const json::Value& list) {
  std::vector<int64_t> ids;
  for (const json::Value& id : list.as_array()) ids.push_back(id.as_int());
  return ids;
}

std::string unhex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

std::optional<int64_t> optional_id(const json::Value& v) {
  if (v.is_null()) return std::nullopt;
  return v.as_int();
}

// ---- golden ids -----------------------------------------------------------------

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesTheReferenceLibrary) {
  const json::Value& e = entry(GetParam());
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kDir + "/" + e.at("path").as_string());
  EXPECT_EQ(tok->vocab_size(), e.at("vocab_size").as_int());
  EXPECT_EQ(tok->bos_id(), optional_id(e.at("bos")));
  EXPECT_EQ(tok->eos_id(), optional_id(e.at("eos")));
  const json::Array& cases = e.at("cases").as_array();
  ASSERT_GE(cases.size(), 40u);
  for (const json::Value& c : cases) {
    const bool is_hex = c.find("text_hex") != nullptr;
    const std::string text =
        is_hex ? unhex(c.at("text_hex").as_string()) : c.at("text").as_string();
    SCOPED_TRACE(::testing::Message() << GetParam() << " text \"" << text << "\"");
    const std::vector<int64_t> ids = ids_of(c.at("ids"));
    EXPECT_EQ(tok->encode(text, false), ids);
    EXPECT_EQ(tok->encode(text, true), ids_of(c.at("ids_special")));
    EXPECT_EQ(tok->decode(ids), c.at("decoded").as_string());
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden,
                         ::testing::Values("gpt2_bpe", "llama3_bpe", "llama2_sp", "nfkc_sp",
                                           "llama2_hf_legacy", "llama2_hf_metaspace"));

// Byte-level BPE has a token for every byte, so any bytes come back
// exactly, whether or not they are UTF-8.
TEST(Tokenizer, ByteLevelRoundTripsAnyBytes) {
  for (const char* name : {"gpt2_bpe", "llama3_bpe"}) {
    std::unique_ptr<Tokenizer> tok = load_tokenizer(kDir + "/" + name);
    for (const json::Value& c : entry(name).at("cases").as_array()) {
      const std::string& text = c.at("text").as_string();
      // <mask> is lstrip: its match takes the spaces before it, by design.
      if (text.find("<mask>") != std::string::npos) continue;
      EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << name;
    }
    std::string all_bytes;
    for (int b = 0; b < 256; ++b) all_bytes += char(b);
    for (const std::string& bytes :
         {all_bytes, std::string("a\xff\xfe b\xc3 \xe2\x82\n\xf0\x9f\x98")}) {
      const std::vector<int64_t> ids = tok->encode(bytes, false);
      EXPECT_EQ(tok->decode(ids), bytes) << name;
    }
    // An ill-formed byte is its own piece: the token for the byte 0xFF.
    EXPECT_EQ(tok->encode("\xff", false), std::vector<int64_t>{*tok->token_id("\xc3\xbf")}) << name;
  }
}

// Llama 2's tokenizer.json has byte fallback, so it is lossless too; the
// reference library cannot take bytes that are not UTF-8, this can.
TEST(Tokenizer, ByteFallbackRoundTripsBytesThatAreNotUtf8) {
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kDir + "/llama2_hf_metaspace/tokenizer.json");
  const std::string bytes = "x\xff y\xc3";
  const std::vector<int64_t> ids = tok->encode(bytes, false);
  EXPECT_EQ(tok->decode(ids), bytes);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok->token_id("<0xFF>")), 1);
}

// encode and decode are const and keep per-call state only (the merge
// workspace is per thread), so threads may share a tokenizer.
TEST(Tokenizer, EncodesOnSeveralThreadsAtOnce) {
  for (const char* name : {"llama3_bpe", "llama2_sp"}) {
    std::unique_ptr<Tokenizer> tok = load_tokenizer(kDir + "/" + name);
    std::string text;
    for (const json::Value& c : entry(name).at("cases").as_array()) {
      if (c.find("text") != nullptr) text += c.at("text").as_string();
    }
    const std::vector<int64_t> expected = tok->encode(text, true);
    std::vector<int> agreed(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i) agreed[t] += tok->encode(text, true) == expected;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(agreed, std::vector<int>(4, 20)) << name;
  }
}

TEST(Tokenizer, LoadsAFolderPreferringTokenizerJson) {
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kDir + "/llama3_bpe");
  EXPECT_NE(tok->describe().find("llama3_bpe/tokenizer.json: tokenizer.json, BPE, 807 ids"),
            std::string::npos)
      << tok->describe();
  EXPECT_EQ(tok->token_id("<|eot_id|>"), 806);
  EXPECT_EQ(tok->token_id("Ġzzzyx"), 800);
  EXPECT_EQ(tok->token_id("no such token"), std::nullopt);
  // ignore_merges: the piece " zzzyx" is one token although no merges make it.
  EXPECT_EQ(tok->encode(" zzzyx", false), std::vector<int64_t>{800});

  const std::string dir = testing::fresh_temp_dir("tokenizer_folder");
  fs::create_directories(dir);
  fs::copy_file(kDir + "/llama2_sp/tokenizer.model", dir + "/tokenizer.model");
  EXPECT_NE(
      load_tokenizer(dir)->describe().find("SentencePiece BPE model, 600 pieces, byte fallback"),
      std::string::npos);
  fs::copy_file(kDir + "/gpt2_bpe/tokenizer.json", dir + "/tokenizer.json");
  EXPECT_EQ(load_tokenizer(dir)->vocab_size(), 703);  // the JSON wins
}

TEST(Tokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
  for (const char* name : {"gpt2_bpe", "llama2_sp"}) {
    std::unique_ptr<Tokenizer> tok = load_tokenizer(kDir + "/" + name);
    const int64_t size = tok->vocab_size();
    expect_error(
        [&] {
          tok->decode(std::vector<int64_t>{0, size});
        },
        {"decode: id " + std::to_string(size) + " is outside the vocabulary [0, " +
             std::to_string(size) + ")",
         name});
    expect_error([&] { tok->decode(std::vector<int64_t>{-1}); }, {"decode: id -1"});
  }
}

// ---- malformed and unsupported files -----------------------------------------------

// The member `key` of the object `v`, to edit.
json::Value& at(json::Value& v, std::string_view key) {
  for (auto& [k, member] : v.as_object()) {
    if (k == key) return member;
  }
  throw Error("no member " + std::string(key));
}
json::Value& model(json::Value& v) { return at(v, "model"); }

class BadFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_temp_dir(std::string("tokenizer_") +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // A tokenizer.json from the GPT-2 fixture with `edit` applied.
  std::string edited_json(const std::function<void(json::Value&)>& edit) const {
    json::Value v = json::parse(read_file(kDir + "/gpt2_bpe/tokenizer.json", 1 << 20, "fixture"));
    edit(v);
    return write("tokenizer.json", json::dump(v));
  }

  std::string dir_;
};

TEST_F(BadFile, MissingPaths) {
  expect_error(
      [&] { load_tokenizer(dir_ + "/nothing.json"); },
      {dir_ + "/nothing.json: no such file; expected a tokenizer.json, a tokenizer.model"});
  expect_error(
      [&] { load_tokenizer(dir_); },
      {dir_, "expected a tokenizer.json or tokenizer.model in this folder, found neither"});
}

TEST_F(BadFile, MalformedJson) {
  const std::string path = write("tokenizer.json", "{\"model\": {\"type\": \"BPE\",}}");
  expect_error([&] { load_tokenizer(path); }, {path, "json: at line 1, column 26"});
}

TEST_F(BadFile, UnsupportedModelAndStages) {
  std::string p = edited_json([&](json::Value& v) { model(v).set("type", "WordPiece"); });
  expect_error([&] { load_tokenizer(p); },
               {p, "model.type: only \"BPE\" models are supported, got \"WordPiece\""});
  p = edited_json([&](json::Value& v) {
    v.set("pre_tokenizer", json::Object{{"type", "Whitespace"}});
  });
  expect_error([&] { load_tokenizer(p); },
               {p,
                "pre_tokenizer: pre_tokenizer type \"Whitespace\" is not supported (supported: "
                "ByteLevel, Split, Metaspace, Sequence)"});
  p = edited_json([&](json::Value& v) { v.set("normalizer", json::Object{{"type", "NFKC"}}); });
  expect_error([&] { load_tokenizer(p); }, {p, "normalizer type \"NFKC\" is not supported"});
  p = edited_json([&](json::Value& v) {
    v.set("pre_tokenizer", json::Object{{"type", "Split"},
                                        {"pattern", json::Object{{"Regex", "(?<=a)b"}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}});
  });
  expect_error([&] { load_tokenizer(p); }, {p, "regex '(?<=a)b'", "after '(?'"});
  p = edited_json([&](json::Value& v) { model(v).set("dropout", 0.1); });
  expect_error([&] { load_tokenizer(p); }, {p, "model.dropout: BPE dropout makes encoding random"});
}

TEST_F(BadFile, InconsistentVocabulary) {
  std::string p = edited_json([&](json::Value& v) {
    at(model(v), "vocab").set("Ġthe", 5);  // id 5 is "&"
  });
  expect_error([&] { load_tokenizer(p); }, {p, "model.vocab gives id 5 to both"});
  p = edited_json([&](json::Value& v) {
    json::Value& merges = at(model(v), "merges");
    merges.as_array().push_back(json::Array{"Ġ", "no-such-token"});
  });
  expect_error([&] { load_tokenizer(p); },
               {p, "model.merges[", "\"no-such-token\" is not in the vocabulary"});
  p = edited_json([&](json::Value& v) { at(model(v), "vocab").set("big", int64_t(1) << 40); });
  expect_error([&] { load_tokenizer(p); },
               {p, "model.vocab[\"big\"] must be an id in [0, 4194304)"});
  p = edited_json([&](json::Value& v) { at(v, "added_tokens").as_array()[0].set("id", 3); });
  expect_error([&] { load_tokenizer(p); },
               {p, "added_tokens[0]: id 3 of \"<|endoftext|>\" is the model's token"});
}

TEST_F(BadFile, TemplateAndConfigNameTokensThatExist) {
  std::string p = edited_json([&](json::Value& v) {
    v.set("post_processor", json::Object{{"type", "RobertaProcessing"},
                                         {"cls", json::Array{"<s>", int64_t(1) << 40}},
                                         {"sep", json::Array{"</s>", 2}}});
  });
  expect_error([&] { load_tokenizer(p); }, {p, "post_processor adds id 1099511627776"});
  write("tokenizer_config.json", R"({"bos_token": "<nope>"})");
  p = edited_json([](json::Value&) {});
  expect_error([&] { load_tokenizer(p); },
               {p, "tokenizer_config.json names bos_token \"<nope>\", which is not a token"});
}

// A SentencePiece model that is cut short, or is something else, fails
// with the file's name; so does every truncation of a real one.
TEST_F(BadFile, MalformedSentencePieceModel) {
  const std::string model = read_file(kDir + "/llama2_sp/tokenizer.model", 1 << 20, "fixture");
  std::string p = write("tokenizer.model", model.substr(0, model.size() / 2));
  expect_error([&] { load_tokenizer(p); }, {p, "ModelProto", "(the file is not JSON"});
  for (size_t cut = 0; cut < model.size(); cut += 97) {
    p = write("cut.model", model.substr(0, cut));
    EXPECT_THROW(load_tokenizer(p), Error) << cut;
  }
  p = write("text.model", "hello, this is not a model\n");
  expect_error([&] { load_tokenizer(p); }, {p, "ModelProto"});
}

TEST_F(BadFile, UnsupportedSentencePieceModel) {
  // trainer_spec { model_type: UNIGRAM } plus one piece: the smallest such file.
  const std::string unigram = std::string("\x0a\x05\x0a\x03<u>\x12\x02\x18\x01", 11);
  std::string p = write("unigram.model", unigram);
  expect_error([&] { load_tokenizer(p); },
               {p, "model_type UNIGRAM (1) is not supported; only BPE models are"});
  // A BPE model without an unknown piece.
  p = write("nounk.model", std::string("\x0a\x05\x0a\x03<u>\x12\x02\x18\x02", 11));
  expect_error([&] { load_tokenizer(p); }, {p, "no unknown piece (type UNKNOWN)"});
}

TEST_F(BadFile, SizeLimits) {
  const std::string p = write("big.json", std::string(2000, ' '));
  expect_error([&] { read_file(p, 1000, "a test file"); },
               {p, "2000 bytes, more than the 1000 accepted for a test file"});
  expect_error([&] { read_file(dir_, 1000, "a test file"); }, {dir_, "not a file"});
}

}  // namespace
}  // namespace reprise::io
