// One core's f32 FMA peak, measured: independent chains of fused
// multiply-adds at each vector width this CPU supports (AVX2: 8 lanes,
// AVX-512: 16), enough of them in flight to cover the FMA latency on both
// FMA ports; with AVX512-BF16, the same for the bf16 dot-product
// instruction (vdpbf16ps: two multiply-adds per f32 lane), the peak of the
// bf16 GEMM (cpu/gemm_bf16.cpp). The GFLOP/s counter (2 FLOPs per lane per FMA, over CPU time)
// is the peak that the training-step side-by-sides divide by for their MFU
// (bench/nn/train_step_torch.py): it runs at the clock the core actually
// reaches, where /proc/cpuinfo's "cpu MHz" is only the nominal one.
//
//   build/dev/bench/bench_fma_peak
#include <benchmark/benchmark.h>

#include <string>

#include "engine/cpu_capability.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace {

// Chains in flight: 4-cycle latency x 2 ports needs 8; 12 leaves margin
// and still fits the 16 registers of AVX2.
constexpr int kChains = 12;
constexpr int kStepsPerCall = 1 << 16;

// Each keeps kChains accumulators of one vector width through
// kStepsPerCall FMAs and returns a lane of their sum, so nothing is dead.
__attribute__((target("avx2,fma"))) float chains_avx2() {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(float(c) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int s = 0; s < kStepsPerCall; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  for (int c = 1; c < kChains; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  return _mm256_cvtss_f32(acc[0]);
}

__attribute__((target("avx512f"))) float chains_avx512() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int s = 0; s < kStepsPerCall; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  for (int c = 1; c < kChains; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  return _mm512_cvtss_f32(acc[0]);
}

__attribute__((target("avx512f,avx512bf16"))) float chains_avx512_bf16() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c) * 1e-3f);
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80),
                 b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
  for (int s = 0; s < kStepsPerCall; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  for (int c = 1; c < kChains; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  return _mm512_cvtss_f32(acc[0]);
}

void BM_fma_peak(benchmark::State& state, float (*chains)(), int lanes) {
  for (auto _ : state) benchmark::DoNotOptimize(chains());
  const double flops_per_call = 2.0 * lanes * kChains * kStepsPerCall;
  state.counters["GFLOP/s"] = benchmark::Counter(double(state.iterations()) * flops_per_call / 1e9,
                                                 benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (reprise::CpuCapability c : reprise::supported_cpu_capabilities()) {
    if (c == reprise::CpuCapability::avx2) {
      benchmark::RegisterBenchmark("BM_fma_peak/avx2", BM_fma_peak, chains_avx2, 8);
    } else if (c == reprise::CpuCapability::avx512) {
      benchmark::RegisterBenchmark("BM_fma_peak/avx512", BM_fma_peak, chains_avx512, 16);
    } else if (c == reprise::CpuCapability::avx512_bf16) {  // 2 multiply-adds per lane
      benchmark::RegisterBenchmark("BM_fma_peak/avx512_bf16", BM_fma_peak, chains_avx512_bf16, 32);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#else

int main() { return 0; }  // the x86 vector widths only

#endif
