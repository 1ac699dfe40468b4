// A fixed pool of worker threads for data-parallel loops. Between jobs a worker spins for
// a short while before it sleeps, so the back-to-back ops of a model run start at once
// (a futex wake-up costs tens of microseconds, as much as a small op), and an idle pool
// costs nothing after that.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vlrt {

class ThreadPool {
 public:
  // threads <= 0: one per hardware core.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Runs fn(begin, end) over [0, n) split into contiguous chunks; the calling thread
  // takes part. Chunks are at least `grain` long so tiny loops stay on one thread.
  // Safe to call from inside a job or from several threads: those calls run inline.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::mutex run_mu_;  // one job at a time
  std::condition_variable wake_, done_;
  // Written under mu_; generation_ is also read without it by spinning threads.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  int job_parts_ = 0;
  std::atomic<int64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::exception_ptr job_error_;
  bool stop_ = false;
};

}  // namespace vlrt
