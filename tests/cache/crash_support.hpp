// Shared by the crash-enumeration and I/O-error tests: keys with distinct cubins (so that bytes
// served under the wrong key are detected), the JIT service's protocol against a disk_cache, forked
// children with a deadline, copies of prepared cache trees, and counting temp files.
#pragma once

#include "cache/config.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry.hpp"
#include "cache/key.hpp"

#include "../runtime/test_support.hpp"
#include "fault_fs.hpp"
#include "fatpack/fatpack.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <sys/wait.h>
#include <thread>

namespace crash_test {

using namespace fatpack::detail;
using namespace fatpack::detail::cache;
namespace stdfs = std::filesystem;

// FATPACK_FULL=1: the full-size runs (ctest -L full); otherwise the CI subset.
inline bool full_run() {
  const char* v = std::getenv("FATPACK_FULL");
  return v && std::string(v) == "1";
}

inline jit_key key_of(int i, int driver = 13000) {
  jit_key k;
  k.ptx_xxh3 = 0xC0FFEE00ull + static_cast<std::uint64_t>(i);
  k.ptx_size = 4000 + static_cast<std::uint64_t>(i);
  k.ptx_target = fatpack::core::target::parse("compute_80").value();
  k.ptx_isa = fatpack::core::ptx_isa{9, 0};
  k.target_arch = 90;
  k.options = "-O3";
  k.driver_version = driver;
  return k;
}

// The sm_90 cubin with one byte of its code changed per key: still a cubin the cache accepts (same
// ELF SM), but different bytes for every key, so a mix-up cannot pass as a hit.
inline const std::vector<std::uint8_t>& cubin_of(int i) {
  static std::map<int, std::vector<std::uint8_t>> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  auto it = cache.find(i);
  if (it != cache.end()) return it->second;
  auto base = fatpack_test::read_file(fatpack_test::artifact("vadd.sm_90.cubin"));
  const auto want = cubin_sm_word(fatpack::core::byte_span(base.data(), base.size()));
  REQUIRE(want.has_value());
  // The first offset past the middle where a change keeps the cubin readable with the same SM.
  for (std::size_t off = base.size() / 2; off < base.size(); ++off) {
    auto v = base;
    v[off] = static_cast<std::uint8_t>(v[off] ^ static_cast<std::uint8_t>(i + 1));
    auto sm = cubin_sm_word(fatpack::core::byte_span(v.data(), v.size()));
    if (sm && *sm == *want) return cache.emplace(i, std::move(v)).first->second;
  }
  FAIL("no byte of the cubin can be varied");
  return cache[-1];
}

// Where the thousands of cache trees of a run go: a tmpfs when there is one (each case writes a
// 3 MiB index or two; on a disk, writeback throttling makes the run wait on I/O, not on the cache).
inline const std::string& work_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/dev/shm/fatpack-crash-XXXXXX";
    if (::access("/dev/shm", W_OK) == 0)
      if (const char* d = mkdtemp(tmpl)) return std::string(d);
    return fatpack_test::temp_dir();
  }();
  // The tmpfs directory goes when the test process ends (each run made a new one, and /dev/shm kept
  // them). Only in the process that made it: forked children leave through _exit, but be sure.
  static const struct remover {
    pid_t owner = ::getpid();
    ~remover() {
      std::error_code ec;
      if (::getpid() == owner && dir.rfind("/dev/shm/fatpack-crash-", 0) == 0) std::filesystem::remove_all(dir, ec);
    }
  } remove_at_exit;
  return dir;
}

inline bool same(const fatpack::detail::sass_bytes& a, const std::vector<std::uint8_t>& b) { return a == b; }

// Exit codes of checking children.
inline constexpr int exit_ok = 0, exit_wrong = 71, exit_needs_repair = 72, exit_temp = 73, exit_prebuilt = 74,
                     exit_exception = 75;

// What the JIT service does for one key (jit/service.cpp): look up, take the cross-process lock,
// look up again, "compile" (the key's cubin), store, release. Returns false when a lookup served
// bytes that are not the key's.
inline bool jit_like(disk_cache& c, int i, int driver = 13000) {
  const jit_key k = key_of(i, driver);
  if (auto h = c.find(k, true)) {
    if (!same(h->sass, cubin_of(i))) return false;
    if (h->exact) return true;
  }
  auto guard = c.begin_compile(k);
  if (auto h = c.find(k, false)) return same(h->sass, cubin_of(i));
  const auto& bytes = cubin_of(i);
  c.store(k, fatpack::core::byte_span(bytes.data(), bytes.size()));
  return true;
}

inline config cfg_of(const std::string& cache, std::uint64_t max_bytes, const std::string& prebuilt = {}) {
  config c;
  c.path = cache;
  c.max_bytes = max_bytes;
  c.lock_wait_ms = 0;  // never wait for a frozen or killed holder: compile anyway (as after the bound)
  if (!prebuilt.empty()) c.prebuilt.push_back(prebuilt);
  return c;
}

// fork(); the child runs `body` and _exits with its result (never returns into doctest).
inline pid_t spawn(const std::function<int()>& body) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = exit_exception;
    try {
      rc = body();
    } catch (...) {
    }
    _exit(rc);
  }
  return pid;
}

// Waits for a child (at most `limit_s`: a hang is a failure, not a stuck test). Returns its exit
// code, 128+signal, or -1 when it had to be killed.
inline int reap(pid_t pid, int limit_s = 30) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  int st = 0;
  int sleep_us = 20;  // most children take a millisecond or two: poll fast, then back off
  while (true) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 5000);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

inline int run_child(const std::function<int()>& body, int limit_s = 30) { return reap(spawn(body), limit_s); }

inline void remove_tree(const std::string& d) {
  std::error_code ec;
  stdfs::remove_all(d, ec);
}

// A copy of a prepared tree (directories 0700, as the cache made them).
inline void copy_tree(const std::string& from, const std::string& to) {
  remove_tree(to);
  std::error_code ec;
  stdfs::create_directories(to, ec);
  REQUIRE(!ec);
  if (!stdfs::exists(from)) return;
  stdfs::copy(from, to, stdfs::copy_options::recursive, ec);
  REQUIRE_MESSAGE(!ec, from << " -> " << to << ": " << ec.message());
}

// Temp files anywhere in a cache tree: entries being written (.<name>.tmp) and index files being
// created (index.v1.tmp.<pid>.<n>).
inline int temp_files(const std::string& root) {
  int n = 0;
  std::error_code ec;
  if (!stdfs::exists(root)) return 0;
  for (auto it = stdfs::recursive_directory_iterator(root, ec); !ec && it != stdfs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp") != std::string::npos) ++n;
  }
  return n;
}

// Every file's bytes under a tree, keyed by relative path (a layer that must not change).
inline std::map<std::string, std::vector<std::uint8_t>> snapshot(const std::string& root) {
  std::map<std::string, std::vector<std::uint8_t>> m;
  std::error_code ec;
  for (auto it = stdfs::recursive_directory_iterator(root, ec); !ec && it != stdfs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file()) m[stdfs::relative(it->path(), root).string()] = fatpack_test::read_file(it->path().string());
  return m;
}

// Before any test and any child: the log stays quiet (thousands of children would each print their
// first warning; the I/O test counts warnings through a log callback) and the runtime's own cache
// is off (the tests open caches of their own).
inline const bool quiet_children = [] {
  fatpack::set_log_level(fatpack::log_level::off);
  setenv("FATPACK_CACHE_DISABLE", "1", 1);
  return true;
}();

}  // namespace crash_test
