// A fixed pool of worker threads for data-parallel loops. Between jobs a worker spins for
// a short while before it sleeps, so the back-to-back ops of a model run start at once
// (a futex wake-up costs tens of microseconds, as much as a small op), and an idle pool
// costs nothing after that (see use_openmp() for OpenMP's threads). A loop is cut into a few chunks per thread that the threads
// take as they come free, and it ends when every chunk is done, not when every thread has
// checked in: on a machine shared with other work, a worker the OS has descheduled does not
// hold the loop up, the threads that run take its share.
#pragma once

#include <algorithm>
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
  // Where loops run: on the pool's own workers, or on OpenMP's threads, the ones oneDNN's
  // kernels use (two sets of threads spinning on the same cores stall each other). A pool
  // starts on its own workers and moves to OpenMP's threads for good once a oneDNN kernel is
  // made for it; VLRT_POOL_OPENMP=1 or 0 fixes the choice instead.
  void use_openmp();
  bool on_openmp() const { return openmp_.load(std::memory_order_relaxed); }
  // Runs fn(begin, end) over [0, n) split into contiguous chunks; the calling thread
  // takes part. Chunks are at least `grain` long so tiny loops stay on one thread.
  // Which thread runs which chunk is not fixed.
  // Safe to call from inside a job or from several threads: those calls run inline.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void worker_loop();
  // Claims and runs chunks of job `generation` until none is left or another job has begun.
  void run_chunks(int64_t generation, const std::function<void(int64_t, int64_t)>& fn, int64_t n, int64_t chunk,
                  int64_t chunks);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::mutex run_mu_;  // one job at a time
  std::condition_variable wake_, done_;
  // Written under mu_; generation_ is also read without it by spinning threads.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  std::atomic<int64_t> generation_{0};
  // The next chunk to take: the job's generation in the high 32 bits, the chunk in the low 32.
  // A thread takes a chunk only while the generation is its job's, so one that wakes after
  // its job ended finds nothing to do and never calls a finished job's function.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_chunks_{0};
  std::exception_ptr job_error_;
  bool stop_ = false;
  std::atomic<bool> openmp_{false};
  bool openmp_fixed_ = false;  // VLRT_POOL_OPENMP set
};

// A parallel_for grain: items per chunk so that a chunk does at least ~16K element operations.
inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(work_per_item, 1));
}

}  // namespace vlrt
