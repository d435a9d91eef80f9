// Word-for-word comparison with cuRAND, on the CPU. Built only where the CUDA
// toolkit is (REPRISE_TEST_CURAND); everything runs without a GPU.
//
// What equals what:
// - Device API. curand_kernel.h compiles as plain host C++ (its functions are
//   __host__ __device__). After curand_init(seed, subsequence, offset, &s),
//   the n-th curand(&s) is stream_word(seed, subsequence, offset + n), for
//   every triple; curand_uniform(&s) is uniform_float of that word, and
//   curand_uniform2_double of two, bit for bit. curand_normal and
//   curand_normal_double read the same words in the same pairs as
//   fill_normal, but their values agree only to a few ulp: cuRAND's host path
//   uses libm (logf, sinf, cosf, sin(v * pi)), its device path __sincosf and
//   sincospi, and ours the portable functions of distributions.h.
// - Host generator (curandCreateGeneratorHost, CURAND_RNG_PSEUDO_PHILOX4_32_10,
//   default ordering). It runs 65536 Philox streams side by side and
//   interleaves them block by block: output word p (counted from the
//   generator offset, continuing across calls) is word 4 (q / 65536) + p % 4
//   of subsequence q % 65536, q = p / 4. So a reprise stream equals the host
//   generator's output only along that stride. curandGenerateUniform is
//   uniform_float of the same words; curandGenerateNormal (even offset) is
//   Box-Muller on words (p, p + 1) for even p. Doubles interleave 4 per stream
//   per round (2 blocks): double d is element d % 4 of a reprise fill of
//   subsequence (d / 4) % 65536 at offset 8 (d / 4 / 65536).
#if defined(REPRISE_TEST_CURAND)

#include <curand.h>
#include <curand_kernel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"
#include "rng/distributions.h"
#include "rng/philox.h"

namespace reprise::rng {
namespace {

struct Triple {
  uint64_t seed, subsequence, offset;
};

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Edge triples, then random ones with small, large and full-range fields.
std::vector<Triple> triples() {
  const uint64_t max = ~uint64_t{0};
  std::vector<Triple> t = {{0, 0, 0},
                           {max, max, 0},
                           {0, 0, max - 100},
                           {1, 1, 1},
                           {2, 2, 2},
                           {3, 3, 3},
                           {42, 1ull << 32, (1ull << 34) - 6},
                           {max, 0, 1ull << 62}};
  uint64_t s = 2026;
  for (int i = 0; i < 300; ++i) {
    const uint64_t a = splitmix64(s), b = splitmix64(s), c = splitmix64(s);
    switch (i % 3) {
      case 0:
        t.push_back({a, b % 64, c % 1000});
        break;
      case 1:
        t.push_back({a, b % 65536, c >> 20});
        break;
      default:
        t.push_back({a, b, c >> 2});
        break;
    }
  }
  return t;
}

// U(0, 1] and N(0, 1) fills of n values from the CPU backend, the
// reference every backend reproduces.
template <class T>
void fill_uniform(T* out, int64_t n, const Reservation& r) {
  const Tensor t = Tensor::empty({n}, dtype_of<T>());
  cpu_backend().fill_uniform(t, r, 0.0, 1.0);
  std::copy_n(t.data<T>(), n, out);
}
template <class T>
void fill_normal(T* out, int64_t n, const Reservation& r) {
  const Tensor t = Tensor::empty({n}, dtype_of<T>());
  cpu_backend().fill_normal(t, r, 0.0, 1.0);
  std::copy_n(t.data<T>(), n, out);
}

Reservation reservation(const Triple& t, uint64_t count) {
  Reservation r;
  r.seed = t.seed;
  r.subsequence = t.subsequence;
  r.offset = t.offset;
  r.count = count;
  return r;
}

TEST(CuRandDevice, WordsAndUniformsAreIdentical) {
  constexpr int kWords = 37;  // crosses block boundaries from every lane
  for (const Triple& t : triples()) {
    curandStatePhilox4_32_10_t words, uniforms, quads;
    curand_init(t.seed, t.subsequence, t.offset, &words);
    curand_init(t.seed, t.subsequence, t.offset, &uniforms);
    curand_init(t.seed, t.subsequence, t.offset, &quads);
    std::vector<float> ours(kWords);
    fill_uniform(ours.data(), kWords, reservation(t, kWords));
    for (int i = 0; i < kWords; ++i) {
      const uint32_t w = stream_word(t.seed, t.subsequence, t.offset + i);
      ASSERT_EQ(curand(&words), w)
          << t.seed << " " << t.subsequence << " " << t.offset << " +" << i;
      ASSERT_EQ(curand_uniform(&uniforms), ours[i])
          << t.seed << " " << t.subsequence << " " << t.offset;
    }
    for (int i = 0; i < 8; i += 4) {
      const uint4 q = curand4(&quads);
      const uint32_t got[4] = {q.x, q.y, q.z, q.w};
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(got[k], stream_word(t.seed, t.subsequence, t.offset + i + k));
    }
  }
}

TEST(CuRandDevice, DoubleUniformsAreIdentical) {
  for (const Triple& t : triples()) {
    curandStatePhilox4_32_10_t s;
    curand_init(t.seed, t.subsequence, t.offset, &s);
    std::vector<double> ours(6);
    fill_uniform(ours.data(), 6, reservation(t, 12));
    for (int i = 0; i < 6; i += 2) {
      const double2 d = curand_uniform2_double(&s);
      ASSERT_EQ(d.x, ours[i]);
      ASSERT_EQ(d.y, ours[i + 1]);
    }
  }
}

// Normals: same words, same pairing, values within a few ulp. Errors are
// measured relative to the radius r = sqrt(-2 log u), because a small sin or
// cos of a large radius inherits the angle's absolute error, and the angles
// differ by up to one rounding: cuRAND's host build rounds the float angle's
// product and sum separately (we fuse them, as nvcc does on the device), and
// its double path rounds v * pi (we use sincospi, as its device path does).
// One ulp of an angle below 2 pi is 2^-21 (float) and 2^-50 (double); the
// bounds add the few ulps of log, sqrt, sin and cos on either side.
constexpr double kFloatBound = 0x1p-21 + 8 * 0x1p-24;
constexpr double kDoubleBound = 0x1p-50 + 8 * 0x1p-53;

TEST(CuRandDevice, NormalsMatchWithinUlps) {
  constexpr int kN = 24;
  double worst_f = 0, worst_d = 0;
  for (const Triple& t : triples()) {
    curandStatePhilox4_32_10_t sf, sd;
    curand_init(t.seed, t.subsequence, t.offset, &sf);
    curand_init(t.seed, t.subsequence, t.offset, &sd);
    std::vector<float> f(kN);
    std::vector<double> d(kN);
    fill_normal(f.data(), kN, reservation(t, normal_words<double>(kN)));
    fill_normal(d.data(), kN, reservation(t, normal_words<double>(kN)));
    for (int i = 0; i < kN; i += 2) {
      const float c0 = curand_normal(&sf), c1 = curand_normal(&sf);
      const double radius_f = std::hypot(double(c0), double(c1));
      worst_f =
          std::max({worst_f, std::fabs(f[i] - c0) / radius_f, std::fabs(f[i + 1] - c1) / radius_f});
      const double e0 = curand_normal_double(&sd), e1 = curand_normal_double(&sd);
      const double radius_d = std::hypot(e0, e1);
      worst_d =
          std::max({worst_d, std::fabs(d[i] - e0) / radius_d, std::fabs(d[i + 1] - e1) / radius_d});
    }
  }
  RecordProperty("worst_relative", testing::PrintToString(std::vector<double>{worst_f, worst_d}));
  EXPECT_LT(worst_f, kFloatBound);
  EXPECT_LT(worst_d, kDoubleBound);
}

class CuRandHost {
 public:
  CuRandHost(uint64_t seed, uint64_t offset) {
    EXPECT_EQ(curandCreateGeneratorHost(&g_, CURAND_RNG_PSEUDO_PHILOX4_32_10),
              CURAND_STATUS_SUCCESS);
    EXPECT_EQ(curandSetPseudoRandomGeneratorSeed(g_, seed), CURAND_STATUS_SUCCESS);
    EXPECT_EQ(curandSetGeneratorOffset(g_, offset), CURAND_STATUS_SUCCESS);
  }
  ~CuRandHost() { curandDestroyGenerator(g_); }
  CuRandHost(const CuRandHost&) = delete;
  CuRandHost& operator=(const CuRandHost&) = delete;
  curandGenerator_t get() const { return g_; }

 private:
  curandGenerator_t g_ = nullptr;
};

constexpr uint64_t kHostStreams = 65536;

// Word p of the host generator's output.
uint32_t host_word(uint64_t seed, uint64_t p) {
  const uint64_t q = p / 4;
  return stream_word(seed, q % kHostStreams, 4 * (q / kHostStreams) + p % 4);
}

TEST(CuRandHost, WordsAreInterleavedStreams) {
  // Two calls of sizes that end mid-block and cross the 65536-stream wrap
  // (262144 words), from aligned and unaligned generator offsets.
  for (const Triple& t :
       std::vector<Triple>{{1234, 0, 0}, {77, 0, 3}, {~0ull, 0, 262140}, {5, 0, 1ull << 33}}) {
    CuRandHost gen(t.seed, t.offset);
    const size_t sizes[2] = {1001, 300001};
    uint64_t p = t.offset;
    for (size_t n : sizes) {
      std::vector<unsigned> out(n);
      ASSERT_EQ(curandGenerate(gen.get(), out.data(), n), CURAND_STATUS_SUCCESS);
      for (size_t i = 0; i < n; ++i, ++p)
        ASSERT_EQ(out[i], host_word(t.seed, p)) << "seed " << t.seed << " p " << p;
    }
  }
}

TEST(CuRandHost, UniformsAndNormalsUseTheSameWords) {
  const uint64_t seed = 99, offset = 2;
  const size_t n = 300000;
  std::vector<float> u(n), z(n);
  {
    CuRandHost gen(seed, offset);
    ASSERT_EQ(curandGenerateUniform(gen.get(), u.data(), n), CURAND_STATUS_SUCCESS);
  }
  {
    CuRandHost gen(seed, offset);
    ASSERT_EQ(curandGenerateNormal(gen.get(), z.data(), n, 0.0f, 1.0f), CURAND_STATUS_SUCCESS);
  }
  double worst = 0;
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t p = offset + i;
    ASSERT_EQ(u[i], uniform_float(host_word(seed, p)));
    ASSERT_EQ(u[i + 1], uniform_float(host_word(seed, p + 1)));
    float z0, z1;
    box_muller(host_word(seed, p), host_word(seed, p + 1), z0, z1);
    const double radius = std::hypot(double(z[i]), double(z[i + 1]));
    worst = std::max({worst, std::fabs(z0 - z[i]) / radius, std::fabs(z1 - z[i + 1]) / radius});
  }
  EXPECT_LT(worst, kFloatBound);
}

TEST(CuRandHost, DoublesInterleaveFourPerStream) {
  const uint64_t seed = 7;
  const size_t n = 2 * 4 * kHostStreams + 40;  // two rounds of every stream and a bit
  std::vector<double> u(n), z(n);
  {
    CuRandHost gen(seed, 0);
    ASSERT_EQ(curandGenerateUniformDouble(gen.get(), u.data(), n), CURAND_STATUS_SUCCESS);
  }
  {
    CuRandHost gen(seed, 0);
    ASSERT_EQ(curandGenerateNormalDouble(gen.get(), z.data(), n, 0.0, 1.0), CURAND_STATUS_SUCCESS);
  }
  double worst = 0;
  for (size_t d = 0; d < n; d += 4) {
    Reservation r;
    r.seed = seed;
    r.subsequence = (d / 4) % kHostStreams;
    r.offset = 8 * (d / 4 / kHostStreams);
    r.count = 8;
    double ou[4], oz[4];
    fill_uniform(ou, 4, r);
    fill_normal(oz, 4, r);
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(u[d + k], ou[k]) << d + k;
      const double radius = std::hypot(oz[k & 2], oz[(k & 2) + 1]);
      worst = std::max(worst, std::fabs(z[d + k] - oz[k]) / radius);
    }
  }
  EXPECT_LT(worst, kDoubleBound);
}

}  // namespace
}  // namespace reprise::rng

#endif  // REPRISE_TEST_CURAND
