#pragma once
// Helpers every Google Benchmark program here needs: deterministic inputs,
// a bandwidth counter, a check that stops a wrong result from being timed,
// and the peak resident set (Linux) that the side-by-side scripts measure
// the same way for PyTorch (bench/side_by_side.py).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::bench {

// An f32 tensor of values uniform on [lo, hi) from a fixed LCG (no rng
// layer involved, so inputs never change with it).
inline Tensor lcg_tensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(size_t(numel(shape)));
  uint64_t s = seed;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(double(lo) + double(hi - lo) * (double(s >> 40) / double(1 << 24)));
  }
  return Tensor::from_vector(v, shape);
}

// Counter "GB/s": bytes_per_iteration moved per iteration, per second.
inline void set_bandwidth(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] = benchmark::Counter(
      bytes_per_iteration * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// Ends the program (status 1) when a result checked before timing is wrong.
inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench: check failed: %s\n", what);
    std::exit(1);
  }
}

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM"); -1 where absent.
inline double proc_status_mib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return -1;
}

// Resets the peak resident set (VmHWM) to the current one (Linux >= 4.0).
inline bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return bool(clear.flush());
}

}  // namespace reprise::bench
