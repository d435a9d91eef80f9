// The pre-tokenizer split regexes of Llama 3 and GPT-2 on one text:
// reprise's engine (io/regex.h) beside Oniguruma, the engine Hugging Face
// tokenizers run them with, on one thread. It first checks that the two
// find the same match spans, then times them in alternating rounds and
// prints each side's median rate. Built when Oniguruma (libonig-dev) is
// installed:
//
//   git ls-files '*.md' | xargs cat > /tmp/text.txt
//   build/bench/bench_regex_oniguruma /tmp/text.txt [rounds]
#include <oniguruma.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/regex.h"

namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

constexpr const char* kPatterns[][2] = {
    {"llama3",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"gpt2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
};

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Oniguruma {
 public:
  explicit Oniguruma(const char* pattern) {
    OnigErrorInfo info;
    const auto* p = reinterpret_cast<const UChar*>(pattern);
    if (onig_new(&regex_, p, p + std::strlen(pattern), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                 ONIG_SYNTAX_RUBY, &info) != ONIG_NORMAL) {
      std::fprintf(stderr, "oniguruma refuses %s\n", pattern);
      std::exit(1);
    }
    region_ = onig_region_new();
  }
  ~Oniguruma() {
    onig_region_free(region_, 1);
    onig_free(regex_);
  }
  // Successive leftmost matches, each search starting where the last ended
  // (one character on after an empty match, which these patterns never make).
  Spans matches(const std::string& text) const {
    Spans out;
    const auto* s = reinterpret_cast<const UChar*>(text.data());
    const UChar* end = s + text.size();
    for (const UChar* start = s; start < end;) {
      if (onig_search(regex_, s, end, start, end, region_, ONIG_OPTION_NONE) < 0) break;
      out.emplace_back(size_t(region_->beg[0]), size_t(region_->end[0]));
      const UChar* next = s + region_->end[0];
      start = next > start ? next : start + 1;
    }
    return out;
  }

 private:
  regex_t* regex_ = nullptr;
  OnigRegion* region_ = nullptr;
};

Spans ours(const reprise::io::Regex& regex, const std::string& text) {
  Spans out;
  regex.for_each_match(text, [&](size_t b, size_t e) { out.emplace_back(b, e); });
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_regex_oniguruma TEXT_FILE [rounds]\n");
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
  onig_initialize(encodings, 1);
  std::printf("%zu bytes, %d alternating rounds, medians\n", text.size(), rounds);
  for (const auto& [name, pattern] : kPatterns) {
    const reprise::io::Regex regex(pattern);
    const Oniguruma onig(pattern);
    const Spans a = ours(regex, text), b = onig.matches(text);
    if (a != b) {
      std::printf("%s: the engines disagree (%zu and %zu matches)\n", name, a.size(), b.size());
      return 1;
    }
    std::vector<double> t_ours, t_onig;
    for (int r = 0; r < rounds; ++r) {
      const bool ours_first = r % 2 == 0;
      for (int side = 0; side < 2; ++side) {
        const double t0 = seconds();
        (side == 0) == ours_first ? (void)ours(regex, text) : (void)onig.matches(text);
        ((side == 0) == ours_first ? t_ours : t_onig).push_back(seconds() - t0);
      }
    }
    const double mb = double(text.size()) / 1e6;
    std::printf("%s: %zu equal matches; reprise %.1f MB/s, oniguruma %.1f MB/s, ratio %.2f\n", name,
                a.size(), mb / median(t_ours), mb / median(t_onig),
                median(t_onig) / median(t_ours));
  }
  onig_end();
  return 0;
}
