// The JIT service: one compile per key per process, results kept in memory, the cache seam asked
// first, background work on the thread pool. Every compile in the product goes through here:
// load_module, fatpack::warm() and `fatpack warm` (runtime/admin) alike.
//
// Policy:
//  - Single flight: a key (jit_key::str(): PTX hash, target CC, options, JIT path, driver) has at most
//    one compile in the process; every other caller waits for it and shares the SASS. Two devices
//    of the same CC share one compile.
//  - A compile that a load needs runs on the loading thread (it is needed now; queueing it behind
//    background work would only delay it). Background compiles (warm-up) run on the pool; a load
//    that needs a key the pool has not started yet takes the job over, one already running is waited
//    for.
//  - A task always finishes: an exception during a compile (bad_alloc, anything) becomes that task's
//    error for every waiter, on the loading thread and on the pool alike.
//  - Successful results stay in memory for the life of the process (a module unloaded and loaded
//    again is not compiled again); failures are returned to everyone waiting and then forgotten, so a
//    later load tries again.
//  - Order per compile: sass_cache::lookup -> sass_cache::begin_compile (cross-process single
//    flight: bounded wait for another process compiling the same key) -> lookup again -> decompress
//    the PTX (only that entry, NUL-terminated) -> nvJitLink when chosen (nvjitlink.hpp), else (or
//    for an arch it does not know) retain the device's primary context, make it current and cuLink
//    -> the waiters get the SASS -> sass_cache::store on the store queue (one thread), holding the compile lock until the
//    entry is published (so another process waits for the entry instead of compiling it again).
//    Storing (and the eviction and temp-file scan a store may trigger) never runs on the loading
//    thread. Stores still pending when the process exits are finished first, for at most 10 s.
//  - A hit from another driver (same code key) is used at once and re-JIT-ed for this driver on the
//    pool (refresh), so the next process gets an exact hit. At exit, re-JITs not started yet are
//    dropped and those already running are waited for (within the same 10 s): a pool thread must
//    not be inside the driver while the process destroys its statics (TSan found that race).
//  - The cache is whatever the caller installed (set_sass_cache); the service never builds one. The
//    public API wires the disk cache from the environment in (api/wiring.hpp); until something is
//    installed the service uses no cache.
//  - A fork() child of a process that initialised CUDA gets an error from every call here (CUDA is
//    unusable in such a child) and never waits on state inherited from the parent.
#pragma once

#include "cache/sass_cache.hpp"
#include "jit/culink.hpp"
#include "platform/device.hpp"
#include "registry/registry.hpp"

#include "fatpack/core/thread_pool.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fatpack::detail {

// One piece of a PTX entry split for kernel-granular JIT (load/pieces.hpp): a complete PTX module
// of its own, compiled and cached under its own key (the XXH3 and size of its text, and of the whole
// entry as the package declares it: jit_key::piece_of), so that a program compiles and a later
// process reads only the pieces it uses.
struct jit_piece {
  std::uint64_t xxh3 = 0, size = 0;  // of the text (without a NUL): the cache key's PTX hash and size
  std::uint32_t index = 0, count = 0;
  // The text with its NUL (the JITs need one): given when the split was made in this process, else
  // made on the first miss from the package's piece plan (docs/format.md §4.2), which decompresses
  // the entry then; a hit never needs it.
  std::string ptx;
  std::function<result<std::string>()> make;
};

struct jit_request {
  package_ptr package;
  std::size_t entry = 0;             // a PTX entry of `package`
  const driver* drv = nullptr;
  const device* dev = nullptr;       // compile for (and in the primary context of) this device
  std::string module;                // for messages and the driver's log
  // The SASS to produce, as major*10+minor: 0 for dev's own CC. Another CC is compiled through the
  // driver's cross-target JIT (CU_JIT_TARGET) in dev's primary context (`fatpack warm --target`).
  std::uint32_t target_arch = 0;
  // Compile even when the cache has the key: the driver refused the SASS the cache gave (an entry
  // of another driver after a rollback, a prebuilt layer from a newer driver). The result replaces
  // the entry (this driver's key).
  bool bypass_cache = false;
  // Set: compile this piece of the entry's PTX instead of the whole entry (the entry still gives the
  // target, PTX ISA and options). `module` then names the piece for messages.
  std::shared_ptr<const jit_piece> piece;
};

// What the service did, for cache_stats() (the storage's own counters are the cache's business).
struct jit_counters {
  std::atomic<std::uint64_t> hits_exact{0};
  std::atomic<std::uint64_t> hits_other_driver{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> jits{0};
  std::atomic<std::uint64_t> jit_us{0};
  std::atomic<std::uint64_t> refreshes{0};  // background re-JITs after other-driver hits
  std::atomic<std::uint64_t> upgrades{0};   // background upgrades compiled (set_background_upgrade)
};

struct jit_result {
  std::shared_ptr<const sass_bytes> sass;  // a cache hit's may be a mapping of its entry
  std::string info_log;
  double jit_ms = 0;        // the compile's own time (0 when reused)
  double decompress_ms = 0;
  bool reused = false;      // from an earlier compile in this process, or from the cache
  bool from_cache = false;  // from sass_cache
  bool other_driver = false;  // from sass_cache, an entry another driver built (cache_hit::exact false)
  std::string path;         // "culink", "nvjitlink 13.0"
};

class jit_task;
struct nvjitlink_lib;

class jit_service {
 public:
  static jit_service& instance();

  // Compiles (or finds) the SASS for `req` now, on this thread if nobody else is compiling it.
  result<jit_result> compile(const jit_request& req);
  // Queues a background compile (no-op when the key is known or in flight). The task can be waited on.
  // Once the process exits, queued compiles not started are dropped; running ones are waited for.
  result<std::shared_ptr<jit_task>> enqueue(const jit_request& req);
  // Waits for a task from enqueue(); a task still queued is taken over by the caller.
  result<jit_result> wait(const std::shared_ptr<jit_task>& task);

  // Background upgrade (load/selection.hpp): true when the cache has SASS of this driver for `req`
  // (an exact hit; it reads the entry). False without a cache.
  bool cached_exact(const jit_request& req);
  // Compiles `req` on the pool and stores the SASS in the cache, unless the cache has it by then;
  // tracked like the re-JITs (wait_refreshes waits for it; an exiting process drops it if it has
  // not started). False when there is no cache to store into (nothing is queued).
  bool upgrade(const jit_request& req);

  // Forgets the in-process result for `req`'s key (a finished one), so the next compile runs again.
  void forget(const jit_request& req);

  // The key the cache is asked with for `req` (its backend resolved to the path that will compile).
  jit_key cache_key_for(const jit_request& req);

  // Waits for the background re-JITs that other-driver cache hits queued, the compiles enqueue()d
  // (warm-up, a module's pieces), and every pending store (fatpack::wait_cache_refresh).
  void wait_refreshes();
  // Waits until every store queued so far has reached the cache (at most timeout_ms; <0: no bound).
  // False when the bound was reached first.
  bool flush_stores(long timeout_ms = -1);

  void set_threads(unsigned n);
  // Number of compiles actually run (not reused) in this process; for tests and statistics.
  std::size_t compiles() const;
  const jit_counters& counters() const { return counters_; }

 private:
  jit_service() = default;
  std::shared_ptr<jit_task> get_or_create(const jit_request& req, bool& created);
  void run(const std::shared_ptr<jit_task>& task);
  void run_guarded(const std::shared_ptr<jit_task>& task);
  // One compile actually run (a load's, a warm-up's or a refresh's): compiles() and the counters.
  void count_compile(double ms);
  // Queues a re-JIT of `key` for this driver after an other-driver hit; stores the result.
  void refresh(const jit_request& req, const jit_key& key, const nvjitlink_lib* nvj);
  // What refresh() and upgrade() share: a tracked background compile of `key` that stores its SASS
  // unless the cache has an exact entry by the time it runs. `what` names it in log lines.
  void compile_in_background(const jit_request& req, const jit_key& key, const nvjitlink_lib* nvj, bool is_upgrade);
  // Hands `sass` to the cache on the pool; `guard` (the cross-process compile lock) is released
  // after the store.
  void publish(std::shared_ptr<sass_cache> cache, const jit_key& key,
               std::shared_ptr<const sass_bytes> sass, std::unique_ptr<compile_guard> guard);
  // Runs `job` on the pool (or, with `store_queue`, on the one-thread store queue), or here when it
  // cannot take the job (no thread could be started).
  void background(std::function<void()> job, bool store_queue = false);
  // The pending counts belong to the process that queued the work (work_pid_): a fork() child
  // resets them when it queues its own, and never waits for the parent's (parents_work()).
  void adopt_counts_locked();
  bool parents_work() const;
  // Registers (once per kind) the exit handler that calls flush_at_exit(10 s): early (enqueue,
  // before the pool may enter the driver) and after a compile (after the driver's lazy
  // registrations); the handler's body runs once.
  static void at_exit_flush(bool after_jit);
  // Waits for the pending stores, the running re-JITs and the running enqueue()d compiles; queued
  // ones are dropped from then on.
  bool flush_at_exit(long timeout_ms);
  core::thread_pool& pool();

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<jit_task>> tasks_;
  std::unique_ptr<core::thread_pool> pool_;
  // Stores, one at a time in order (as Mesa queues its cache writes): the JIT threads stay free, and
  // each store's eviction sees the one before it (concurrent stores would skip eviction while
  // another holds the evict lock).
  std::unique_ptr<core::thread_pool> store_queue_;
  unsigned threads_ = 0;
  std::size_t compiles_ = 0;
  std::size_t refresh_pending_ = 0;
  std::size_t stores_pending_ = 0;
  std::size_t queued_running_ = 0;  // enqueue()d compiles running on the pool (the exit flush waits for them)
  std::size_t queued_pending_ = 0;  // enqueue()d compiles not finished or dropped (wait_refreshes waits for them)
  std::atomic<int> work_pid_{0};  // the process whose work the pending counts are
  std::atomic<bool> exiting_{false};  // the exit flush has begun
  std::condition_variable idle_cv_;  // refresh_pending_ or stores_pending_ went down
  jit_counters counters_;
};

// The cache the JIT service asks (the seam, cache/sass_cache.hpp). Nothing is installed at first:
// the service then uses no cache. set_sass_cache(nullptr) installs null_sass_cache. Install before the
// first load; a cache replaced while compiles run is used by the compiles that start afterwards.
void set_sass_cache(std::shared_ptr<sass_cache> cache);
// Installs make() unless a cache is installed already (make runs at most once, under the lock).
void install_sass_cache_if_none(const std::function<std::shared_ptr<sass_cache>()>& make);
// Arms make() for get_sass_cache(): while nothing is installed, the first get_sass_cache() installs
// make() (at most once, under the lock). A load arms the default cache instead of opening it, so a
// load that needs no JIT (SASS) never touches the cache directory.
void arm_sass_cache(std::function<std::shared_ptr<sass_cache>()> make);
bool sass_cache_installed();
// Back to "nothing installed", disarmed (tests, and `fatpack warm` restoring what it found).
void uninstall_sass_cache();
// The installed cache; else the armed one, installed now; else null_sass_cache.
std::shared_ptr<sass_cache> get_sass_cache();

// The in-process single-flight key. Its backend is the one requested ("culink" / "nvjitlink"); the
// key given to the cache names the path that actually produced the bytes (with nvJitLink's version).
jit_key make_jit_key(const jit_request& req);
// FATPACK_JIT_BACKEND / set_jit_backend.
jit_backend jit_backend_in_use();
// fatpack::set_jit_backend (api/settings_api.cpp): wins over FATPACK_JIT_BACKEND from then on.
void set_jit_backend_override(jit_backend b);
// True once the task has finished (successfully or not).
bool jit_task_done(const std::shared_ptr<jit_task>& task);

}  // namespace fatpack::detail
