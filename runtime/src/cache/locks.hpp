// The cache's locks (docs/cache.md §4). All are kernel-managed: released when the holder dies, so a
// process killed at any instruction never leaves a lock behind; nothing lock-like lives in a file.
//
//  - dir_lock: Boost.Interprocess file_lock (whole-file fcntl lock) on a dedicated lock file
//    (index.lock, evict.lock), paired with an in-process mutex because fcntl locks do not exclude
//    threads of one process. One object per lock file per process (a process-global registry, never
//    freed), because closing *any* descriptor of a file drops the process's fcntl locks on it. Other
//    code opens a lock file only while this process has no lock object for it (dir_lock::exists),
//    so no close can drop a lock this process holds; lock files are never deleted.
//  - key_lock: the per-key single-flight lock, an open-file-description (OFD) byte lock on
//    inflight.lock at an offset derived from the key. Each acquisition opens its own description, so
//    threads exclude each other as processes do, and closing it releases only that lock. The wait
//    is bounded (then the caller compiles anyway: entries are immutable and content-addressed, so
//    single flight saves work but is not needed for correctness) and polls `ready` so that waiters
//    go on as soon as the entry appears.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fatpack::detail::cache {

class dir_lock {
 public:
  // The lock object for `path` (created 0600 if missing). nullptr with `why` when the file cannot be
  // created or opened (read-only directory, ...).
  static std::shared_ptr<dir_lock> get(const std::string& path, std::string& why);
  // True once get() has made the lock object for `path` in this process (it may be held now).
  static bool exists(const std::string& path);
  virtual ~dir_lock() = default;
  // Exclusive; false with `why` on an error (ENOLCK, ...). Blocking (the holders keep it for
  // microseconds: index updates).
  virtual bool lock(std::string& why) = 0;
  // Non-blocking: false when another thread or process holds it.
  virtual bool try_lock() = 0;
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
  // attempts (true: the entry appeared, stop waiting). `why` explains `failed`.
  static std::unique_ptr<key_lock> acquire(const std::string& lock_file, std::uint64_t key_hash, int wait_ms,
                                           const std::function<bool()>& ready, outcome& result, std::string& why);
  // Without waiting (eviction, quarantine): nullptr when busy or on error.
  static std::unique_ptr<key_lock> try_acquire(const std::string& lock_file, std::uint64_t key_hash);
  ~key_lock();
  key_lock(const key_lock&) = delete;
  key_lock& operator=(const key_lock&) = delete;

 private:
  key_lock(int fd, std::uint64_t off) : fd_(fd), off_(off) {}
  int fd_;
  std::uint64_t off_;
};

}  // namespace fatpack::detail::cache
