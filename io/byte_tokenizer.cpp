#include "io/byte_tokenizer.h"

#include "base/error.h"

namespace reprise::io {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text, bool) const override {
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = int64_t(static_cast<unsigned char>(text[i]));
    return ids;
  }
  std::string decode(std::span<const int64_t> ids) const override {
    std::string text(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      REPRISE_CHECK(ids[i] >= 0 && ids[i] < 256, "byte tokenizer: id ", ids[i],
                    " is not a byte (expected 0..255)");
      text[i] = char(static_cast<unsigned char>(ids[i]));
    }
    return text;
  }
  int64_t vocab_size() const override { return 256; }
  std::optional<int64_t> bos_id() const override { return std::nullopt; }
  std::optional<int64_t> eos_id() const override { return std::nullopt; }
  std::optional<int64_t> token_id(std::string_view token) const override {
    if (token.size() != 1) return std::nullopt;
    return int64_t(static_cast<unsigned char>(token[0]));
  }
  std::string describe() const override { return "bytes, 256 tokens"; }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace reprise::io
