#include "engine/memory_limit.h"

#include <atomic>
#include <cstdlib>
#include <limits>

namespace reprise::memory_limit {
namespace {

constexpr const char* kVariable = "REPRISE_MAX_MEMORY";
constexpr int64_t kUnread = -1;

// The cap in bytes (0: none), kUnread until REPRISE_MAX_MEMORY is read. A
// malformed value leaves it unread, so that every allocation raises.
std::atomic<int64_t> g_max_memory{kUnread};

int64_t from_environment() {
  const char* env = std::getenv(kVariable);
  if (env == nullptr || *env == '\0') return 0;
  return parse_bytes(env, kVariable);
}

}  // namespace

int64_t parse_bytes(std::string_view text, std::string_view variable) {
  const std::string_view given = text;
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift != 0) text.remove_suffix(1);
  }
  int64_t v = 0;
  bool ok = !text.empty();
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9' && v <= (std::numeric_limits<int64_t>::max() - 9) / 10;
    if (!ok) break;
    v = v * 10 + (c - '0');
  }
  ok = ok && v <= (std::numeric_limits<int64_t>::max() >> shift);
  REPRISE_CHECK(ok, variable, ": expected bytes, or a number with a K, M, G or T suffix ",
                "(powers of 1024, e.g. 512M or 2G), got '", given, "'");
  return v << shift;
}

int64_t max_memory() {
  int64_t cap = g_max_memory.load(std::memory_order_relaxed);
  if (cap == kUnread) [[unlikely]] {
    cap = from_environment();
    int64_t unread = kUnread;  // set_max_memory, if it ran meanwhile, wins
    if (!g_max_memory.compare_exchange_strong(unread, cap)) cap = unread;
  }
  return cap;
}

void set_max_memory(int64_t bytes) {
  REPRISE_CHECK(bytes >= 0, "set_max_memory: expected bytes >= 0 (0: no cap), got ", bytes);
  g_max_memory.store(bytes, std::memory_order_relaxed);
}

}  // namespace reprise::memory_limit
