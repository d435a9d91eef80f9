#include "nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "rng/distributions.h"
#include "rng/words.h"

namespace reprise::nn {

void SamplingOptions::validate() const {
  REPRISE_CHECK(temperature >= 0 && std::isfinite(temperature),
                "SamplingOptions: temperature must be >= 0 (0: greedy), got ", temperature);
  REPRISE_CHECK(top_k >= 0, "SamplingOptions: top_k must be >= 0 (0: no limit), got ", top_k);
  REPRISE_CHECK(top_p > 0 && top_p <= 1, "SamplingOptions: top_p must be in (0, 1], got ", top_p);
}

std::string SamplingOptions::describe() const {
  if (temperature == 0) return "greedy";
  std::ostringstream s;
  s << "temperature " << temperature;
  if (top_k > 0) s << ", top-k " << top_k;
  if (top_p < 1) s << ", top-p " << top_p;
  return s.str();
}

TokenSampler::TokenSampler(const SamplingOptions& options, uint64_t seed, std::string stream)
    : options_(options), gen_(seed), stream_(std::move(stream)) {
  options_.validate();
}

int64_t TokenSampler::next(const Tensor& logits) {
  REPRISE_CHECK(logits.defined() && logits.dim() == 1 && logits.size(0) >= 1 &&
                    (logits.dtype() == DType::f32 || logits.dtype() == DType::f64),
                "TokenSampler: expected logits of shape (V) f32 or f64, got ",
                logits.defined() ? logits.describe() : std::string("undefined"));
  const rng::Reservation r = gen_.reserve(stream_, 2);
  uint32_t w[2];
  rng::generate_words(r.seed, r.subsequence, r.offset, w, 2);

  std::vector<double> z = logits.to_vector<double>();  // (V)
  const int64_t V = int64_t(z.size());
  for (int64_t i = 0; i < V; ++i) {
    REPRISE_CHECK(!std::isnan(z[size_t(i)]), "TokenSampler: logit ", i, " of ", V, " is NaN");
  }
  // Decreasing logit, ties by lower id.
  auto before = [&](int64_t a, int64_t b) {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  };
  if (options_.temperature == 0) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i) best = before(i, best) ? i : best;
    return best;
  }
  for (double& x : z) x /= options_.temperature;

  // The candidates, in the order the sample walks them.
  std::vector<int64_t> kept(z.size());
  std::iota(kept.begin(), kept.end(), int64_t(0));
  if (options_.top_k > 0 && options_.top_k < V) {
    std::partial_sort(kept.begin(), kept.begin() + options_.top_k, kept.end(), before);
    kept.resize(size_t(options_.top_k));
  } else if (options_.top_p < 1) {
    std::sort(kept.begin(), kept.end(), before);
  }
  double top = -INFINITY;
  for (int64_t i : kept) top = std::max(top, z[size_t(i)]);
  REPRISE_CHECK(top > -INFINITY, "TokenSampler: every logit of the ", kept.size(),
                " candidates is -inf");
  std::vector<double> weight(kept.size());  // exp(z - max), unnormalized probabilities
  double total = 0;
  for (size_t j = 0; j < kept.size(); ++j) total += weight[j] = std::exp(z[size_t(kept[j])] - top);
  if (options_.top_p < 1) {
    double mass = 0;
    size_t n = 0;
    while (n < kept.size() && (n == 0 || mass < options_.top_p * total)) mass += weight[n++];
    kept.resize(n);
    weight.resize(n);
    total = mass;
  }
  const double target = rng::uniform_double(w[0], w[1]) * total;
  double cumulative = 0;
  for (size_t j = 0; j < kept.size(); ++j) {
    cumulative += weight[j];
    if (cumulative >= target) return kept[j];
  }
  return kept.back();  // rounding: target is at most total
}

}  // namespace reprise::nn
