#include "serve/batcher.h"

#include <algorithm>
#include <bit>
#include <exception>
#include <new>

#include "core/error.h"

namespace vlrt::serve {

void Job::finish() {
  std::lock_guard<std::mutex> lk(mu_);
  finished = Clock::now();
  done_ = true;
  cv_.notify_all();
}

bool Job::finished_by(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_until(lk, deadline, [&] { return done_; });
}

Batcher::Batcher(BatcherOptions options, LimitFn limit, RunFn run, DepthFn on_depth)
    : options_(options), limit_(std::move(limit)), run_(std::move(run)), on_depth_(std::move(on_depth)) {
  thread_ = std::thread([this] { worker(); });
}

Batcher::~Batcher() { drain(); }

Batcher::Place::~Place() {
  if (!batcher_) return;
  std::lock_guard<std::mutex> lk(batcher_->mu_);
  batcher_->reserved_--;
}

Batcher::Submit Batcher::reserve(Place& place) {
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) return Submit::closed;
  if (queue_.size() + reserved_ >= options_.max_queue) return Submit::full;
  reserved_++;
  place.batcher_ = this;
  return Submit::queued;
}

Batcher::Submit Batcher::submit(const std::shared_ptr<Job>& job, Place* place) {
  std::lock_guard<std::mutex> lk(mu_);
  bool held = place && place->batcher_ == this;
  if (held) {
    reserved_--;
    place->batcher_ = nullptr;
  }
  if (closed_) return Submit::closed;
  if (!held && queue_.size() + reserved_ >= options_.max_queue) return Submit::full;
  job->enqueued = Clock::now();
  queue_.push_back(job);
  if (on_depth_) on_depth_(queue_.size());
  cv_.notify_all();
  return Submit::queued;
}

bool Batcher::cancel(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it == queue_.end()) return false;
  queue_.erase(it);
  if (on_depth_) on_depth_(queue_.size());
  cv_.notify_all();
  return true;
}

void Batcher::drain() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

size_t Batcher::depth() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.size();
}

size_t Batcher::count_key(const std::string& key) const {
  if (key.empty()) return 1;
  return size_t(std::count_if(queue_.begin(), queue_.end(), [&](auto& j) { return j->key == key; }));
}

void Batcher::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return;  // closed and drained
    std::shared_ptr<Job> head = queue_.front();
    size_t limit = 1;
    if (!head->key.empty()) {
      lk.unlock();
      std::string out_of_memory;
      try {
        limit = size_t(std::max<int64_t>(1, limit_(*head)));
      } catch (const OutOfMemory& e) {
        out_of_memory = e.what();
      } catch (const std::exception&) {
        limit = 1;  // the run itself will report what is wrong
      }
      lk.lock();
      if (!out_of_memory.empty()) {  // no memory to plan its batch: this request gets a 503
        if (auto it = std::find(queue_.begin(), queue_.end(), head); it != queue_.end()) queue_.erase(it);
        if (on_depth_) on_depth_(queue_.size());
        if (!head->finished_by(Clock::now())) {
          head->status = 503;
          head->error = "out of memory: " + out_of_memory;
          head->finish();
        }
        continue;
      }
    }
    // Wait for a full batch, but never longer than the delay after the oldest arrived;
    // when draining, take what is there.
    Clock::time_point deadline = head->enqueued + options_.max_delay;
    while (!closed_ && !queue_.empty() && queue_.front() == head && count_key(head->key) < limit &&
           Clock::now() < deadline)
      cv_.wait_until(lk, deadline);
    if (queue_.empty() || queue_.front() != head) continue;  // the head timed out meanwhile

    // Short of the limit, a power of two: the model is then planned for at most
    // log2(limit) + 2 batch sizes per input shape, and those plans stay cached.
    size_t take = std::min(count_key(head->key), limit);
    if (take < limit) take = std::bit_floor(take);
    std::vector<std::shared_ptr<Job>> batch;
    for (auto it = queue_.begin(); it != queue_.end() && batch.size() < take;) {
      if (*it == head || (!head->key.empty() && (*it)->key == head->key)) {
        batch.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (on_depth_) on_depth_(queue_.size());
    lk.unlock();
    Clock::time_point start = Clock::now();
    for (auto& j : batch) {
      j->started = start;
      j->batch_size = int(batch.size());
    }
    try {
      run_(batch);
    } catch (const std::exception& e) {
      // Memory running out is the server's state, not a bug: 503, try again.
      bool memory = dynamic_cast<const OutOfMemory*>(&e) || dynamic_cast<const std::bad_alloc*>(&e);
      for (auto& j : batch) {
        if (j->finished_by(Clock::now())) continue;
        j->status = memory ? 503 : 500;
        j->error = std::string(memory ? "out of memory: " : "internal error: ") + e.what();
        j->finish();
      }
    }
    lk.lock();
  }
}

}  // namespace vlrt::serve
