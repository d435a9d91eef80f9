#include "examples/common/cli.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "nn/train_config.h"

namespace reprise::cli {

int64_t parse_int(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError(flag + ": expected an integer, got '" + v + "'");
  return int64_t(n);
}

int64_t parse_positive(const std::string& flag, const std::string& v) {
  const int64_t n = parse_int(flag, v);
  if (n < 1) throw UsageError(flag + ": expected a positive integer, got '" + v + "'");
  return n;
}

int64_t parse_count(const std::string& flag, const std::string& v) {
  const int64_t n = parse_int(flag, v);
  if (n < 0) throw UsageError(flag + ": expected an integer >= 0, got '" + v + "'");
  return n;
}

bool parse_choice(const std::string& flag, const std::string& v, const char* first,
                  const char* second) {
  if (v != first && v != second) {
    throw UsageError(flag + ": expected " + first + " or " + second + ", got '" + v + "'");
  }
  return v == first;
}

bool parse_save_or_recompute(const std::string& flag, const std::string& v) {
  return parse_choice(flag, v, "save", "recompute");
}

double parse_real(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x))
    throw UsageError(flag + ": expected a number, got '" + v + "'");
  return x;
}

int parse_threads(const std::string& flag, const std::string& v) {
  const int64_t n = parse_positive(flag, v);
  if (n > 4096) throw UsageError(flag + ": at most 4096, got " + v);
  return int(n);
}

uint64_t parse_seed(const std::string& flag, const std::string& v) {
  return uint64_t(parse_count(flag, v));
}

Device parse_device_flag(const std::string& flag, const std::string& v) {
  return usage_checked([&] { return parse_device(v, flag); });
}

DType parse_run_dtype(const std::string& flag, const std::string& v) {
  const std::optional<DType> dtype = nn::run_dtype_named(v);
  if (!dtype) throw UsageError(flag + ": expected f32 or bf16, got '" + v + "'");
  return *dtype;
}

json::Value show_seed(uint64_t seed) { return std::to_string(seed); }
json::Value show_device(Device device) { return to_string(device); }
json::Value show_dtype(DType dtype) { return dtype_name(dtype); }
json::Value show_save_or_recompute(bool save) { return save ? "save" : "recompute"; }

UsageError flag_error(const std::string& flag, const std::string& what) {
  return UsageError(what.rfind("--", 0) == 0 ? what : flag + ": " + what);
}

namespace {

// `text` wrapped to lines of at most `width` columns, each after `indent`
// spaces but the first (which follows what is already on its line).
std::string wrapped(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line + "\n";
}

// A default as usage shows it: text as it is, a number with the fewest
// digits that read back as it (fixed notation), nothing for a switch.
std::string shown_value(const json::Value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_int()) return std::to_string(v.as_int());
  if (!v.is_number()) return "";
  char buf[400];
  return {buf, std::to_chars(buf, buf + sizeof buf, v.as_double(), std::chars_format::fixed).ptr};
}

}  // namespace

std::string usage_line(const std::string& name, const std::string& value, const std::string& help,
                       const std::string& note, const json::Value& shown) {
  constexpr size_t kIndent = 28, kWidth = 100;
  std::string head = "  " + name + (value.empty() ? "" : " " + value);
  head += head.size() + 2 <= kIndent ? std::string(kIndent - head.size(), ' ')
                                     : "\n" + std::string(kIndent, ' ');
  const std::string dflt = note.empty() ? shown_value(shown) : note;
  return head + wrapped(help + (dflt.empty() ? "" : " (" + dflt + ")"), kIndent, kWidth);
}

int usage_failure(const std::string& program, const UsageError& e) {
  std::fprintf(stderr, "%s: %s\n(%s --help lists the flags)\n", program.c_str(), e.what(),
               program.c_str());
  return 2;
}

int run_main(const std::string& program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    return usage_failure(program, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 1;
  }
}

}  // namespace reprise::cli
