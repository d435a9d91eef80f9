#pragma once
// The CPU thread pool. Its size comes from REPRISE_NUM_THREADS when set
// (read once, at first use), else from OpenMP's default (OMP_NUM_THREADS or
// the CPUs this process may use).
// Results never depend on the thread count: every parallel reduction splits
// work into fixed-size chunks combined in a fixed order.
//
// Between jobs a worker spins for a while before it sleeps, so that the
// next op's job (usually microseconds later) starts without a wake-up
// through the kernel; REPRISE_SPIN_US sets how long (microseconds, default
// 200; 0 sleeps at once, for machines shared with other busy processes).

#include <cstdint>
#include <functional>

namespace reprise::threads {

int num_threads();
void set_num_threads(int n);

// Runs body(t) for t in [0, n) at once, one call per thread: the caller runs
// t = 0 and pool workers the rest. Returns when every call has returned,
// rethrowing the first exception any of them threw. Inside a job (or an
// OpenMP region) it runs the calls one after another on the calling thread.
void run_on_threads(int n, const std::function<void(int)>& body);

// Runs body(thread, task) for every task in [0, tasks) on `threads`
// threads (thread in [0, threads)), each thread claiming the next unclaimed
// task when it has finished one: a thread that loses its core to another
// process delays one task, not a fixed share of them.
void claim_tasks(int threads, int64_t tasks, const std::function<void(int, int64_t)>& body);

// True on a pool worker and on a caller inside run_on_threads.
bool in_parallel();

// Runs body(begin, end) over [0, n) split into chunks of at least `grain`
// items, in parallel when n is large enough. Chunk boundaries depend on the
// thread count: use it only where each item is computed independently.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace reprise::threads
