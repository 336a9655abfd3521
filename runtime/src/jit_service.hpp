// The JIT service: one compile per key per process, results kept in memory, the cache seam asked
// first, background compiles on the thread pool.
//
// Policy:
//  - Single flight: a key (jit_key::str(): PTX hash, target CC, options, JIT path, driver) has at most
//    one compile in the process; every other caller waits for it and shares the SASS. Two devices
//    of the same CC share one compile.
//  - A compile that a load needs runs on the loading thread (it is needed now; queueing it behind
//    background work would only delay it). Background compiles (warm-up) run on the pool; a load
//    that needs a key the pool has not started yet takes the job over, one already running is waited
//    for.
//  - Successful results stay in memory for the life of the process (a module unloaded and loaded
//    again is not compiled again); failures are returned to everyone waiting and then forgotten, so a
//    later load tries again.
//  - Order per compile: sass_cache::lookup -> sass_cache::begin_compile (cross-process single
//    flight: bounded wait for another process compiling the same key) -> lookup again -> decompress
//    the PTX (only that entry, NUL-terminated) -> nvJitLink when chosen (jit_nvjitlink.hpp), else (or
//    for an arch it does not know) retain the device's primary context, make it current and cuLink
//    -> sass_cache::store -> release the compile lock.
//  - A hit from another driver (same code key) is used at once and re-JIT-ed for this driver on the
//    pool (refresh), so the next process gets an exact hit.
#pragma once

#include "device.hpp"
#include "jit.hpp"
#include "registry.hpp"
#include "sass_cache.hpp"

#include "fatpack/core/thread_pool.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fatpack::detail {

struct jit_request {
  package_ptr package;
  std::size_t entry = 0;             // a PTX entry of `package`
  const driver* drv = nullptr;
  const device* dev = nullptr;       // compile for (and in the primary context of) this device
  std::string module;                // for messages and the driver's log
};

struct jit_result {
  std::shared_ptr<const std::vector<std::uint8_t>> sass;
  std::string info_log;
  double jit_ms = 0;        // the compile's own time (0 when reused)
  double decompress_ms = 0;
  bool reused = false;      // from an earlier compile in this process, or from the cache
  bool from_cache = false;  // from sass_cache
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
  std::shared_ptr<jit_task> enqueue(const jit_request& req);
  // Waits for a task from enqueue(); a task still queued is taken over by the caller.
  result<jit_result> wait(const std::shared_ptr<jit_task>& task);

  // Waits for the background re-JITs that other-driver cache hits queued (fatpack::wait_cache_refresh).
  void wait_refreshes();

  void set_threads(unsigned n);
  // Number of compiles actually run (not reused) in this process; for tests and statistics.
  std::size_t compiles() const;

 private:
  jit_service() = default;
  std::shared_ptr<jit_task> get_or_create(const jit_request& req, bool& created);
  void run(const std::shared_ptr<jit_task>& task);
  // Queues a re-JIT of `key` for this driver after an other-driver hit; stores the result.
  void refresh(const jit_request& req, const jit_key& key, const nvjitlink_lib* nvj);
  core::thread_pool& pool();

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<jit_task>> tasks_;
  std::unique_ptr<core::thread_pool> pool_;
  unsigned threads_ = 0;
  std::size_t compiles_ = 0;
  std::size_t refresh_pending_ = 0;
  std::condition_variable refresh_cv_;
};

// The in-process single-flight key. Its backend is the one requested ("culink" / "nvjitlink"); the
// key given to the cache names the path that actually produced the bytes (with nvJitLink's version).
jit_key make_jit_key(const jit_request& req);
// The same for a PTX entry compiled for `target_arch` by a driver of `driver_version` (warm --target).
jit_key make_jit_key(const core::entry_info& e, std::uint32_t target_arch, int driver_version);
// FATPACK_JIT_BACKEND / set_jit_backend.
jit_backend jit_backend_in_use();
// True once the task has finished (successfully or not).
bool jit_task_done(const std::shared_ptr<jit_task>& task);

}  // namespace fatpack::detail
