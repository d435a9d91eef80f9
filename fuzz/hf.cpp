// Fuzzes nn/hf: the input is a Hugging Face model folder, config.json's text
// then a NUL byte then model.safetensors (strict JSON holds no NUL, so the
// first one splits them; without one there is no model.safetensors).
// Reading the config and loading the folder either raise a reprise::Error
// or succeed, and a config that reads also survives llama_config_to_json
// and back unchanged.
#include "nn/hf.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "engine/threads.h"
#include "fuzz/files.h"

using namespace reprise;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  threads::set_num_threads(1);  // one fuzzer, one core: no pool to wake per op
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const std::string model = dir + "/model.safetensors";
  const uint8_t* nul = std::find(data, data + size, uint8_t(0));
  fuzz::write_file(dir + "/config.json", data, size_t(nul - data));
  if (nul == data + size) {
    ::unlink(model.c_str());
  } else {
    fuzz::write_file(model, nul + 1, size_t(data + size - nul - 1));
  }
  try {
    const nn::LlamaConfig config = nn::read_llama_config(dir);
    if (!(nn::llama_config_from_json(nn::llama_config_to_json(config)) == config)) {
      __builtin_trap();
    }
    nn::load_model(dir);
  } catch (const Error&) {
  }
  return 0;
}
