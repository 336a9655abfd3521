// The decode pool (see parallel.hpp).
#include "support/parallel.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fatpack::core::detail {
namespace {

// One parallel_for call: items are claimed through `next`; `pending` counts claimed-but-unfinished
// items plus the not-yet-claimed ones, so the caller waits only for work that someone really took.
struct job {
  std::size_t n = 0;
  const std::function<void(std::size_t)>* fn = nullptr;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> finished{0};
  std::mutex mu;
  std::condition_variable cv;

  // Runs items until none is left to claim.
  void work() {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      (*fn)(i);
      if (finished.fetch_add(1) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }
};

class pool {
 public:
  static pool& get() {
    static pool* p = new pool();  // leaked: workers may still be parked at static destruction
    return *p;
  }

  // Offers `j` to up to `helpers` workers (starting them the first time).
  void offer(const std::shared_ptr<job>& j, unsigned helpers) {
    std::lock_guard<std::mutex> lock(mu_);
    while (workers_ < helpers && workers_ < max_workers) {
      try {
        std::thread(&pool::worker_loop, this).detach();
      } catch (...) {
        break;  // no thread: the caller does the work itself
      }
      ++workers_;
    }
    for (unsigned k = 0; k < std::min(helpers, workers_); ++k) queue_.push_back(j);
    cv_.notify_all();
  }

  // A forked child has no workers: forget them (the mutex is re-created, it may have been held).
  void reset_after_fork() {
    new (&mu_) std::mutex();
    new (&cv_) std::condition_variable();
    new (&queue_) std::deque<std::shared_ptr<job>>();  // leaks the parent's entries, never freed twice
    workers_ = 0;
  }

 private:
  static constexpr unsigned max_workers = 15;

  pool() {
    pthread_atfork(nullptr, nullptr, [] { pool::get().reset_after_fork(); });
  }

  void worker_loop() {
    for (;;) {
      std::shared_ptr<job> j;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        j = std::move(queue_.front());
        queue_.pop_front();
      }
      j->work();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<job>> queue_;
  unsigned workers_ = 0;
};

}  // namespace

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  threads = unsigned(std::min<std::size_t>(std::max(1u, threads), n));
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto j = std::make_shared<job>();
  j->n = n;
  j->fn = &fn;
  pool::get().offer(j, threads - 1);
  j->work();
  std::unique_lock<std::mutex> lock(j->mu);
  j->cv.wait(lock, [&] { return j->finished.load() == n; });
  // Workers that pick `j` up later find no item left and never touch fn (it may be gone by then).
}

}  // namespace fatpack::core::detail
