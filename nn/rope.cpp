#include "nn/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "base/error.h"

namespace reprise::nn {

const char* rope_type_name(RopeType t) {
  switch (t) {
    case RopeType::standard:
      return "default";
    case RopeType::linear:
      return "linear";
    case RopeType::dynamic:
      return "dynamic";
    case RopeType::llama3:
      return "llama3";
    case RopeType::yarn:
      return "yarn";
  }
  return "?";
}

std::optional<RopeType> rope_type_named(const std::string& name) {
  for (RopeType t : {RopeType::standard, RopeType::linear, RopeType::dynamic, RopeType::llama3,
                     RopeType::yarn}) {
    if (name == rope_type_name(t)) return t;
  }
  return std::nullopt;
}

void RopeScaling::validate() const {
  const char* type_name = rope_type_name(type);
  if (type == RopeType::standard) return;
  REPRISE_CHECK(std::isfinite(factor) && factor >= 1, "rope ", type_name,
                ": factor must be >= 1, got ", factor);
  if (type == RopeType::llama3 || type == RopeType::yarn) {
    REPRISE_CHECK(original_max_position_embeddings > 0, "rope ", type_name,
                  ": original_max_position_embeddings must be positive, got ",
                  original_max_position_embeddings);
  }
  if (type == RopeType::llama3) {
    REPRISE_CHECK(std::isfinite(low_freq_factor) && std::isfinite(high_freq_factor) &&
                      low_freq_factor > 0 && high_freq_factor > low_freq_factor,
                  "rope llama3: expected 0 < low_freq_factor < high_freq_factor, got ",
                  low_freq_factor, " and ", high_freq_factor);
  }
  if (type == RopeType::yarn) {
    REPRISE_CHECK(std::isfinite(beta_fast) && std::isfinite(beta_slow) && beta_slow > 0 &&
                      beta_fast > beta_slow,
                  "rope yarn: expected 0 < beta_slow < beta_fast, got beta_slow ", beta_slow,
                  " and beta_fast ", beta_fast);
    REPRISE_CHECK(!attention_factor || (std::isfinite(*attention_factor) && *attention_factor > 0),
                  "rope yarn: attention_factor must be positive, got ",
                  attention_factor.value_or(0));
    for (const auto& [name, v] :
         {std::pair{"mscale", mscale}, {"mscale_all_dim", mscale_all_dim}}) {
      REPRISE_CHECK(!v || std::isfinite(*v), "rope yarn: ", name, " must be finite");
    }
  }
}

std::string RopeScaling::describe() const {
  std::ostringstream s;
  s << rope_type_name(type);
  if (type != RopeType::standard) s << " x" << factor;
  if (original_max_position_embeddings > 0) {
    s << " (original " << original_max_position_embeddings << ")";
  }
  return s.str();
}

namespace {

// What torch does with a Python float met by an f32 tensor: round it to f32.
float f32(double v) { return float(v); }

// HF's default frequencies: 1 / base ** (arange(0, dim, 2).float() / dim),
// each step in f32; `base` is the f32 the Python float becomes.
std::vector<float> default_inv_freq(float base, int64_t dim) {
  std::vector<float> f(size_t(dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 1.0f / std::pow(base, float(2 * int64_t(i)) / float(dim));
  }
  return f;
}

// Llama 3.1: the wavelengths 2 pi / inv_freq (torch: reciprocal, then times
// the f32 of 2 pi) sort each frequency into unchanged (short wavelengths),
// divided by factor (long ones) or blended between.
std::vector<float> llama3_inv_freq(const RopeScaling& s, double theta, int64_t dim) {
  std::vector<float> f = default_inv_freq(f32(theta), dim);
  const double old_context = double(s.original_max_position_embeddings);
  const float low_wavelen = f32(old_context / s.low_freq_factor);
  const float high_wavelen = f32(old_context / s.high_freq_factor);
  const float factor = f32(s.factor), two_pi = f32(2 * std::numbers::pi);
  const float low = f32(s.low_freq_factor), span = f32(s.high_freq_factor - s.low_freq_factor);
  for (float& x : f) {
    const float wavelen = (1.0f / x) * two_pi;
    const float llama = wavelen > low_wavelen ? x / factor : x;
    const float smooth = ((1.0f / wavelen) * f32(old_context) - low) / span;
    const float smoothed = (1.0f - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    x = medium ? smoothed : llama;
  }
  return f;
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// YaRN: the dims between the beta_fast and beta_slow rotations over
// original_max positions ramp from extrapolation (the default frequency)
// to interpolation (default / factor). The range is computed in f64 as HF's
// math module does, the ramp and the blend in f32.
RopeFrequencies yarn_frequencies(const RopeScaling& s, double theta, int64_t dim) {
  const float base = f32(theta);
  const double original = double(s.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return (double(dim) * std::log(original / (rotations * 2 * std::numbers::pi))) /
           (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a singular ramp
  const float factor = f32(s.factor), ramp_low = f32(low), ramp_span = f32(high - low);
  RopeFrequencies r;
  r.inv_freq.resize(size_t(dim / 2));
  for (size_t i = 0; i < r.inv_freq.size(); ++i) {
    const float pos_freq = std::pow(base, float(2 * int64_t(i)) / float(dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((float(int64_t(i)) - ramp_low) / ramp_span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    r.inv_freq[i] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  double attention = 0;
  if (s.attention_factor) {
    attention = *s.attention_factor;
  } else if (s.mscale && s.mscale_all_dim && *s.mscale != 0 && *s.mscale_all_dim != 0) {
    attention = yarn_mscale(s.factor, *s.mscale) / yarn_mscale(s.factor, *s.mscale_all_dim);
  } else {
    attention = yarn_mscale(s.factor, 1.0);
  }
  r.attention_scaling = f32(attention);
  return r;
}

// Dynamic NTK: past max_position_embeddings the base grows with the
// forward's length L. HF recomputes it from tensors then, so in f32:
// base * ((factor * L / max_pos) - (factor - 1)) ** (dim / (dim - 2)).
std::vector<float> dynamic_inv_freq(const RopeScaling& s, double theta, int64_t dim,
                                    int64_t max_pos, int64_t length) {
  if (length <= max_pos) {
    // HF's initial frequencies (length = max_pos): the same formula in f64,
    // whose growth term is 1 up to rounding.
    const double growth = (s.factor * double(max_pos) / double(max_pos)) - (s.factor - 1);
    return default_inv_freq(f32(theta * std::pow(growth, double(dim) / double(dim - 2))), dim);
  }
  const float growth = std::pow(f32(s.factor) * float(length) / float(max_pos) - f32(s.factor - 1),
                                f32(double(dim) / double(dim - 2)));
  return default_inv_freq(f32(theta) * growth, dim);
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeScaling& s, double theta, int64_t dim,
                                 int64_t max_position_embeddings, int64_t length) {
  REPRISE_CHECK(dim > 0 && dim % 2 == 0, "rope: the rotated width must be even and positive, got ",
                dim);
  REPRISE_CHECK(std::isfinite(theta) && theta > 0, "rope: rope_theta must be positive, got ",
                theta);
  s.validate();
  switch (s.type) {
    case RopeType::standard:
      return {.inv_freq = default_inv_freq(f32(theta), dim)};
    case RopeType::linear: {
      std::vector<float> f = default_inv_freq(f32(theta), dim);
      for (float& x : f) x /= f32(s.factor);
      return {.inv_freq = std::move(f)};
    }
    case RopeType::dynamic:
      return {.inv_freq = dynamic_inv_freq(s, theta, dim, max_position_embeddings, length)};
    case RopeType::llama3:
      return {.inv_freq = llama3_inv_freq(s, theta, dim)};
    case RopeType::yarn:
      return yarn_frequencies(s, theta, dim);
  }
  REPRISE_FAIL("rope: unknown rope type");
}

bool rope_depends_on_length(const RopeScaling& s) { return s.type == RopeType::dynamic; }

double rope_softmax_scale_factor(const RopeScaling& s) {
  if (s.type == RopeType::standard || !s.mscale_all_dim || *s.mscale_all_dim == 0) return 1.0;
  const double m = yarn_mscale(s.factor, *s.mscale_all_dim);
  return m * m;
}

}  // namespace reprise::nn
