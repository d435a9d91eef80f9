// Loading a Hugging Face folder (nn::load_model): the time and the peak
// resident set while the model of LOAD_FOLDER (any family, sharded or not,
// bf16 or f32 weights) is built and read into its f32 parameters, against
// the model's own f32 bytes. bench/io/load_folder.py makes a
// Llama-3.2-1B-shaped folder with random weights, as save_pretrained
// writes it (bf16, 1 GB shards), and runs this on it.
//
// Counters: model_MiB (the parameters' f32 bytes), rss_MiB (the process's
// peak resident set after loading, everything included), rss_over_model
// (their ratio), base_MiB (the resident set before loading).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "bench/support.h"
#include "nn/hf.h"

namespace {

using namespace reprise;

void BM_load_folder(benchmark::State& state) {
  const char* dir = std::getenv("LOAD_FOLDER");
  if (dir == nullptr) {
    state.SkipWithError("set LOAD_FOLDER to a model folder");
    return;
  }
  const double base = bench::proc_status_mib("VmRSS");
  bench::reset_peak_rss();
  double model_bytes = 0;
  for (auto _ : state) {
    const std::unique_ptr<nn::LlamaForCausalLM> model = nn::load_model(dir);
    model_bytes = double(model->num_parameters()) * 4;
    state.counters["rss_MiB"] = bench::proc_status_mib("VmHWM");
  }
  state.counters["base_MiB"] = base;
  state.counters["model_MiB"] = model_bytes / (1024.0 * 1024.0);
  state.counters["rss_over_model"] = state.counters["rss_MiB"] / state.counters["model_MiB"];
}

BENCHMARK(BM_load_folder)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
