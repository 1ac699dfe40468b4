#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>

#include <omp.h>

namespace vlrt {

namespace {
// Set on pool workers: a parallel_for called from inside a job runs inline.
thread_local bool t_in_worker = false;

// How long a thread spins for the next job (worker) or for the other chunks (caller)
// before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() or kSpin has passed; true when done() became true.
template <class Done>
bool spin_until(Done done) {
  auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; i++) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < threads; i++) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  t_in_worker = true;
  int64_t seen = 0;
  for (;;) {
    spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
    // The job's fields, read under the lock with its generation: one consistent snapshot.
    std::unique_lock<std::mutex> lk(mu_);
    wake_.wait(lk, [&] { return stop_ || generation_.load() != seen; });
    if (stop_) return;
    seen = generation_.load();
    if (index >= job_parts_) continue;
    auto* fn = job_;
    int64_t begin = index * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
    lk.unlock();
    std::exception_ptr error;
    try {
      if (begin < end) (*fn)(begin, end);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      std::lock_guard<std::mutex> g(mu_);
      if (!job_error_) job_error_ = error;
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> g(mu_);  // the caller checks pending_ under mu_ before it sleeps
      done_.notify_one();
    }
  }
}

// Loops run on OpenMP's threads, which oneDNN's kernels use too: two pools spinning on the
// same cores stalled each other (bert_base 2x slower). VLRT_POOL_OPENMP=0 runs them on
// the pool's own workers instead.
bool pool_on_openmp() {
  static const bool on = [] {
    const char* v = std::getenv("VLRT_POOL_OPENMP");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int64_t parts =
      std::min<int64_t>(size(), (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1));
  if (pool_on_openmp()) {
    if (parts <= 1 || omp_in_parallel()) {
      fn(0, n);
      return;
    }
    int64_t chunk = (n + parts - 1) / parts;
    std::exception_ptr error;
#pragma omp parallel num_threads(int(parts))
    {
      int64_t begin = omp_get_thread_num() * chunk, end = std::min(n, begin + chunk);
      try {
        if (begin < end) fn(begin, end);
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    return;
  }
  // Nested calls and calls from a second thread while the pool is busy run on the caller alone.
  std::unique_lock<std::mutex> busy(run_mu_, std::try_to_lock);
  if (parts <= 1 || t_in_worker || !busy.owns_lock()) {
    fn(0, n);
    return;
  }
  int64_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_parts_ = int(parts);
    pending_.store(int(parts) - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  std::exception_ptr error;
  try {
    fn(0, std::min(n, chunk));
  } catch (...) {
    error = std::current_exception();
  }
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lk(mu_);
  done_.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  job_ = nullptr;
  if (!error) error = job_error_;
  job_error_ = nullptr;
  // An exception thrown in any chunk reaches the caller once every chunk has stopped.
  if (error) std::rethrow_exception(error);
}

}  // namespace vlrt
