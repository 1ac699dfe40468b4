// ThreadPool::parallel_for: every index once, back-to-back and concurrent jobs, exceptions,
// nested calls, and (the point of the chunked pool) a loop that finishes while a worker is
// stalled. ctest runs these on the pool's own workers (a new pool's default) and again on
// OpenMP's threads (thread_pool_openmp, VLRT_POOL_OPENMP=1).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace vlrt {
namespace {


}  // namespace

TEST(ThreadPool, CoversRangeOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 64, 1000, 4097})
    for (int64_t grain : {1, 5, 100}) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      for (int rep = 0; rep < 5; rep++)
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; i++) hits[size_t(i)]++;
        }, grain);
      for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[size_t(i)], 5) << "n " << n << " grain " << grain << " i " << i;
    }
}

TEST(ThreadPool, ManyJobsOfChangingSizeFromTwoCallersEachRunOnce) {
  // Back-to-back jobs (spinning workers pick them up), sizes that give a worker a chunk in
  // one job and none in the next, sleeps that let the workers fall asleep in between, and a
  // second thread calling at the same time (its calls run inline).
  ThreadPool pool(4);
  auto caller = [&pool](int seed, std::atomic<int64_t>& errors) {
    std::vector<int> hits(64);
    for (int rep = 0; rep < 3000; rep++) {
      int64_t n = 1 + (rep * 7 + seed) % 64;
      std::fill(hits.begin(), hits.end(), 0);
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) hits[size_t(i)]++;
      });
      for (int64_t i = 0; i < 64; i++) errors += hits[size_t(i)] != (i < n ? 1 : 0);
      if (rep % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  std::atomic<int64_t> errors_a{0}, errors_b{0};
  std::thread other(caller, 3, std::ref(errors_b));
  caller(0, errors_a);
  other.join();
  EXPECT_EQ(errors_a.load(), 0);
  EXPECT_EQ(errors_b.load(), 0);
}

TEST(ThreadPool, BackToBackJobsEachRunTheirOwnFunction) {
  ThreadPool pool(2);
  for (int job = 0; job < 2000; job++) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for(17, [&, job](int64_t b, int64_t e) { sum += (e - b) * job; });
    ASSERT_EQ(sum.load(), 17 * job);
  }
}

TEST(ThreadPool, ExceptionInAChunkReachesTheCaller) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(100,
                                 [&](int64_t b, int64_t e) {
                                   ran += int(e - b);
                                   if (b > 0) fail("bad index in chunk");
                                 }),
               Error);
  EXPECT_EQ(ran.load(), 100) << "the exception reaches the caller once every chunk has run";
  // Still usable afterwards, and nested calls run inline.
  std::vector<int> hits(10, 0);
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) pool.parallel_for(1, [&](int64_t, int64_t) { hits[size_t(i)]++; });
  });
  for (int h : hits) EXPECT_EQ(h, 1);
}

// A chunk that stalls (as on a worker the OS has descheduled) holds up only itself: the caller
// takes the other chunks. OpenMP splits a loop once, so this is for the pool's own workers.
TEST(ThreadPool, TheCallerTakesTheChunksOfAStalledWorker) {
  ThreadPool pool(2);
  if (pool.on_openmp()) GTEST_SKIP() << "OpenMP splits a loop once (VLRT_POOL_OPENMP=1)";
  const auto caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0};
  std::atomic<bool> worker_started{false};
  pool.parallel_for(8, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() != caller) {
      if (!worker_started.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return;
    }
    // The caller's first chunk waits (up to a second) until the worker holds one.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!worker_started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    by_caller += int(e - b);
  });
  ASSERT_TRUE(worker_started.load()) << "the worker never took a chunk";
  EXPECT_EQ(by_caller.load(), 7) << "the caller runs every chunk but the stalled worker's";
}

}  // namespace vlrt
