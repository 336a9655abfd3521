// Cache locks (locks.hpp).
#include "cache/locks.hpp"

#include "cache/fs.hpp"

#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace fatpack::detail::cache {

namespace {

// An OFD write lock on byte 0 of a dedicated lock file, through the seam, plus an in-process mutex:
// the threads of this process share the one open file description, and a description does not
// exclude itself. (Byte 0 also conflicts with the whole-file fcntl lock older runtimes took.)
class ofd_dir_lock final : public dir_lock {
 public:
  explicit ofd_dir_lock(int fd) : fd_(fd) {}
  ~ofd_dir_lock() override { current_fs().close(fd_); }
  bool lock(std::string& why) override {
    mu_.lock();
    // Polled, never F_OFD_SETLKW: a holder stopped inside its few microseconds (SIGSTOP, a debugger,
    // a frozen container) must not hang every other process's store or load. After the bound the
    // caller skips its index update; the index is advisory (entries are files, found without it).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(dir_lock_wait_ms);
    int sleep_us = 50;
    while (true) {
      const int e = current_fs().try_byte_lock(fd_, 0);
      if (e == 0) return true;
      if ((e != EAGAIN && e != EWOULDBLOCK) || std::chrono::steady_clock::now() >= deadline) {
        mu_.unlock();
        why = e == EAGAIN || e == EWOULDBLOCK
                  ? "file lock: held by another process for more than " + std::to_string(dir_lock_wait_ms) +
                        " ms (stopped?)"
                  : "file lock: " + errno_text(e);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      sleep_us = sleep_us < 5000 ? sleep_us * 2 : 10000;
    }
  }
  bool try_lock(int* err) override {
    if (!mu_.try_lock()) {
      if (err) *err = EAGAIN;
      return false;
    }
    const int e = current_fs().try_byte_lock(fd_, 0);
    if (err) *err = e;
    if (e == 0) return true;
    mu_.unlock();
    return false;
  }
  void unlock() override {
    // Its failure is silent by design: F_UNLCK of one byte (no range to split) fails only on a bad
    // descriptor; and a lock left would only make other processes skip an advisory index update
    // (after dir_lock_wait_ms) or an eviction pass (this process's own description never conflicts
    // with itself).
    current_fs().byte_unlock(fd_, 0);
    mu_.unlock();
  }

 private:
  int fd_;
  std::mutex mu_;
};

// Opens (creates 0600) the lock file through the seam; (device, inode) of what was opened.
std::shared_ptr<ofd_dir_lock> open_lock_file(const std::string& path, std::pair<std::uint64_t, std::uint64_t>& id,
                                             std::string& why) {
  fs& f = current_fs();
  int fd = -1;
  file_stat st;
  if (int e = open_regular(f, path, fd, &st, open_mode::read_write)) {
    why = open_problem(path, e);
    return nullptr;
  }
  id = {st.device, st.inode};
  return std::make_shared<ofd_dir_lock>(fd);
}

std::mutex& registry_mu() {
  static auto* m = new std::mutex();
  return *m;
}
// Keyed by the file (device, inode), not by the path's spelling: two spellings of one file share one
// object (one mutex), and a lock file deleted and recreated at the same path is another file. Leaked
// on purpose: a lock object may be in use by a thread while the process exits. Each object keeps its
// descriptor open, so the inode of its key cannot be reused meanwhile.
std::map<std::pair<std::uint64_t, std::uint64_t>, std::shared_ptr<dir_lock>>& registry() {
  static auto* r = new std::map<std::pair<std::uint64_t, std::uint64_t>, std::shared_ptr<dir_lock>>();
  return *r;
}

// 2^24 byte offsets: two keys share one only by chance, which merely serialises their compiles.
std::uint64_t offset_of(std::uint64_t key_hash) { return key_hash & ((1ull << 24) - 1); }

}  // namespace

std::shared_ptr<dir_lock> dir_lock::get(const std::string& path, std::string& why) {
  std::pair<std::uint64_t, std::uint64_t> id;
  auto fresh = open_lock_file(path, id, why);
  if (!fresh) return nullptr;
  std::lock_guard<std::mutex> g(registry_mu());
  auto it = registry().find(id);
  if (it != registry().end()) return it->second;  // `fresh` closes its descriptor: that drops no OFD lock
  registry().emplace(id, fresh);
  return fresh;
}

std::shared_ptr<dir_lock> dir_lock::open_unshared(const std::string& path, std::string& why) {
  std::pair<std::uint64_t, std::uint64_t> id;
  return open_lock_file(path, id, why);
}

std::unique_ptr<key_lock> key_lock::acquire(const std::string& lock_file, std::uint64_t key_hash, int wait_ms,
                                            const std::function<bool()>& ready, outcome& result, std::string& why,
                                            int stall_s) {
  fs& f = current_fs();
  int fd = -1;
  if (int e = f.open(lock_file, open_mode::read_write, fd)) {
    result = outcome::failed;
    why = lock_file + ": " + errno_text(e);
    return nullptr;
  }
  const std::uint64_t off = offset_of(key_hash);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  int sleep_ms = 1;
  bool waited = false;
  // The holder's record is read about once a second, from the first second on: a short wait (most
  // of them: a JIT takes milliseconds) reads nothing.
  std::unique_ptr<holder_watch> watch;
  auto next_look = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (true) {
    int e = f.try_byte_lock(fd, off);
    if (e == 0) {
      result = waited ? outcome::acquired_after_wait : outcome::acquired;
      std::unique_ptr<key_lock> l(new key_lock(fd, off));
      l->record_ = holder_record::publish(lock_file, off);  // best effort: without it, waiters wait the bound
      return l;
    }
    if (e != EAGAIN && e != EWOULDBLOCK) {
      f.close(fd);
      result = outcome::failed;
      why = lock_file + ": byte lock: " + errno_text(e);
      return nullptr;
    }
    if (ready && ready()) {
      f.close(fd);
      result = outcome::ready;
      return nullptr;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_look && now < deadline) {
      next_look = now + std::chrono::seconds(1);
      if (!watch) watch = std::make_unique<holder_watch>(lock_file, off, stall_s);
      if (std::string stop = watch->check(now); !stop.empty()) {
        f.close(fd);
        result = outcome::timed_out;
        why = std::move(stop);
        return nullptr;
      }
    }
    if (now >= deadline) {
      f.close(fd);
      result = outcome::timed_out;
      return nullptr;
    }
    waited = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = sleep_ms < 32 ? sleep_ms * 2 : 50;  // 1, 2, 4 ... 50 ms: short JITs are noticed quickly
  }
}

std::unique_ptr<key_lock> key_lock::try_acquire(const std::string& lock_file, std::uint64_t key_hash, int* err) {
  fs& f = current_fs();
  int fd = -1;
  int ignored = 0;
  int& e = err ? *err : ignored;
  if ((e = f.open(lock_file, open_mode::read_write, fd))) return nullptr;
  const std::uint64_t off = offset_of(key_hash);
  if ((e = f.try_byte_lock(fd, off)) != 0) {
    f.close(fd);
    return nullptr;
  }
  return std::unique_ptr<key_lock>(new key_lock(fd, off));
}

key_lock::~key_lock() {
  record_.reset();  // before the unlock: the next holder writes its own
  fs& f = current_fs();
  // Its failure is silent by design: closing the description right after releases the lock anyway.
  f.byte_unlock(fd_, off_);
  f.close(fd_);
}

}  // namespace fatpack::detail::cache
