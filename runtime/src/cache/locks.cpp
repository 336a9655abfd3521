// Cache locks (locks.hpp).
#include "cache/locks.hpp"

#include "cache/fs.hpp"

#include <boost/interprocess/sync/file_lock.hpp>

#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace fatpack::detail::cache {

namespace bip = boost::interprocess;

namespace {

class boost_dir_lock final : public dir_lock {
 public:
  explicit boost_dir_lock(const char* path) : fl_(path) {}
  bool lock(std::string& why) override {
    mu_.lock();
    try {
      fl_.lock();
      return true;
    } catch (const std::exception& e) {
      mu_.unlock();
      why = std::string("file lock: ") + e.what();
      return false;
    }
  }
  bool try_lock() override {
    if (!mu_.try_lock()) return false;
    try {
      if (fl_.try_lock()) return true;
    } catch (const std::exception&) {
    }
    mu_.unlock();
    return false;
  }
  void unlock() override {
    try {
      fl_.unlock();
    } catch (const std::exception&) {
    }
    mu_.unlock();
  }

 private:
  std::mutex mu_;
  bip::file_lock fl_;
};

std::mutex& registry_mu() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<std::string, std::shared_ptr<dir_lock>>& registry() {
  // Leaked on purpose: the lock files stay open (and their locks valid) until the process ends.
  static auto* r = new std::map<std::string, std::shared_ptr<dir_lock>>();
  return *r;
}

// 2^24 byte offsets: two keys share one only by chance, which merely serialises their compiles.
std::uint64_t offset_of(std::uint64_t key_hash) { return key_hash & ((1ull << 24) - 1); }

}  // namespace

bool dir_lock::exists(const std::string& path) {
  std::lock_guard<std::mutex> g(registry_mu());
  return registry().count(path) != 0;
}

std::shared_ptr<dir_lock> dir_lock::get(const std::string& path, std::string& why) {
  std::lock_guard<std::mutex> g(registry_mu());
  auto it = registry().find(path);
  if (it != registry().end()) return it->second;
  fs& f = current_fs();
  int fd = -1;
  if (int e = f.open(path, open_mode::read_write, fd)) {
    why = path + ": " + errno_text(e);
    return nullptr;
  }
  f.close(fd);  // no lock is held yet, so this close drops nothing
  try {
    auto l = std::make_shared<boost_dir_lock>(path.c_str());
    registry().emplace(path, l);
    return l;
  } catch (const std::exception& e) {
    why = path + ": " + e.what();
    return nullptr;
  }
}

std::unique_ptr<key_lock> key_lock::acquire(const std::string& lock_file, std::uint64_t key_hash, int wait_ms,
                                            const std::function<bool()>& ready, outcome& result, std::string& why) {
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
  while (true) {
    int e = f.try_byte_lock(fd, off);
    if (e == 0) {
      result = waited ? outcome::acquired_after_wait : outcome::acquired;
      return std::unique_ptr<key_lock>(new key_lock(fd, off));
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
    if (std::chrono::steady_clock::now() >= deadline) {
      f.close(fd);
      result = outcome::timed_out;
      return nullptr;
    }
    waited = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = sleep_ms < 32 ? sleep_ms * 2 : 50;  // 1, 2, 4 ... 50 ms: short JITs are noticed quickly
  }
}

std::unique_ptr<key_lock> key_lock::try_acquire(const std::string& lock_file, std::uint64_t key_hash) {
  fs& f = current_fs();
  int fd = -1;
  if (f.open(lock_file, open_mode::read_write, fd)) return nullptr;
  const std::uint64_t off = offset_of(key_hash);
  if (f.try_byte_lock(fd, off) != 0) {
    f.close(fd);
    return nullptr;
  }
  return std::unique_ptr<key_lock>(new key_lock(fd, off));
}

key_lock::~key_lock() {
  fs& f = current_fs();
  f.byte_unlock(fd_, off_);
  f.close(fd_);
}

}  // namespace fatpack::detail::cache
