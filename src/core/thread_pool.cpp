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
  if (const char* v = std::getenv("VLRT_POOL_OPENMP"); v && *v) {
    openmp_fixed_ = true;
    openmp_ = std::string(v) != "0";
  }
  for (int i = 1; i < threads; i++) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(int64_t generation, const std::function<void(int64_t, int64_t)>& fn, int64_t n,
                            int64_t chunk, int64_t chunks) {
  const uint64_t tag = uint64_t(generation) << 32;
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if ((c & ~0xffffffffull) != tag || int64_t(c & 0xffffffffull) >= chunks) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    int64_t begin = int64_t(c & 0xffffffffull) * chunk, end = std::min(n, begin + chunk);
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!job_error_) job_error_ = std::current_exception();
    }
    if (done_chunks_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard<std::mutex> g(mu_);  // the caller checks done_chunks_ under mu_ before it sleeps
      done_.notify_one();
    }
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  t_in_worker = true;
  int64_t seen = 0;
  for (;;) {
    spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
    // The job's fields, read under the lock with its generation: one consistent snapshot.
    std::unique_lock<std::mutex> lk(mu_);
    wake_.wait(lk, [&] { return stop_ || generation_.load() != seen; });
    if (stop_) return;
    seen = generation_.load();
    const auto* fn = job_;
    int64_t n = job_n_, chunk = job_chunk_, chunks = job_chunks_;
    lk.unlock();
    if (fn) run_chunks(seen, *fn, n, chunk, chunks);
  }
}

void ThreadPool::use_openmp() {
  if (!openmp_fixed_) openmp_.store(true, std::memory_order_relaxed);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  // At most one part per thread, and as many chunks of at least `grain` as there are.
  const int64_t grain_chunks = (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1);
  const int64_t parts = std::min<int64_t>(size(), grain_chunks);
  if (on_openmp()) {
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
  // A few chunks per thread, each at least `grain` long.
  const int64_t wanted = std::min(grain_chunks, 4 * parts);
  int64_t chunk = (n + wanted - 1) / wanted;
  int64_t chunks = (n + chunk - 1) / chunk, generation;
  {
    std::lock_guard<std::mutex> lk(mu_);
    generation = (generation_.load() + 1) & 0xffffffff;
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_chunks_ = chunks;
    job_error_ = nullptr;
    done_chunks_.store(0, std::memory_order_relaxed);
    claim_.store(uint64_t(generation) << 32, std::memory_order_release);
    generation_.store(generation, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(generation, fn, n, chunk, chunks);
  spin_until([&] { return done_chunks_.load(std::memory_order_acquire) == chunks; });
  std::unique_lock<std::mutex> lk(mu_);
  done_.wait(lk, [&] { return done_chunks_.load(std::memory_order_acquire) == chunks; });
  job_ = nullptr;
  std::exception_ptr error = job_error_;
  job_error_ = nullptr;
  // An exception thrown in any chunk reaches the caller once every chunk has stopped.
  if (error) std::rethrow_exception(error);
}

}  // namespace vlrt
