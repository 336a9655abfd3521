// The thread pool (fatpack/core/thread_pool.hpp).
//
// Why a persistent pool for decoding: starting and joining a thread costs 20-50 us, about what a
// 256 KiB LZ4 block takes to decode, so threads started per call ate most of the gain on a 1 MB cubin.
#include "fatpack/core/thread_pool.hpp"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <new>

namespace fatpack::core {

// Every live pool, for the fork handlers: prepare locks them all (so that no pool is caught
// mid-update), the parent unlocks them, the child unlocks them and resets each to a fresh pool.
struct pool_fork_handlers {
  static std::mutex& mu() {
    static auto* m = new std::mutex();  // leaked: pools may outlive static destruction
    return *m;
  }
  static std::vector<thread_pool*>& pools() {
    static auto* v = new std::vector<thread_pool*>();
    return *v;
  }
  static void add(thread_pool* p) {
    static std::once_flag once;
    std::call_once(once, [] { pthread_atfork(&prepare, &parent, &child); });
    std::lock_guard<std::mutex> lock(mu());
    pools().push_back(p);
  }
  static void remove(thread_pool* p) {
    std::lock_guard<std::mutex> lock(mu());
    auto& v = pools();
    v.erase(std::remove(v.begin(), v.end(), p), v.end());
  }
  static void prepare() {
    mu().lock();
    for (auto* p : pools()) p->mu_.lock();
  }
  static void parent() {
    for (auto* p : pools()) p->mu_.unlock();
    mu().unlock();
  }
  static void child() {
    for (auto* p : pools()) {
      p->mu_.unlock();  // locked by this (the forking) thread in prepare
      p->reset_in_child();
    }
    mu().unlock();
  }
};

thread_pool::thread_pool(unsigned threads) : max_(std::max(1u, threads)) { pool_fork_handlers::add(this); }

thread_pool::~thread_pool() {
  pool_fork_handlers::remove(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void thread_pool::reset_in_child() {
  // The parent's workers do not exist here: forget them without touching them (joining or
  // destroying a std::thread of another process is undefined), and the parent's queued tasks with
  // them (their captures may need locks that other parent threads held at the fork).
  new (&threads_) std::vector<std::thread>();
  new (&queue_) std::deque<std::function<void()>>();
  new (&cv_) std::condition_variable();
  idle_ = 0;
  starting_ = false;
  stop_ = false;
}

thread_pool& thread_pool::shared() {
  static thread_pool* p = new thread_pool(15);  // leaked: workers may still be parked at static destruction
  return *p;
}

bool thread_pool::start_worker_locked() {
  try {
    threads_.emplace_back(&thread_pool::worker, this);
  } catch (...) {
    return false;
  }
  ++idle_;
  starting_ = true;
  return true;
}

void thread_pool::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  // The next worker, if the backlog wants one: started here, not by whoever queued the work (see
  // enqueue). A failure is fine: this worker exists.
  starting_ = false;
  if (!stop_ && idle_ < queue_.size() && threads_.size() < max_) start_worker_locked();
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    --idle_;
    lock.unlock();
    try {
      task();
    } catch (...) {
      // Tasks from submit() and parallel_for() capture their own exceptions; this is the last
      // line that keeps std::terminate away from anything else.
    }
    task = nullptr;  // its captures go before the lock is taken again
    lock.lock();
    ++idle_;
  }
}

unsigned thread_pool::idle_workers() {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_ > queue_.size() ? unsigned(idle_ - queue_.size()) : 0u;
}

void keep_code_loaded() {
  // A flag, not std::call_once: a call_once would be a lock of its own around the loader's lock, and a
  // library constructor (run under the loader's lock) that reached this code on another thread would
  // wait on it forever. Callers that race each do the work below; doing it twice is harmless.
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_acquire)) return;
  Dl_info info{};
  link_map* self = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&keep_code_loaded), &info, reinterpret_cast<void**>(&self),
                RTLD_DL_LINKMAP) &&
      self && self->l_name && *self->l_name)
    // The loader's own name for this object finds exactly it; the reference is never dropped. (The
    // program's link map has no name: it is never unloaded.)
    (void)::dlopen(self->l_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  done.store(true, std::memory_order_release);
}

void thread_pool::enqueue(std::function<void()> task) {
  keep_code_loaded();  // before a worker can run this code; outside mu_ (the loader's lock)
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(std::move(task));
  // The caller starts at most one worker, and none while another is starting: each new worker starts
  // the next while the backlog wants one (worker()). A burst of tasks (a module's pieces queued
  // for the JIT) then costs its caller one thread creation, not one per worker (16 on a 16-core
  // host, on the thread that is loading a module).
  if (!starting_ && idle_ < queue_.size() && threads_.size() < max_) {
    if (!start_worker_locked()) {
      // No thread could be started. With no worker at all, run the task here rather than never.
      if (threads_.empty()) {
        std::function<void()> t = std::move(queue_.back());
        queue_.pop_back();
        lock.unlock();
        try {
          t();
        } catch (...) {
        }
        return;
      }
    }
  }
  lock.unlock();
  cv_.notify_one();
}

std::future<void> thread_pool::submit(std::function<void()> task) {
  auto packaged = std::make_shared<std::packaged_task<void()>>(std::move(task));
  std::future<void> f = packaged->get_future();
  enqueue([packaged] { (*packaged)(); });
  return f;
}

namespace {

// One parallel_for call: items are claimed through `next`; the caller waits until every item has
// finished (run or thrown).
struct job {
  std::size_t n = 0;
  const std::function<void(std::size_t)>* fn = nullptr;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> finished{0};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;  // the first item's exception (under mu)

  void work() {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        (*fn)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      if (finished.fetch_add(1) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }
};

}  // namespace

void thread_pool::parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  threads = unsigned(std::min<std::size_t>(std::max(1u, threads), n));
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto j = std::make_shared<job>();
  j->n = n;
  j->fn = &fn;
  const unsigned helpers = std::min(threads - 1, max_);
  for (unsigned k = 0; k < helpers; ++k) enqueue([j] { j->work(); });
  j->work();
  std::unique_lock<std::mutex> lock(j->mu);
  j->cv.wait(lock, [&] { return j->finished.load() == n; });
  // Workers that pick `j` up later find no item left and never touch fn (it may be gone by then).
  if (j->error) std::rethrow_exception(j->error);
}

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  thread_pool::shared().parallel_for(n, threads, fn);
}

}  // namespace fatpack::core
