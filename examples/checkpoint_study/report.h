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
  int64_t tokens_flipped = -1;        // -1: no router in the model
  int64_t peak_saved_activation = 0;  // bytes
  double step_seconds = 0;
  int64_t rng_bytes_stashed = 0;
  int64_t mismatches = 0;
  std::string first_mismatch;  // "model.layers.3 dropout: 412 elements" or empty
};

// Aligned columns for the terminal.
std::string format_text(const std::vector<Row>& rows);
std::string format_markdown(const std::vector<Row>& rows);
std::string format_csv(const std::vector<Row>& rows);

// Writes `text` to `path`; raises an Error naming the file on failure.
void write_file(const std::string& path, const std::string& text);

}  // namespace study
