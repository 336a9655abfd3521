// A file-system seam wrapper for the robustness tests (crash enumeration, I/O error matrix): it
// numbers every I/O call the cache makes through `fs` and lets a test decide, per call, to let it
// through, to fail it with an errno, to tear it (a pwrite that writes half), or to end the process
// there (a "crash" at that instruction: the forked child calls _exit, or stops and waits for SIGKILL).
// Each call is also tagged with its call site (the caller's return address), so that a test can
// fail "every call from store.cpp's rename" rather than "the 7th call".
//
// Counters live in a MAP_SHARED anonymous page created before fork, so the parent sees how far a
// child got. Everything here is async-signal-safe enough for a child of a single-threaded parent.
#pragma once

#include "cache/fs.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace fault {

using fatpack::detail::cache::file_stat;
using fatpack::detail::cache::fs;
using fatpack::detail::cache::open_mode;

enum class op : int {
  open_read, open_new, open_rw, close, pread, pwrite, allocate, fstat, stat, mkdir, chmod, rename, unlink, rmdir,
  list_dir, try_flock, try_byte_lock, byte_unlock, network_fs, map_read, count_
};

inline const char* op_name(op o) {
  static const char* const n[] = {"open(read)", "open(create_new)", "open(read_write)", "close", "pread", "pwrite",
                                  "allocate", "fstat", "stat", "mkdir", "chmod", "rename", "unlink", "rmdir",
                                  "list_dir", "try_flock", "try_byte_lock", "byte_unlock", "network_fs",
                                  "map_read"};
  return n[static_cast<int>(o)];
}

// Ops whose result is an errno the caller sees (close and network_fs have none to fail).
inline bool can_fail(op o) { return o != op::close && o != op::network_fs; }

// What to do with one call.
enum class action : int {
  pass,     // do it
  fail,     // return `err` without doing it
  torn,     // pwrite: write the first half, then return `err` (a short write); pread: read half, report EOF
  crash,    // _exit(crash_exit) before doing it
  crash_after,  // do it, then _exit(crash_exit)
  freeze,   // tell the parent (freeze_fd) and stop until killed (SIGKILL): a writer killed right here
            // while others go on
};

inline constexpr int crash_exit = 86;

// A record of one distinct call site.
struct site {
  std::uintptr_t ra = 0;
  op what = op::count_;
};

// Shared between a forked child and its parent.
struct shared_block {
  std::atomic<long> ops{0};          // I/O calls so far
  std::atomic<long> acted{0};        // calls an action other than pass was applied to
  std::atomic<int> crashed_op{-1};   // the op a crash/freeze happened at
  std::atomic<int> nsites{0};
  std::int8_t op_at[8192];           // the op of each call (the first 8192)
  site sites[512];
};

inline shared_block* new_shared_block() {
  void* p = mmap(nullptr, sizeof(shared_block), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) shared_block();
}
inline void reset(shared_block* b) {
  b->~shared_block();
  new (b) shared_block();
}

// The symbol of a return address (the test executable is linked with exported symbols).
inline std::string site_name(std::uintptr_t ra) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(ra), &info) && info.dli_sname) {
    std::string s = info.dli_sname;
    // "_ZN7fatpack6detail5cache9cache_dir5writeE..." -> keep it short but recognisable
    return s.size() > 80 ? s.substr(0, 80) : s;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%zx", static_cast<std::size_t>(ra));
  return buf;
}

// The caller's address: evaluated inside each override, it names the call site in the cache code.
#define FAULT_FS_RA() reinterpret_cast<std::uintptr_t>(__builtin_return_address(0))

// The wrapper. `decide` is called for every I/O call with its number (0-based), op and call site.
class fault_fs final : public fs {
 public:
  struct policy {
    virtual ~policy() = default;
    // `err` is set for action::fail / action::torn.
    virtual action decide(long n, op o, std::uintptr_t ra, int& err) = 0;
  };

  explicit fault_fs(shared_block* b, policy* p = nullptr) : b_(b), p_(p) {}
  fs& real = fatpack::detail::cache::posix_fs();
  std::int64_t clock_offset_s = 0;  // moves the cache's clock (temp-file age, clean-up due)
  int freeze_fd = -1;               // written to (one byte) before freezing
  bool record_sites = false;

  int open(const std::string& p, open_mode m, int& fd) override {
    op o = m == open_mode::read ? op::open_read : m == open_mode::create_new ? op::open_new : op::open_rw;
    return run(o, FAULT_FS_RA(), [&] { return real.open(p, m, fd); }, [] {});
  }
  void close(int fd) override { run(op::close, FAULT_FS_RA(), [&] { real.close(fd); return 0; }, [] {}); }
  int pread(int fd, void* buf, std::size_t n, std::uint64_t off, std::size_t& got) override {
    return run(op::pread, FAULT_FS_RA(), [&] { return real.pread(fd, buf, n, off, got); },
               [&] {  // torn read: the file looks shorter than it is
                 real.pread(fd, buf, n / 2, off, got);
               },
               /*torn_result=*/0);
  }
  int pwrite(int fd, const void* buf, std::size_t n, std::uint64_t off) override {
    return run(op::pwrite, FAULT_FS_RA(), [&] { return real.pwrite(fd, buf, n, off); },
               [&] { real.pwrite(fd, buf, n / 2, off); });
  }
  int allocate(int fd, std::uint64_t n) override { return run(op::allocate, FAULT_FS_RA(), [&] { return real.allocate(fd, n); }, [] {}); }
  int fstat(int fd, file_stat& st) override { return run(op::fstat, FAULT_FS_RA(), [&] { return real.fstat(fd, st); }, [] {}); }
  int map_read(int fd, std::uint64_t n, const void*& a) override {
    return run(op::map_read, FAULT_FS_RA(), [&] { return real.map_read(fd, n, a); }, [] {});
  }
  int stat(const std::string& p, file_stat& st) override { return run(op::stat, FAULT_FS_RA(), [&] { return real.stat(p, st); }, [] {}); }
  int mkdir(const std::string& p, std::uint32_t m) override { return run(op::mkdir, FAULT_FS_RA(), [&] { return real.mkdir(p, m); }, [] {}); }
  int chmod(const std::string& p, std::uint32_t m) override { return run(op::chmod, FAULT_FS_RA(), [&] { return real.chmod(p, m); }, [] {}); }
  int rename(const std::string& a, const std::string& c) override {
    return run(op::rename, FAULT_FS_RA(), [&] { return real.rename(a, c); }, [] {});
  }
  int unlink(const std::string& p) override { return run(op::unlink, FAULT_FS_RA(), [&] { return real.unlink(p); }, [] {}); }
  int rmdir(const std::string& p) override { return run(op::rmdir, FAULT_FS_RA(), [&] { return real.rmdir(p); }, [] {}); }
  int list_dir(const std::string& p, std::vector<std::string>& n) override {
    return run(op::list_dir, FAULT_FS_RA(), [&] { return real.list_dir(p, n); }, [] {});
  }
  int try_flock(int fd) override { return run(op::try_flock, FAULT_FS_RA(), [&] { return real.try_flock(fd); }, [] {}); }
  int try_byte_lock(int fd, std::uint64_t o) override {
    return run(op::try_byte_lock, FAULT_FS_RA(), [&] { return real.try_byte_lock(fd, o); }, [] {});
  }
  int byte_unlock(int fd, std::uint64_t o) override {
    return run(op::byte_unlock, FAULT_FS_RA(), [&] { return real.byte_unlock(fd, o); }, [] {});
  }
  bool network_fs(const std::string& p) override {
    bool r = false;
    run(op::network_fs, FAULT_FS_RA(), [&] { r = real.network_fs(p); return 0; }, [] {});
    return r;
  }
  std::uint32_t euid() override { return real.euid(); }
  std::string passwd_home() override { return real.passwd_home(); }
  bool privileged_exec() override { return real.privileged_exec(); }
  std::int64_t now_unix_s() override { return real.now_unix_s() + clock_offset_s; }
  std::int64_t now_unix_ns() override { return real.now_unix_ns() + clock_offset_s * 1000000000ll; }
  int pid() override { return real.pid(); }

 private:
  void note_site(op o, std::uintptr_t ra) {
    std::lock_guard<std::mutex> g(mu_);
    int n = b_->nsites.load();
    for (int i = 0; i < n; ++i)
      if (b_->sites[i].ra == ra && b_->sites[i].what == o) return;
    if (n < 512) {
      b_->sites[n] = site{ra, o};
      b_->nsites.store(n + 1);
    }
  }

  template <class Do, class Torn>
  int run(op o, std::uintptr_t ra, Do&& doit, Torn&& torn, int torn_result = -1) {
    const long n = b_->ops.fetch_add(1);
    if (n < 8192) b_->op_at[n] = static_cast<std::int8_t>(o);
    if (record_sites) note_site(o, ra);
    int err = 0;
    action a = p_ ? p_->decide(n, o, ra, err) : action::pass;
    switch (a) {
      case action::pass: return doit();
      case action::fail:
        b_->acted++;
        return can_fail(o) ? err : doit();
      case action::torn:
        b_->acted++;
        if (o == op::pwrite || o == op::pread) {
          torn();
          return torn_result >= 0 ? torn_result : err;
        }
        return can_fail(o) ? err : doit();
      case action::crash:
        b_->crashed_op = static_cast<int>(o);
        _exit(crash_exit);
      case action::crash_after:
        doit();
        b_->crashed_op = static_cast<int>(o);
        _exit(crash_exit);
      case action::freeze: {
        b_->crashed_op = static_cast<int>(o);
        char c = 1;
        if (freeze_fd >= 0 && ::write(freeze_fd, &c, 1) < 0) _exit(crash_exit);
        for (;;) pause();
      }
    }
    return doit();
  }

  shared_block* b_;
  policy* p_;
  std::mutex mu_;
};

// Installs a wrapper for a scope.
struct installed {
  explicit installed(fs* f) { fatpack::detail::cache::set_fs_for_testing(f); }
  ~installed() { fatpack::detail::cache::set_fs_for_testing(nullptr); }
};

}  // namespace fault

#undef FAULT_FS_RA
