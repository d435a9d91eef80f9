#include "engine/memory_limit.h"

#include <cstdlib>
#include <limits>

#include "engine/backend.h"
#include "engine/current_op.h"

namespace reprise::memory_limit {
namespace {

constexpr const char* kVariable = "REPRISE_MAX_MEMORY";

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
  int64_t cap = detail::cap.load(std::memory_order_relaxed);
  if (cap == detail::kUnread) {
    cap = from_environment();
    int64_t unread = detail::kUnread;  // set_max_memory, if it ran meanwhile, wins
    if (!detail::cap.compare_exchange_strong(unread, cap)) cap = unread;
  }
  return cap;
}

void set_max_memory(int64_t bytes) {
  REPRISE_CHECK(bytes >= 0, "set_max_memory: expected bytes >= 0 (0: no cap), got ", bytes);
  detail::cap.store(bytes, std::memory_order_relaxed);
}

void detail::check_slow(size_t nbytes, Device device) {
  const int64_t limit = max_memory();
  if (limit != 0 && memory_stats::snapshot(device).total.live + int64_t(nbytes) > limit)
    raise_out_of_memory(nbytes, device, limit);
}

void raise_out_of_memory(size_t nbytes, Device device, int64_t limit) {
  const MemorySnapshot memory = memory_stats::snapshot(device);
  std::string request =
      reprise::detail::concat("out of memory on ", to_string(device), ": ", describe_current_op(),
                              " asked for ", nbytes, " bytes");
  std::string context = limit > 0 ? reprise::detail::concat(
                                        ", which would pass REPRISE_MAX_MEMORY (", limit, " bytes)")
                                  : std::string(", and the device has no room");
  context += "; live tensors: " + memory.to_string();
  if (limit == 0) {
    const DeviceMemoryInfo info = backend(device).memory_info();
    if (info.capacity > 0) {
      context += reprise::detail::concat("; the allocator holds ", info.reserved, " bytes (",
                                         info.cached, " cached); the device has ", info.device_free,
                                         " of ", info.capacity, " bytes free");
    }
  }
  throw OutOfMemoryError(std::move(request), std::move(context), device, int64_t(nbytes), limit,
                         memory);
}

}  // namespace reprise::memory_limit
