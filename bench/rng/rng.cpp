// RNG throughput on the CPU: reprise's fills beside cuRAND's host Philox
// generator (when the CUDA toolkit is present) and a plain copy of the same
// bytes, which is the machine's bandwidth. N = 2^24 floats (64 MiB per
// buffer, beyond the 32 MiB L3) on 2 threads of the engine's pool unless
// REPRISE_BENCH_THREADS says otherwise; cuRAND's host generator uses the
// calling thread.
//
// Counters: Gfloat/s (elements produced per second) and GB/s, counting bytes
// read plus bytes written (a copy and a dropout both move 8 bytes per
// element, a fill 4), per second of real time. The CPU column is the whole
// process's CPU time (all threads), so on a shared machine
// elements / CPU time is the cost per core-second whatever the load.
// Every variant's output is checked before timing.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/support.h"
#include "engine/backend.h"
#include "engine/threads.h"
#include "rng/distributions.h"
#include "rng/generator.h"
#include "rng/philox.h"

#if defined(REPRISE_BENCH_CURAND)
#include <curand.h>
#endif

namespace {

using namespace reprise::rng;

constexpr int64_t kN = int64_t{1} << 24;
constexpr double kP = 0.1;  // dropout probability
constexpr uint64_t kSeed = 1234;
void set_counters(benchmark::State& state, double bytes_per_element) {
  const double n = double(kN) * double(state.iterations());
  state.counters["Gfloat/s"] = benchmark::Counter(n / 1e9, benchmark::Counter::kIsRate);
  reprise::bench::set_bandwidth(state, double(kN) * bytes_per_element);
}

Reservation reservation(uint64_t words) {
  Generator gen(kSeed);
  return gen.reserve("default", words);
}

// Touches every page so the first timed iteration does not pay for faults.
template <class T>
std::vector<T> buffer(T value) {
  return std::vector<T>(size_t(kN), value);
}

void BM_Copy(benchmark::State& state) {
  std::vector<float> x = buffer(1.0f), y = buffer(0.0f);
  // Two threads, each copying its half: the same parallelism as the fills.
  auto copy = [&] {
    const int nt = reprise::threads::num_threads();
    reprise::threads::run_on_threads(nt, [&](int t) {
      const int64_t begin = kN * t / nt, end = kN * (t + 1) / nt;
      std::memcpy(y.data() + begin, x.data() + begin, size_t(end - begin) * sizeof(float));
    });
  };
  copy();
  reprise::bench::check(y == x, "copy");
  for (auto _ : state) {
    copy();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 8);
}

// The CPU backend's fills (what ops::rand, randn, bernoulli and dropout
// run), on its thread pool.
reprise::Backend& cpu() { return reprise::cpu_backend(); }

void BM_UniformFloat(benchmark::State& state) {
  const reprise::Tensor y = reprise::Tensor::zeros({kN});
  const Reservation r = reservation(uniform_words<float>(kN));
  cpu().fill_uniform(y, r, 0.0, 1.0);
  reprise::bench::check(y.data<float>()[kN - 1] == uniform_float(stream_word(kSeed, 0, kN - 1)),
                        "uniform");
  for (auto _ : state) {
    cpu().fill_uniform(y, r, 0.0, 1.0);
    benchmark::ClobberMemory();
  }
  set_counters(state, 4);
}

void BM_NormalFloat(benchmark::State& state) {
  const reprise::Tensor y = reprise::Tensor::zeros({kN});
  const Reservation r = reservation(normal_words<float>(kN));
  cpu().fill_normal(y, r, 0.0, 1.0);
  float z0, z1;
  box_muller(stream_word(kSeed, 0, kN - 2), stream_word(kSeed, 0, kN - 1), z0, z1);
  reprise::bench::check(y.data<float>()[kN - 1] == z1, "normal");
  for (auto _ : state) {
    cpu().fill_normal(y, r, 0.0, 1.0);
    benchmark::ClobberMemory();
  }
  set_counters(state, 4);
}

void BM_BernoulliMask(benchmark::State& state) {
  const reprise::Tensor y = reprise::Tensor::zeros({kN});
  const Reservation r = reservation(bernoulli_words(kN));
  cpu().fill_bernoulli(y, r, 1.0 - kP);
  double kept = 0;
  for (float v : y.to_vector<float>()) kept += v;
  reprise::bench::check(std::abs(kept / double(kN) - (1.0 - kP)) < 1e-3,
                        "bernoulli mask keep rate");
  for (auto _ : state) {
    cpu().fill_bernoulli(y, r, 1.0 - kP);
    benchmark::ClobberMemory();
  }
  set_counters(state, 4);
}

void BM_DropoutForward(benchmark::State& state) {
  const reprise::Tensor x = reprise::Tensor::ones({kN});
  const Reservation r = reservation(bernoulli_words(kN));
  double sum = 0;
  for (float v : cpu().dropout(x, kP, r).to_vector<float>()) sum += v;
  reprise::bench::check(std::abs(sum / double(kN) - 1.0) < 2e-3, "dropout preserves the mean");
  for (auto _ : state) {
    benchmark::DoNotOptimize(cpu().dropout(x, kP, r));
    benchmark::ClobberMemory();
  }
  set_counters(state, 8);
}

#if defined(REPRISE_BENCH_CURAND)
struct HostGenerator {
  curandGenerator_t g = nullptr;
  HostGenerator() {
    reprise::bench::check(
        curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS,
        "curandCreateGeneratorHost");
    reprise::bench::check(curandSetPseudoRandomGeneratorSeed(g, kSeed) == CURAND_STATUS_SUCCESS,
                          "seed");
  }
  ~HostGenerator() { curandDestroyGenerator(g); }
};

void BM_CuRandHostUniformFloat(benchmark::State& state) {
  HostGenerator gen;
  std::vector<float> y = buffer(0.0f);
  reprise::bench::check(curandGenerateUniform(gen.g, y.data(), size_t(kN)) == CURAND_STATUS_SUCCESS,
                        "curand uniform");
  // Its first four words are the first block of subsequence 0.
  reprise::bench::check(y[3] == uniform_float(stream_word(kSeed, 0, 3)), "curand uniform word 3");
  for (auto _ : state) {
    curandGenerateUniform(gen.g, y.data(), size_t(kN));
    benchmark::ClobberMemory();
  }
  set_counters(state, 4);
}

void BM_CuRandHostNormalFloat(benchmark::State& state) {
  HostGenerator gen;
  std::vector<float> y = buffer(0.0f);
  reprise::bench::check(
      curandGenerateNormal(gen.g, y.data(), size_t(kN), 0.0f, 1.0f) == CURAND_STATUS_SUCCESS,
      "curand normal");
  for (auto _ : state) {
    curandGenerateNormal(gen.g, y.data(), size_t(kN), 0.0f, 1.0f);
    benchmark::ClobberMemory();
  }
  set_counters(state, 4);
}

// Dropout the way one would build it on cuRAND's host API: generate
// uniforms into a buffer, then mask and scale on 2 threads.
void BM_CuRandHostDropoutForward(benchmark::State& state) {
  HostGenerator gen;
  std::vector<float> x = buffer(1.0f), u = buffer(0.0f), y = buffer(0.0f);
  const float keep = bernoulli_threshold(1.0 - kP), scale = float(1.0 / (1.0 - kP));
  auto run = [&] {
    curandGenerateUniform(gen.g, u.data(), size_t(kN));
    reprise::threads::parallel_for(kN, kN / 2, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) y[i] = u[i] <= keep ? x[i] * scale : 0.0f;
    });
  };
  run();
  double sum = 0;
  for (float v : y) sum += v;
  reprise::bench::check(std::abs(sum / double(kN) - 1.0) < 2e-3,
                        "curand dropout preserves the mean");
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  set_counters(state, 8);
}
#endif

}  // namespace

BENCHMARK(BM_Copy)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_UniformFloat)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_NormalFloat)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_BernoulliMask)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_DropoutForward)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
#if defined(REPRISE_BENCH_CURAND)
BENCHMARK(BM_CuRandHostUniformFloat)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_CuRandHostNormalFloat)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_CuRandHostDropoutForward)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
#endif

int main(int argc, char** argv) {
  const char* env = std::getenv("REPRISE_BENCH_THREADS");
  reprise::threads::set_num_threads(env != nullptr ? std::atoi(env) : 2);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("threads", std::to_string(reprise::threads::num_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
