#include "core/thread_pool.h"

#include <algorithm>

namespace vlrt {

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
  int64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lk(mu_);
    wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_parts_) continue;
    auto* fn = job_;
    int64_t begin = index * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
    lk.unlock();
    if (begin < end) (*fn)(begin, end);
    lk.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int64_t parts = std::min<int64_t>(size(), (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1));
  if (parts <= 1) {
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
    pending_ = int(parts) - 1;
    generation_++;
  }
  wake_.notify_all();
  fn(0, std::min(n, chunk));
  std::unique_lock<std::mutex> lk(mu_);
  done_.wait(lk, [&] { return pending_ == 0; });
  job_ = nullptr;
}

}  // namespace vlrt
