// Fuzzes nn/train_state's reader: the input is a train_state.safetensors.
// Reading its summary, building the trainer it describes and loading it
// either raise a reprise::Error or succeed.
//
// The state's JSON hash is set to match its text before the input is
// written (fuzz/signed_json.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "engine/threads.h"
#include "fuzz/files.h"
#include "fuzz/seeds.h"
#include "fuzz/signed_json.h"

using namespace reprise;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  threads::set_num_threads(1);  // one fuzzer, one core: no pool to wake per op
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const std::string bytes = fuzz::with_json_hash(data, size, "reprise.train_state").bytes;
  fuzz::write_file(nn::train_state_path(dir), reinterpret_cast<const uint8_t*>(bytes.data()),
                   bytes.size());
  try {
    const nn::TrainStateInfo info = nn::read_train_state_info(dir);
    nn::Trainer trainer(info.config, fuzz::seed_dataset());
    nn::load_train_state(trainer, dir);
  } catch (const Error&) {
  }
  return 0;
}
