// Dynamic batching: requests wait in a bounded queue; one worker thread takes the oldest and
// the queued requests with the same key (same model input size and prompt): the batch limit
// for that key once that many are there, else what arrived within the queue delay (rounded
// down to a power of two), and runs them as one batch. One worker means the model is only
// ever run from one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace vlrt::serve {

using Clock = std::chrono::steady_clock;

// One queued request; subclasses carry the inputs and the result.
struct Job {
  virtual ~Job() = default;
  std::string key;  // jobs with the same non-empty key may share a batch; "" runs alone
  Clock::time_point enqueued, started, finished;
  int batch_size = 0;
  int status = 200;   // set by the worker: 200, or the error's status
  std::string error;  // the error message when status != 200

  void finish();
  bool finished_by(Clock::time_point deadline);  // false: still not done at the deadline

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct BatcherOptions {
  size_t max_queue = 128;
  Clock::duration max_delay = std::chrono::milliseconds(2);
};

class Batcher {
 public:
  // The largest batch for a job's key (called on the worker thread, may plan the model).
  using LimitFn = std::function<int64_t(const Job&)>;
  // Runs one batch on the worker thread; every job must be finish()ed (the batcher
  // finishes the rest with a 500 if it throws).
  using RunFn = std::function<void(const std::vector<std::shared_ptr<Job>>&)>;
  using DepthFn = std::function<void(size_t)>;

  Batcher(BatcherOptions options, LimitFn limit, RunFn run, DepthFn on_depth = {});
  ~Batcher();  // drains
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  enum class Submit { queued, full, closed };

  // A place in the queue, held while a request is prepared (decoded, resized, tokenized) and
  // then handed to submit(): a full queue turns requests away before that work, so under
  // overload the refused ones do not take the cores from the model. Given back if unused.
  class Place {
   public:
    Place() = default;
    Place(Place&& other) noexcept : batcher_(std::exchange(other.batcher_, nullptr)) {}
    Place& operator=(Place&&) = delete;
    ~Place();
    bool held() const { return batcher_ != nullptr; }

   private:
    friend class Batcher;
    Batcher* batcher_ = nullptr;
  };
  // queued: `place` now holds a place; full or closed: it stays empty.
  Submit reserve(Place& place);
  // A job with a held place is queued without counting again (the place is used up).
  Submit submit(const std::shared_ptr<Job>& job, Place* place = nullptr);
  // Takes a job out of the queue (it timed out); false when the worker has it already.
  bool cancel(const std::shared_ptr<Job>& job);
  // Refuses new jobs, runs every queued one, then stops the worker. Idempotent.
  void drain();
  size_t depth() const;

 private:
  void worker();
  size_t count_key(const std::string& key) const;

  BatcherOptions options_;
  LimitFn limit_;
  RunFn run_;
  DepthFn on_depth_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t reserved_ = 0;  // places held by requests being prepared
  bool closed_ = false;
  std::thread thread_;
};

}  // namespace vlrt::serve
