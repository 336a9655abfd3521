// A fixed-size thread pool for background JIT (warm-up). Sized to the hardware threads by default
// (FATPACK_JIT_THREADS or fatpack::set_jit_threads override): the driver's cuLink JIT scales across
// threads (shared/anchors.md: 8 modules, 6.5 s on 8 threads vs 35.5 s in turn).
//
// Lifetime: the pool is created on first use and never destroyed; its threads are detached at exit
// (joining them would wait for a JIT that may take seconds, and the driver may be gone by then).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fatpack::detail {

class thread_pool {
 public:
  explicit thread_pool(unsigned threads);
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool();

  void submit(std::function<void()> task);
  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

}  // namespace fatpack::detail
