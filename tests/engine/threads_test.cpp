// The thread pool: each call of a job runs once, jobs of changing sizes
// follow each other without loss (the workers that sit one out must not run
// the next), exceptions reach the caller, nested calls run on the caller,
// workers asleep between jobs wake up, a forked child gets a pool of its
// own, parallel_for covers its range, and callers on several threads share
// the pool (the ThreadSanitizer build, scripts/tsan.sh, checks these for
// data races).
#include "engine/threads.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/error.h"

namespace reprise {
namespace {

// Runs a job of n calls and returns how often each index ran.
std::vector<int> calls_of_job(int n) {
  std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
  threads::run_on_threads(n, [&](int t) { calls[size_t(t)].fetch_add(1); });
  std::vector<int> out;
  for (auto& c : calls) out.push_back(c.load());
  return out;
}

TEST(Threads, EachCallOfAJobRunsOnce) {
  for (int n : {1, 2, 3, 4, 7}) EXPECT_EQ(calls_of_job(n), std::vector<int>(size_t(n), 1)) << n;
}

TEST(Threads, JobsOfChangingSizesRunEachCallOnce) {
  const int sizes[] = {4, 2, 3, 1, 2, 4, 3};
  for (int i = 0; i < 5000; ++i) {
    const int n = sizes[i % 7];
    ASSERT_EQ(calls_of_job(n), std::vector<int>(size_t(n), 1)) << "job " << i << ", " << n;
  }
}

TEST(Threads, CallsRunOnDifferentThreadsAndTheCallerRunsTheFirst) {
  std::mutex m;
  std::set<std::thread::id> ids;
  std::thread::id first;
  threads::run_on_threads(3, [&](int t) {
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
    if (t == 0) first = std::this_thread::get_id();
  });
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(first, std::this_thread::get_id());
}

TEST(Threads, FirstExceptionReachesTheCallerAndThePoolGoesOn) {
  EXPECT_THROW(threads::run_on_threads(3,
                                       [](int t) {
                                         if (t == 2) throw std::runtime_error("call 2 failed");
                                       }),
               std::runtime_error);
  EXPECT_THROW(threads::run_on_threads(2, [](int) { REPRISE_CHECK(false, "every call fails"); }),
               Error);
  EXPECT_EQ(calls_of_job(3), std::vector<int>(3, 1));
}

TEST(Threads, NestedJobsRunOnTheCallingThread) {
  EXPECT_FALSE(threads::in_parallel());
  std::atomic<int> wrong_thread{0}, inner_calls{0}, not_inside{0};
  threads::run_on_threads(2, [&](int) {
    if (!threads::in_parallel()) ++not_inside;
    const auto outer = std::this_thread::get_id();
    threads::run_on_threads(3, [&](int) {
      ++inner_calls;
      if (std::this_thread::get_id() != outer) ++wrong_thread;
    });
  });
  EXPECT_EQ(inner_calls.load(), 6);
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_EQ(not_inside.load(), 0);
  EXPECT_FALSE(threads::in_parallel());
}

// Past the spin time (REPRISE_SPIN_US, 200 us by default) the workers sleep
// in the kernel; a job must still wake them.
TEST(Threads, SleepingWorkersWakeForTheNextJob) {
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(calls_of_job(2), std::vector<int>(2, 1));
  }
}

TEST(Threads, ParallelForCoversTheRangeOnce) {
  const int before = threads::num_threads();
  for (int nt : {1, 2, 3}) {
    threads::set_num_threads(nt);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(5), int64_t(1000)}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      threads::parallel_for(n, 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[size_t(i)].load(), 1) << nt << " " << n;
    }
  }
  threads::set_num_threads(before);
}

// A forked child has none of its parent's workers: its jobs must still run.
TEST(Threads, AForkedChildRunsJobs) {
  ASSERT_EQ(calls_of_job(2), std::vector<int>(2, 1));  // the parent's pool has a worker
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);  // a child stuck waiting for workers dies instead of hanging the test
    _exit(calls_of_job(3) == std::vector<int>(3, 1) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit (status " << status << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Threads, ClaimTasksRunsEachTaskOnceOnItsThreads) {
  for (int nt : {1, 2, 3}) {
    for (int64_t tasks : {int64_t(0), int64_t(1), int64_t(7), int64_t(500)}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
      std::atomic<int> bad_thread{0};
      threads::claim_tasks(nt, tasks, [&](int thread, int64_t t) {
        if (thread < 0 || thread >= nt) ++bad_thread;
        runs[size_t(t)].fetch_add(1);
      });
      EXPECT_EQ(bad_thread.load(), 0) << nt << " threads, " << tasks << " tasks";
      for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(runs[size_t(t)].load(), 1) << nt << " " << t;
    }
  }
}

// Callers on several std::threads take turns with the pool: each of their
// jobs, flat or nested, runs every call once and sees its own results.
TEST(Threads, CallersOnSeveralThreadsShareThePool) {
  constexpr int kCallers = 4, kJobs = 200;
  constexpr int64_t kItems = 1000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int j = 0; j < kJobs; ++j) {
        std::vector<int64_t> out(kItems, 0);
        threads::parallel_for(kItems, 7, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[size_t(i)] += i * c;
        });
        for (int64_t i = 0; i < kItems; ++i) wrong += out[size_t(i)] != i * c;
        std::atomic<int> inner{0};
        threads::run_on_threads(2, [&](int) { threads::run_on_threads(3, [&](int) { ++inner; }); });
        wrong += inner.load() != 6;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Threads, BadCountsAreErrors) {
  EXPECT_THROW(threads::run_on_threads(0, [](int) {}), Error);
  EXPECT_THROW(threads::set_num_threads(0), Error);
  EXPECT_THROW(threads::set_num_threads(1024), Error);
  EXPECT_THROW(threads::run_on_threads(1024, [](int) {}), Error);
}

}  // namespace
}  // namespace reprise
