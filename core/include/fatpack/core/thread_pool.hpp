// The one thread pool of the tree: the packager's and runtime's block (de)compression
// (parallel_for on the process-wide pool) and the runtime's background JIT (a pool of its own).
//
// Threads start lazily, when work is queued and no worker is idle, up to the pool's size; they
// live until the pool is destroyed (the process-wide pool never is). Semantics:
//   - A task that throws never takes the process down: submit() hands the exception back through
//     its future; parallel_for rethrows the first one in the caller after every item has run. The
//     worker that ran it goes on with the next task.
//   - fork(): a child starts with a fresh, empty pool (pthread_atfork) and starts its own workers
//     when it first queues work. Tasks the parent had queued or running are not the child's: they
//     never run there (their futures in the child never become ready).
//   - parallel_for: the caller works too and takes every item no worker has claimed, so it always
//     makes progress, also when no thread can be started.
//   - A copy of this code in a shared library (a plugin that links the static runtime) keeps that
//     library loaded from its first queued task on (keep_code_loaded): its workers live until exit.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace fatpack::core {

class thread_pool {
 public:
  explicit thread_pool(unsigned threads);  // at most `threads` workers (at least 1)
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  // Runs what is still queued, then joins the workers.
  ~thread_pool();

  // Queues `task`; the future is ready when it has run, and holds its exception if it threw.
  std::future<void> submit(std::function<void()> task);
  // Runs fn(i) for every i in [0, n) on up to `threads` threads including the caller; returns when
  // all are done, rethrowing the first exception an item threw.
  void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

  unsigned size() const { return max_; }
  // Workers started and waiting for work now (a snapshot): what a caller can use without starting a
  // thread, which costs far more than a small job in a fresh process.
  unsigned idle_workers();
  // Process-wide pool for short data-parallel work (15 workers at most); never destroyed.
  static thread_pool& shared();

 private:
  friend struct pool_fork_handlers;
  void enqueue(std::function<void()> task);
  bool start_worker_locked();
  void worker();
  void reset_in_child();

  const unsigned max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;  // workers waiting for work, counting those just started
  bool starting_ = false;  // a worker was started and has not begun running yet
  bool stop_ = false;
};

// thread_pool::shared().parallel_for(n, threads, fn).
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

// Called before this copy of the code starts a thread that runs it (a pool's first task, the
// runtime's detached threads): when the code is in a shared library, that library stays loaded for
// the life of the process (dlopen RTLD_NOLOAD | RTLD_NODELETE, once). A dlclose() would otherwise
// unmap it under those threads: one running a task, returning from one, or parked in its pool's
// wait and woken later crashes (SIGSEGV). Nothing for the program itself. Takes the loader's lock
// the first time: call it holding no lock that code run under the loader's lock may take.
void keep_code_loaded();

}  // namespace fatpack::core
