#include "engine/threads.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace reprise::threads {
namespace {

int configured_from_env() {
  const char* env = std::getenv("REPRISE_NUM_THREADS");
  if (env == nullptr || *env == '\0') return omp_get_max_threads();
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  REPRISE_CHECK(end != env && *end == '\0' && n >= 1 && n <= 4096,
                "REPRISE_NUM_THREADS: expected a positive integer, got '", env, "'");
  return int(n);
}

int& current() {
  static int n = [] {
    int v = configured_from_env();
    omp_set_num_threads(v);
    return v;
  }();
  return n;
}

}  // namespace

int num_threads() { return current(); }

void set_num_threads(int n) {
  REPRISE_CHECK(n >= 1, "set_num_threads: expected n >= 1, got ", n);
  current() = n;
  omp_set_num_threads(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  int nt = num_threads();
  grain = std::max<int64_t>(grain, 1);
  if (nt <= 1 || n <= grain || omp_in_parallel()) {
    body(0, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
  int64_t per = (n + chunks - 1) / chunks;
#pragma omp parallel for num_threads(int(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) body(b, e);
  }
}

}  // namespace reprise::threads
