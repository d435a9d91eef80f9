#pragma once
// The CPU thread pool is OpenMP's. Its size comes from REPRISE_NUM_THREADS
// when set (read once, at first use), else from OpenMP's default.
// Results never depend on the thread count: every parallel reduction splits
// work into fixed-size chunks combined in a fixed order.

#include <cstdint>
#include <functional>

namespace reprise::threads {

int num_threads();
void set_num_threads(int n);

// Runs body(begin, end) over [0, n) split into chunks of at least `grain`
// items, in parallel when n is large enough. Chunk boundaries depend on the
// thread count: use it only where each item is computed independently.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace reprise::threads
