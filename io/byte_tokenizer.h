#pragma once
// The byte-level tokenizer as an io::Tokenizer: id i is byte i (256 ids, no
// BOS or EOS), the ids nn::TextDataset trains on without a tokenizer, so
// code written for tokenizers (generation, its streaming) serves byte
// models too.

#include <memory>

#include "io/tokenizer.h"

namespace reprise::io {

std::unique_ptr<Tokenizer> make_byte_tokenizer();

}  // namespace reprise::io
