// tiny_deepseek: writes a Hugging Face folder of a tiny random DeepSeek-V3
// for moe_train's tests to start from (--init-from): the shape of the
// config.json in CONFIG_DIR with the 256 byte values as its vocabulary, f32
// weights initialised as transformers does (seed 1), the routing bias zero.
//
//   tiny_deepseek CONFIG_DIR OUT_DIR

#include <cstdio>
#include <exception>

#include "nn/data.h"
#include "nn/hf.h"
#include "nn/hf_config.h"

int main(int argc, char** argv) {
  using namespace reprise;
  if (argc != 3) {
    std::fprintf(stderr, "usage: tiny_deepseek CONFIG_DIR OUT_DIR\n");
    return 2;
  }
  try {
    nn::LlamaConfig config = nn::read_llama_config(argv[1]);
    if (config.family != nn::Family::deepseek_v3) {
      std::fprintf(stderr, "tiny_deepseek: %s/config.json is %s, not deepseek_v3\n", argv[1],
                   config.info().model_type);
      return 2;
    }
    config.vocab_size = nn::kByteVocabSize;
    rng::Generator init(1);
    const nn::LlamaForCausalLM model(config, init);
    nn::save_model(model, argv[2]);
    std::printf("%s: %s\n", argv[2], config.describe().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tiny_deepseek: error: %s\n", e.what());
    return 1;
  }
}
