#pragma once
// Rotary position embedding's frequencies per rope type, as transformers
// computes them (modeling_rope_utils.py's rope init functions): the
// inverse frequencies inv_freq (one per rotated pair) and the factor on cos
// and sin, which ops::rotary takes. Every step is the f32 arithmetic of
// HF's tensor code (scalars rounded to f32 where torch rounds them, its
// reciprocal-then-multiply for a scalar divided by a tensor), so the tables
// are HF's bit for bit wherever the C library's powf agrees with torch's.
//
//   default  inv_freq[i] = 1 / theta^(2i / dim)
//   linear   default / factor
//   dynamic  default with theta * (factor L / max_pos - (factor - 1))^(dim / (dim - 2))
//            when a forward's length L = largest position + 1 passes
//            max_position_embeddings (NTK scaling; below it, default)
//   llama3   default, wavelengths above original_max / low_freq_factor
//            divided by factor, those between original_max / high_freq_factor
//            and that blended (Llama 3.1's scheme)
//   yarn     a ramp between interpolated (default / factor) and
//            extrapolated (default) frequencies over the dims between the
//            beta_fast and beta_slow rotations of original_max, and an
//            attention factor on cos and sin (0.1 mscale ln(factor) + 1 by
//            default)
//
// dim = the rotated width (head_dim; DeepSeek's qk_rope_head_dim).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reprise::nn {

enum class RopeType { standard, linear, dynamic, llama3, yarn };
// HF's rope_type names: "default", "linear", "dynamic", "llama3", "yarn".
const char* rope_type_name(RopeType t);
std::optional<RopeType> rope_type_named(const std::string& name);

// The rope_parameters (rope_scaling) fields beyond rope_theta, HF's names.
struct RopeScaling {
  RopeType type = RopeType::standard;
  double factor = 1.0;                           // linear, dynamic, llama3, yarn
  int64_t original_max_position_embeddings = 0;  // llama3, yarn
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  std::optional<double> attention_factor;        // yarn; derived when unset
  double beta_fast = 32.0;                       // yarn
  double beta_slow = 1.0;                        // yarn
  std::optional<double> mscale;                  // yarn (DeepSeek)
  std::optional<double> mscale_all_dim;          // yarn (DeepSeek)
  bool truncate = true;                          // yarn: floor/ceil the correction range

  // Raises an Error naming the field when out of range for the type
  // (factor >= 1, llama3's factors ordered, yarn's betas, ...).
  void validate() const;
  // "llama3 x8 (original 8192)", "default"
  std::string describe() const;
  friend bool operator==(const RopeScaling&, const RopeScaling&) = default;
};

// One rope: its theta and scaling (a layer type's entry of rope_parameters).
struct LayerRope {
  double theta = 10000.0;
  RopeScaling scaling;
  friend bool operator==(const LayerRope&, const LayerRope&) = default;
};

struct RopeFrequencies {
  std::vector<float> inv_freq;  // (dim / 2)
  float attention_scaling = 1;  // on cos and sin
};

// The frequencies of a forward whose positions are below `length` (only
// dynamic reads it). theta is rope_theta, max_position_embeddings the
// config's.
RopeFrequencies rope_frequencies(const RopeScaling& scaling, double theta, int64_t dim,
                                 int64_t max_position_embeddings, int64_t length);

// Whether the frequencies depend on the forward's length (dynamic): then a
// KV-cache decode past max_position_embeddings rotates each new position by
// the frequencies of its own length, as HF does, not by the whole
// sequence's.
bool rope_depends_on_length(const RopeScaling& scaling);

// YaRN's factor on the softmax scale of MLA attention (DeepSeek):
// mscale(factor, mscale_all_dim)^2 when the type is not default and
// mscale_all_dim is set and nonzero, else 1.
double rope_softmax_scale_factor(const RopeScaling& scaling);

}  // namespace reprise::nn
