// The CPU backend's random fills over a reservation (at the capability the
// suite runs at: CTest runs it at each): element i is exactly the documented
// function of its words (rng/distributions.h), whatever the threads that
// run it; the portable log/sin/cos
// are within a stated ulp bound of long double; the distributions pass
// moment and Kolmogorov-Smirnov checks at fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "engine/backend.h"
#include "engine/threads.h"
#include "rng/distributions.h"
#include "rng/philox.h"

namespace reprise::rng {
namespace {

// The CPU backend's fills and dropout on n elements, copied out to `out`.
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
template <class T>
void fill_bernoulli(T* out, int64_t n, double p, const Reservation& r) {
  const Tensor t = Tensor::empty({n}, dtype_of<T>());
  cpu_backend().fill_bernoulli(t, r, p);
  std::copy_n(t.data<T>(), n, out);
}
template <class T>
void dropout(const T* x, T* y, int64_t n, double p, const Reservation& r) {
  const Tensor t = Tensor::from_vector(std::vector<T>(x, x + n), {n});
  const Tensor out = cpu_backend().dropout(t, p, r);
  std::copy_n(out.data<T>(), n, y);
}

Reservation make_reservation(uint64_t seed, uint64_t sub, uint64_t offset, uint64_t count) {
  Reservation r;
  r.seed = seed;
  r.subsequence = sub;
  r.offset = offset;
  r.count = count;
  return r;
}

uint32_t word(const Reservation& r, uint64_t i) {
  return stream_word(r.seed, r.subsequence, r.offset + i);
}

template <class T>
bool same_scalar_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Sizes around chunk (1024) and pair boundaries, and above the parallel
// threshold; offsets on and off block boundaries, and where the low 32 bits
// of the block counter wrap inside a vector step.
const int64_t kSizes[] = {1, 2, 3, 5, 1023, 1024, 1025, 4097, 40001};
const uint64_t kOffsets[] = {0, 1, 2, 3, 4, 4096 + 6, (uint64_t{1} << 34) - 20};

TEST(Fill, UniformIsTheWordMapping) {
  for (int64_t n : kSizes) {
    for (uint64_t off : kOffsets) {
      const Reservation r = make_reservation(11, 3, off, uniform_words<double>(n));
      std::vector<float> f(n);
      std::vector<double> d(n);
      fill_uniform(f.data(), n, r);
      fill_uniform(d.data(), n, r);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_scalar_bits(f[i], uniform_float(word(r, i))))
            << "n " << n << " off " << off << " i " << i;
        ASSERT_TRUE(same_scalar_bits(d[i], uniform_double(word(r, 2 * i), word(r, 2 * i + 1))))
            << n << " " << i;
        ASSERT_TRUE(f[i] > 0.0f && f[i] <= 1.0f);
        ASSERT_TRUE(d[i] > 0.0 && d[i] <= 1.0);
      }
    }
  }
}

TEST(Fill, UniformEndpoints) {
  EXPECT_EQ(uniform_float(0), 0x1p-33f);
  EXPECT_EQ(uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_double(0, 0), 0x1p-54);
  // The words overlap in bits 21..31, which these cancel: all 53 bits set.
  EXPECT_EQ(uniform_double(0x001fffffu, 0xffffffffu), 1.0);
}

TEST(Fill, NormalIsCuRandsPairing) {
  for (int64_t n : kSizes) {
    for (uint64_t off : kOffsets) {
      const Reservation r = make_reservation(5, 0, off, normal_words<double>(n));
      std::vector<float> f(n);
      std::vector<double> d(n);
      fill_normal(f.data(), n, r);
      fill_normal(d.data(), n, r);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = i / 2;
        float f0, f1;
        box_muller(word(r, 2 * j), word(r, 2 * j + 1), f0, f1);
        double d0, d1;
        box_muller(word(r, 4 * j), word(r, 4 * j + 1), word(r, 4 * j + 2), word(r, 4 * j + 3), d0,
                   d1);
        ASSERT_TRUE(same_scalar_bits(f[i], i % 2 == 0 ? f0 : f1))
            << "n " << n << " off " << off << " i " << i;
        ASSERT_TRUE(same_scalar_bits(d[i], i % 2 == 0 ? d0 : d1))
            << "n " << n << " off " << off << " i " << i;
      }
    }
  }
}

TEST(Fill, BernoulliAndDropoutUseWordI) {
  const int64_t n = 40001;
  const Reservation r = make_reservation(9, 1, 2, n);
  const double p = 0.3;
  const float keep = bernoulli_threshold(1.0 - p);
  std::vector<float> mask(n), x(n), y(n);
  std::vector<double> xd(n), yd(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = float(i % 17) - 8.0f;
    xd[i] = x[i];
  }
  fill_bernoulli(mask.data(), n, p, r);
  dropout(x.data(), y.data(), n, p, r);
  dropout(xd.data(), yd.data(), n, p, r);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(mask[i], bernoulli(word(r, i), bernoulli_threshold(p)) ? 1.0f : 0.0f);
    const bool kept = bernoulli(word(r, i), keep);
    ASSERT_EQ(y[i], kept ? x[i] * float(1.0 / 0.7) : 0.0f) << i;
    ASSERT_EQ(yd[i], kept ? xd[i] * (1.0 / 0.7) : 0.0) << i;
  }
}

// f32 dropout on a block-aligned reservation uses its words in registers as
// Philox makes them (steps of 128 elements, the rest of a chunk from a
// buffer): sizes around both, offsets on and off blocks, in place too.
TEST(Fill, DropoutIsTheWordMappingAtAnySizeAndOffset) {
  const double p = 0.25;
  const float keep = bernoulli_threshold(1.0 - p), scale = float(1.0 / (1.0 - p));
  for (int64_t n : {1, 16, 127, 128, 129, 1000, 1024, 1153, 40001}) {
    for (uint64_t off : {0, 2, 4, 4096 + 8}) {
      const Reservation r = make_reservation(77, 2, off, uint64_t(n));
      std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i % 13) - 6.5f;
      std::vector<float> in_place = x;
      dropout(x.data(), y.data(), n, p, r);
      dropout(in_place.data(), in_place.data(), n, p, r);
      for (int64_t i = 0; i < n; ++i) {
        const float want = bernoulli(word(r, i), keep) ? x[size_t(i)] * scale : 0.0f;
        ASSERT_TRUE(same_scalar_bits(y[size_t(i)], want))
            << "n " << n << " off " << off << " i " << i;
        ASSERT_TRUE(same_scalar_bits(in_place[size_t(i)], want)) << "n " << n << " off " << off;
      }
    }
  }
}

TEST(Fill, DropoutEdgeProbabilities) {
  const int64_t n = 1000;
  const Reservation r = make_reservation(1, 0, 0, n);
  std::vector<float> x(n, 2.5f), y(n);
  x[3] = NAN;
  dropout(x.data(), y.data(), n, 0.0, r);
  for (int64_t i = 0; i < n; ++i) {
    if (i != 3) {
      ASSERT_EQ(y[i], 2.5f);
    }
  }
  EXPECT_TRUE(std::isnan(y[3]));
  dropout(x.data(), y.data(), n, 1.0, r);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << "p = 1 drops everything, NaN included";
  // In place (x == y) gives the same result as out of place.
  std::vector<float> a(n, 1.0f), b(n);
  dropout(a.data(), b.data(), n, 0.5, r);
  dropout(a.data(), a.data(), n, 0.5, r);
  EXPECT_EQ(a, b);
}

// Outputs past 16 MiB leave through non-temporal stores from a staging
// buffer; an output that starts off a vector boundary has a plain head.
TEST(Fill, LargeOutputsGiveTheSameValues) {
  const int64_t n = (int64_t{16} << 20) / 4 + 1001;
  const Reservation r = make_reservation(21, 5, 0, normal_words<float>(n));
  // 4 bytes off the allocation's alignment.
  const Tensor out = Tensor::empty({n + 1}).slice(0, 1, n + 1);
  const float* o = out.data<float>();
  cpu_backend().fill_uniform(out, r, 0.0, 1.0);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(same_scalar_bits(o[i], uniform_float(word(r, i)))) << i;
  const Tensor dropped = cpu_backend().dropout(Tensor::full({n}, 3.0), 0.4, r);
  const float keep = bernoulli_threshold(0.6), scale = float(1.0 / 0.6);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dropped.data<float>()[i], bernoulli(word(r, i), keep) ? 3.0f * scale : 0.0f) << i;
  cpu_backend().fill_normal(out, r, 0.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    float z0, z1;
    box_muller(word(r, 2 * (i / 2)), word(r, 2 * (i / 2) + 1), z0, z1);
    ASSERT_TRUE(same_scalar_bits(o[i], i % 2 == 0 ? z0 : z1)) << i;
  }
}

TEST(Fill, BernoulliThresholdIsTheLargestFloatNotAboveP) {
  for (double p : {0.0, 1.0, 0.1, 0.3, 0.5, 1.0 / 3.0, 0.9999999999}) {
    const float t = bernoulli_threshold(p);
    EXPECT_LE(double(t), p);
    EXPECT_GT(double(std::nextafter(t, 2.0f)), p) << p;
  }
}

TEST(Fill, RejectsShortReservations) {
  std::vector<float> f(10);
  std::vector<double> d(10);
  const Reservation r = make_reservation(0, 0, 0, 12);
  EXPECT_THROW(fill_uniform(d.data(), 10, r), Error);  // needs 20 words
  EXPECT_THROW(fill_normal(d.data(), 10, r), Error);   // needs 20 words
  EXPECT_NO_THROW(fill_normal(f.data(), 10, r));
  EXPECT_THROW(fill_uniform(f.data(), -1, r), Error);
}

// The output for a reservation does not depend on the threads: the
// engine's pool at 1, 2 and 3 threads.
TEST(Fill, IdenticalWhateverRunsTheChunks) {
  const int64_t n = 300001;  // several chunks per thread, odd for the normal tail
  const Reservation r = make_reservation(2026, 17, 8, normal_words<double>(n));
  auto run = [&] {
    std::vector<float> uf(n), nf(n), bf(n), x(n, 1.0f), yf(n);
    std::vector<double> ud(n), nd(n);
    fill_uniform(uf.data(), n, r);
    fill_uniform(ud.data(), n, r);
    fill_normal(nf.data(), n, r);
    fill_normal(nd.data(), n, r);
    fill_bernoulli(bf.data(), n, 0.25, r);
    dropout(x.data(), yf.data(), n, 0.1, r);
    return std::make_tuple(uf, ud, nf, nd, bf, yf);
  };
  const int saved = threads::num_threads();
  threads::set_num_threads(1);
  const auto serial = run();
  threads::set_num_threads(2);
  EXPECT_TRUE(run() == serial);
  threads::set_num_threads(3);
  EXPECT_TRUE(run() == serial);
  threads::set_num_threads(saved);
}

// Max ulp distance of the portable functions from long double, over a dense
// sweep of their Box-Muller domains.
template <class T>
double ulps_from(T got, long double want) {
  const long double ulp =
      std::nextafter(T(std::fabs(double(want))), T(INFINITY)) - T(std::fabs(double(want)));
  return double(std::fabs((long double)got - want) / ulp);
}

TEST(Fill, PortableMathWithinTwoUlps) {
  double log_f = 0, sin_f = 0, cos_f = 0, log_d = 0, sin_d = 0, cos_d = 0;
  for (uint32_t k = 0; k < 500000; ++k) {
    const uint32_t w = k * 8589u + k / 3;  // spread over all 32-bit words
    const float u = uniform_float(w);
    if (u < 1.0f)
      log_f = std::max(log_f, ulps_from(detail::log_portable(u), std::log((long double)u)));
    const float theta = std::fma(float(w), 0x1.921fb6p-30f, 0x1.921fb6p-31f);
    float s, c;
    detail::sincos_portable(theta, s, c);
    sin_f = std::max(sin_f, ulps_from(s, std::sin((long double)theta)));
    cos_f = std::max(cos_f, ulps_from(c, std::cos((long double)theta)));
    const double ud = uniform_double(w, w * 2654435761u);
    if (ud < 1.0)
      log_d = std::max(log_d, ulps_from(detail::log_portable(ud), std::log((long double)ud)));
    const double t = 2.0 * ud;
    double sd, cd;
    detail::sincospi_portable(t, sd, cd);
    // Reference: t = q/2 + r exactly, then long double sin/cos of pi r (the
    // product pi t would lose the result's relative accuracy near zeros).
    const long double pi = 3.141592653589793238462643383279502884L;
    const long double q = std::nearbyint(2.0L * t), r = t - q / 2;
    const long double sr = std::sin(pi * r), cr = std::cos(pi * r);
    const int quadrant = int(q) & 3;
    const long double sin_ref = quadrant == 0 ? sr : quadrant == 1 ? cr : quadrant == 2 ? -sr : -cr;
    const long double cos_ref = quadrant == 0 ? cr : quadrant == 1 ? -sr : quadrant == 2 ? -cr : sr;
    sin_d = std::max(sin_d, ulps_from(sd, sin_ref));
    cos_d = std::max(cos_d, ulps_from(cd, cos_ref));
  }
  RecordProperty("max_ulp", ::testing::PrintToString(
                                std::vector<double>{log_f, sin_f, cos_f, log_d, sin_d, cos_d}));
  EXPECT_LE(log_f, 2.0);
  EXPECT_LE(sin_f, 2.0);
  EXPECT_LE(cos_f, 2.0);
  EXPECT_LE(log_d, 2.0);
  EXPECT_LE(sin_d, 2.0);
  EXPECT_LE(cos_d, 2.0);
}

// Kolmogorov-Smirnov statistic of `x` (sorted in place) against `cdf`.
template <class T, class Cdf>
double ks_statistic(std::vector<T>& x, Cdf cdf) {
  std::sort(x.begin(), x.end());
  const double n = double(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = cdf(double(x[i]));
    d = std::max({d, f - double(i) / n, double(i + 1) / n - f});
  }
  return d;
}

// Sample moments: mean, variance, skewness, excess kurtosis.
template <class T>
std::vector<double> moments(const std::vector<T>& x) {
  double m = 0;
  for (T v : x) m += double(v);
  m /= double(x.size());
  double m2 = 0, m3 = 0, m4 = 0;
  for (T v : x) {
    const double d = double(v) - m;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  const double n = double(x.size());
  m2 /= n;
  m3 /= n;
  m4 /= n;
  return {m, m2, m3 / std::pow(m2, 1.5), m4 / (m2 * m2) - 3.0};
}

// At n = 2^20 the standard errors are about 1e-3 (mean, variance) and 2.4e-3
// (skewness), 4.8e-3 (kurtosis); bounds are 5 sigma. The KS bound 1.95/sqrt(n)
// is the 0.1% critical value.
constexpr int64_t kStatN = 1 << 20;

template <class T>
void check_uniform(uint64_t seed) {
  std::vector<T> x(kStatN);
  fill_uniform(x.data(), kStatN, make_reservation(seed, 0, 0, uniform_words<T>(kStatN)));
  const std::vector<double> m = moments(x);
  EXPECT_NEAR(m[0], 0.5, 5 * std::sqrt(1.0 / 12 / kStatN));
  EXPECT_NEAR(m[1], 1.0 / 12, 5 * std::sqrt(1.0 / 180 / kStatN));
  // Chi-square over 1000 equal bins: 999 degrees of freedom, mean 999, sd 44.7.
  std::vector<int64_t> bins(1000);
  for (T v : x) ++bins[std::min<int64_t>(999, int64_t(double(v) * 1000))];
  double chi2 = 0;
  const double expected = double(kStatN) / 1000;
  for (int64_t b : bins) chi2 += (double(b) - expected) * (double(b) - expected) / expected;
  EXPECT_LT(std::fabs(chi2 - 999), 5 * 44.7) << "chi2 " << chi2;
  EXPECT_LT(ks_statistic(x, [](double v) { return v; }), 1.95 / std::sqrt(double(kStatN)));
}

template <class T>
void check_normal(uint64_t seed) {
  std::vector<T> x(kStatN);
  fill_normal(x.data(), kStatN, make_reservation(seed, 4, 0, normal_words<T>(kStatN)));
  const std::vector<double> m = moments(x);
  const double n = double(kStatN);
  EXPECT_NEAR(m[0], 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(m[1], 1.0, 5 * std::sqrt(2 / n));
  EXPECT_NEAR(m[2], 0.0, 5 * std::sqrt(6 / n));
  EXPECT_NEAR(m[3], 0.0, 5 * std::sqrt(24 / n));
  EXPECT_LT(ks_statistic(x, [](double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)); }),
            1.95 / std::sqrt(n));
}

TEST(FillStatistics, UniformFloat) { check_uniform<float>(123); }
TEST(FillStatistics, UniformDouble) { check_uniform<double>(456); }
TEST(FillStatistics, NormalFloat) { check_normal<float>(789); }
TEST(FillStatistics, NormalDouble) { check_normal<double>(1011); }

// Even and odd elements of a normal fill (sin and cos of one angle) are
// uncorrelated: correlation within 5 / sqrt(pairs).
TEST(FillStatistics, NormalPairsUncorrelated) {
  std::vector<float> x(kStatN);
  fill_normal(x.data(), kStatN, make_reservation(77, 0, 0, normal_words<float>(kStatN)));
  double sxy = 0;
  for (int64_t j = 0; j < kStatN / 2; ++j) sxy += double(x[2 * j]) * double(x[2 * j + 1]);
  EXPECT_NEAR(sxy / double(kStatN / 2), 0.0, 5 / std::sqrt(double(kStatN / 2)));
}

TEST(FillStatistics, BernoulliFrequency) {
  for (double p : {0.01, 0.1, 0.5, 0.9}) {
    std::vector<float> x(kStatN);
    fill_bernoulli(x.data(), kStatN, p, make_reservation(31, 2, 0, kStatN));
    double ones = 0;
    for (float v : x) ones += v;
    EXPECT_NEAR(ones / kStatN, p, 5 * std::sqrt(p * (1 - p) / kStatN)) << p;
  }
}

}  // namespace
}  // namespace reprise::rng
