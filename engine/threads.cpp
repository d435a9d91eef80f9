#include "engine/threads.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "base/error.h"

namespace reprise::threads {
namespace {

// A job's thread count is held in kThreadBits bits of the pool's job word
// (Pool below), which bounds every thread count.
constexpr uint32_t kThreadBits = 10;
constexpr int kMaxThreads = (1 << kThreadBits) - 1;

int configured_from_env() {
  const char* env = std::getenv("REPRISE_NUM_THREADS");
  if (env == nullptr || *env == '\0') return omp_get_max_threads();
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  REPRISE_CHECK(end != env && *end == '\0' && n >= 1 && n <= kMaxThreads,
                "REPRISE_NUM_THREADS: expected an integer in [1, ", kMaxThreads, "], got '", env,
                "'");
  return int(n);
}

int& current() {
  static int n = configured_from_env();
  return n;
}

std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds us = [] {
    const char* env = std::getenv("REPRISE_SPIN_US");
    if (env == nullptr || *env == '\0') return std::chrono::microseconds(200);
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    REPRISE_CHECK(end != env && *end == '\0' && v >= 0 && v <= 1000000,
                  "REPRISE_SPIN_US: expected microseconds in [0, 1000000], got '", env, "'");
    return std::chrono::microseconds(v);
  }();
  return us;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Waits until a no longer holds `old`: spins for spin_time(), yielding the
// core now and then to any thread waiting for one (more threads than cores,
// other processes), then sleeps in the kernel until a notify.
template <class T>
void await_change(const std::atomic<T>& a, T old) {
  const auto deadline = std::chrono::steady_clock::now() + spin_time();
  for (int i = 1; a.load(std::memory_order_acquire) == old; ++i) {
    if (i % 64 != 0) {
      cpu_relax();
    } else if (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    } else {
      a.wait(old, std::memory_order_acquire);
    }
  }
}

thread_local bool t_in_job = false;

// A fork-join pool: run() publishes a job by changing `job_`, which holds
// a job counter (wrapping) and the job's thread count n (low kThreadBits),
// so that a worker reads both at once; worker w (1-based) runs the job when
// w < n, and the last one to finish brings `pending_` to 0, which releases
// the caller. Both are 32-bit so that waiting on them is a futex wait.
class Pool {
 public:
  void run(int n, const std::function<void(int)>& body) {
    std::lock_guard<std::mutex> one_job(job_mutex_);  // callers on several threads take turns
    while (int(workers_.size()) < n - 1) {
      const int w = int(workers_.size()) + 1;
      workers_.emplace_back([this, w] { work(w); });
    }
    body_ = &body;
    error_ = nullptr;
    pending_.store(n - 1, std::memory_order_relaxed);
    ++jobs_;
    job_.store(jobs_ << kThreadBits | uint32_t(n), std::memory_order_release);
    job_.notify_all();

    t_in_job = true;
    call(body, 0);
    t_in_job = false;
    for (int left = pending_.load(std::memory_order_acquire); left != 0;
         left = pending_.load(std::memory_order_acquire)) {
      await_change(pending_, left);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work(int w) {
    t_in_job = true;
    uint32_t seen = 0;
    for (;;) {
      await_change(job_, seen);
      seen = job_.load(std::memory_order_acquire);
      // body_ stays this job's until this worker, if it takes part, is done.
      if (uint32_t(w) >= (seen & ((1u << kThreadBits) - 1))) continue;
      call(*body_, w);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  void call(const std::function<void(int)>& body, int t) {
    try {
      body(t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  std::mutex job_mutex_;
  std::vector<std::thread> workers_;
  uint32_t jobs_ = 0;
  std::atomic<uint32_t> job_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int)>* body_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// Never destroyed: its workers sleep until the process exits, and no
// static destructor can find the pool gone. A child of fork() has none of
// the parent's workers, so it starts a pool of its own (the parent's is
// left behind, never touched again).
Pool*& pool_slot() {
  static Pool* p = [] {
    pthread_atfork(nullptr, nullptr, [] { pool_slot() = new Pool; });
    return new Pool;
  }();
  return p;
}

Pool& pool() { return *pool_slot(); }

}  // namespace

int num_threads() { return current(); }

void set_num_threads(int n) {
  REPRISE_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: expected n in [1, ", kMaxThreads,
                "], got ", n);
  current() = n;
}

bool in_parallel() { return t_in_job || omp_in_parallel(); }

void run_on_threads(int n, const std::function<void(int)>& body) {
  REPRISE_CHECK(n >= 1 && n <= kMaxThreads, "run_on_threads: expected n in [1, ", kMaxThreads,
                "], got ", n);
  if (n == 1 || in_parallel()) {
    for (int t = 0; t < n; ++t) body(t);
    return;
  }
  spin_time();  // a bad REPRISE_SPIN_US is reported here, not in a worker
  pool().run(n, body);
}

void claim_tasks(int threads, int64_t tasks, const std::function<void(int, int64_t)>& body) {
  std::atomic<int64_t> next{0};
  run_on_threads(threads, [&](int thread) {
    for (int64_t t = next++; t < tasks; t = next++) body(thread, t);
  });
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  int nt = num_threads();
  grain = std::max<int64_t>(grain, 1);
  if (nt <= 1 || n <= grain || in_parallel()) {
    body(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
  const int64_t per = (n + chunks - 1) / chunks;
  run_on_threads(int(chunks), [&](int c) {
    const int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) body(b, e);
  });
}

}  // namespace reprise::threads
