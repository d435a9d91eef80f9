#include "report.h"

#include <algorithm>
#include <cstdio>

namespace study {

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

namespace {

std::vector<std::string> headers(const std::string& time_column) {
  return {
      "model",          "policy",         "rng",         "verifier",      "noise ulps",
      "max |dgrad|",    "rel L2 |dgrad|", "bitwise",     "routing flips", "expert loads changed",
      "peak saved act", time_column,      "RNG stashed", "mismatches",    "first mismatch",
      "stands for"};
}

// The cells as people read them: KiB, milliseconds, 3 significant digits.
std::vector<std::string> display_cells(const Row& r) {
  const bool exact = r.bitwise_equal;
  return {r.model,
          r.policy,
          r.rng,
          r.verifier,
          r.noise,
          exact ? "0" : printf_string("%.2e", r.max_abs_grad_diff),
          exact ? "0" : printf_string("%.2e", r.rel_l2_grad_diff),
          exact ? "yes" : "no",
          r.routing_flips < 0 ? "-" : printf_string("%.4g", r.routing_flips),
          r.expert_loads_changed < 0 ? "-" : printf_string("%.4g", r.expert_loads_changed),
          printf_string("%.0f KiB", double(r.peak_saved_activation) / 1024.0),
          printf_string("%.1f", r.step_seconds * 1e3),
          std::to_string(r.rng_bytes_stashed) + " B",
          printf_string("%.4g", r.mismatches),
          r.first_mismatch.empty() ? "-" : r.first_mismatch,
          r.what};
}

// The cells as a program reads them: bytes, seconds, full precision.
std::vector<std::string> raw_cells(const Row& r) {
  return {r.model,
          r.policy,
          r.rng,
          r.verifier,
          r.noise,
          printf_string("%.9g", r.max_abs_grad_diff),
          printf_string("%.9g", r.rel_l2_grad_diff),
          r.bitwise_equal ? "1" : "0",
          printf_string("%.9g", r.routing_flips),
          printf_string("%.9g", r.expert_loads_changed),
          std::to_string(r.peak_saved_activation),
          printf_string("%.6f", r.step_seconds),
          std::to_string(r.rng_bytes_stashed),
          printf_string("%.9g", r.mismatches),
          r.first_mismatch,
          r.what};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string format_text(const std::vector<Row>& rows, const std::string& time_column) {
  std::vector<std::vector<std::string>> cells{headers(time_column)};
  for (const Row& r : rows) cells.push_back(display_cells(r));
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      text += line[i];
      if (i + 1 < line.size()) text += std::string(width[i] - line[i].size() + 2, ' ');
    }
    out += text + "\n";
  }
  return out;
}

std::string format_markdown(const std::vector<Row>& rows, const std::string& time_column) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    out += "|";
    for (const std::string& c : cells) {
      out += ' ';
      out += markdown_cell(c);
      out += " |";
    }
    out += '\n';
  };
  const std::vector<std::string> h = headers(time_column);
  line(h);
  line(std::vector<std::string>(h.size(), "---"));
  for (const Row& r : rows) line(display_cells(r));
  return out;
}

std::string format_csv(const std::vector<Row>& rows) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_field(cells[i]);
    }
    out += '\n';
  };
  line({"model", "policy", "rng", "verifier", "noise_ulps", "max_abs_grad_diff", "rel_l2_grad_diff",
        "bitwise_equal", "routing_flips", "expert_loads_changed", "peak_saved_activation_bytes",
        "step_seconds", "rng_bytes_stashed", "mismatches", "first_mismatch", "stands_for"});
  for (const Row& r : rows) line(raw_cells(r));
  return out;
}

}  // namespace study
