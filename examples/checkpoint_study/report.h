#pragma once
// The study's table: one row per scenario, rendered for the terminal, as
// Markdown and as CSV (raw numbers: bytes, seconds).

#include <cstdint>
#include <string>
#include <vector>

namespace study {

struct Row {
  std::string model;     // "llama p=0.1"
  std::string policy;    // "full", "op-sac", "full + save router"
  std::string rng;       // recorded | stash | fresh
  std::string verifier;  // none | metadata | bitwise
  std::string noise;     // "0", "1 (all)", "1 (router)"
  std::string what;      // what the scenario stands for ("PyTorch preserve_rng_state=False")
  double max_abs_grad_diff = 0;
  double rel_l2_grad_diff = 0;
  bool bitwise_equal = true;
  // Over all layers, on recompute: (token, top-k slot) entries routed to
  // another expert, and experts whose token count changed; -1: no router.
  // Noisy scenarios give the mean over noise seeds (as for rel_l2 and
  // mismatches; max_abs is the largest, bitwise_equal holds for all).
  double routing_flips = -1;
  double expert_loads_changed = -1;
  int64_t peak_saved_activation = 0;  // bytes
  double step_seconds = 0;
  int64_t rng_bytes_stashed = 0;
  double mismatches = 0;
  std::string first_mismatch;  // "model.layers.3 dropout: 412 elements" or empty
};

// `v` printed by a printf `format` of one double ("%.2f MiB"), at most 63
// characters.
std::string printf_string(const char* format, double v);

// Aligned columns for the terminal, and Markdown; `time_column` names the
// step time's column ("step CPU ms").
std::string format_text(const std::vector<Row>& rows, const std::string& time_column);
std::string format_markdown(const std::vector<Row>& rows, const std::string& time_column);
std::string format_csv(const std::vector<Row>& rows);

}  // namespace study
