// The cache's locks (docs/cache.md §4). All are kernel-managed: released when the holder dies, so a
// process killed at any instruction never leaves a lock behind; nothing lock-like lives in a file.
//
//  - dir_lock: an open-file-description (OFD) write lock (polled F_OFD_SETLK, bounded, through the fs seam) on a
//    dedicated lock file (index.lock, evict.lock), opened O_CLOEXEC | O_NOFOLLOW, paired with an
//    in-process mutex because the threads of a process share the object's one description. One object
//    per file per process, from a table keyed by (device, inode). OFD locks belong to the description,
//    not to the process: closing another descriptor of the file drops nothing, a child never inherits
//    them across exec (O_CLOEXEC), and two copies of the runtime in one process (two shared libraries,
//    each with its own table) exclude each other as two processes do.
//  - key_lock: the per-key single-flight lock, an open-file-description (OFD) byte lock on
//    inflight.lock at an offset derived from the key. Each acquisition opens its own description, so
//    threads exclude each other as processes do, and closing it releases only that lock. The wait
//    is bounded (then the caller compiles anyway: entries are immutable and content-addressed, so
//    single flight saves work but is not needed for correctness) and polls `ready` so that waiters
//    go on as soon as the entry appears. OFD locks report no owner, so acquire() also publishes a
//    holder record (holders.hpp: pid, host, start time, a heartbeat) for as long as it holds the
//    lock, and a waiter reads the holder's record about once a second to stop waiting early for one
//    that is stopped, gone or no longer making progress. The record is advisory; the lock is the truth.
#pragma once

#include "cache/holders.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fatpack::detail::cache {

// How long dir_lock::lock waits (docs/cache.md §4).
inline constexpr int dir_lock_wait_ms = 2000;

class dir_lock {
 public:
  // The lock object for `path` (created 0600 if missing). nullptr with `why` when the file cannot be
  // created or opened (read-only directory, ...).
  static std::shared_ptr<dir_lock> get(const std::string& path, std::string& why);
  // A lock object outside this process's table: what a second copy of the runtime in this process
  // (another shared library with its own hidden copy) has. For tests.
  static std::shared_ptr<dir_lock> open_unshared(const std::string& path, std::string& why);
  virtual ~dir_lock() = default;
  // Exclusive; false with `why` on an error (ENOLCK, ...) or after dir_lock_wait_ms (the holders
  // keep it for microseconds, an index rebuild for about a second; a longer hold is a holder that is
  // stopped, and waiting for it would hang this process's store or load).
  virtual bool lock(std::string& why) = 0;
  // Non-blocking: false when another thread or process holds it (`err`, if given: EAGAIN), or on an
  // error (`err`: its errno).
  virtual bool try_lock(int* err = nullptr) = 0;
  virtual void unlock() = 0;
};

// RAII over dir_lock::lock.
class dir_lock_guard {
 public:
  explicit dir_lock_guard(dir_lock& l, std::string& why) : l_(l), ok_(l.lock(why)) {}
  ~dir_lock_guard() {
    if (ok_) l_.unlock();
  }
  dir_lock_guard(const dir_lock_guard&) = delete;
  dir_lock_guard& operator=(const dir_lock_guard&) = delete;
  bool ok() const { return ok_; }

 private:
  dir_lock& l_;
  bool ok_;
};

class key_lock {
 public:
  // acquired_after_wait: another holder had it first (its compile is probably published now).
  enum class outcome { acquired, acquired_after_wait, ready, timed_out, failed };
  // Waits at most wait_ms for the byte lock of `key_hash` on `lock_file`, calling `ready` between
  // attempts (true: the entry appeared, stop waiting). `why` explains `failed`. `timed_out` with a
  // non-empty `why` is an early stop: the holder's record says it is stopped, gone, or its heartbeat
  // stood still for `stall_s` seconds ("pid 1234 on host-a is stopped"; holders.hpp); with an
  // empty `why`, wait_ms passed.
  static std::unique_ptr<key_lock> acquire(const std::string& lock_file, std::uint64_t key_hash, int wait_ms,
                                           const std::function<bool()>& ready, outcome& result, std::string& why,
                                           int stall_s = default_holder_stall_s);
  // Without waiting (eviction, quarantine): nullptr when busy (`err`, if given: EAGAIN) or on error
  // (`err`: its errno).
  static std::unique_ptr<key_lock> try_acquire(const std::string& lock_file, std::uint64_t key_hash, int* err = nullptr);
  ~key_lock();
  key_lock(const key_lock&) = delete;
  key_lock& operator=(const key_lock&) = delete;

 private:
  key_lock(int fd, std::uint64_t off) : fd_(fd), off_(off) {}
  int fd_;
  std::uint64_t off_;
  std::unique_ptr<holder_record> record_;  // acquire() only; removed before the unlock
};

}  // namespace fatpack::detail::cache
