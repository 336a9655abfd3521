// The JIT cache across real processes (fatpack_runtime_probe children, the fake driver): second
// start hits, many processes compile each key once, kill -9 of writers, other-driver entries,
// eviction bound, prebuilt layers, read-only use, permissions (as an unprivileged user), full disk.
#include "cache_support.hpp"

#include "fatpack/admin/cache_admin.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <sys/statvfs.h>
#include <random>
#include <thread>

using namespace cache_test;

namespace {

env_map cache_env(const std::string& cache, const std::string& jitlog, env_map extra = {}) {
  env_map e = fake_env({{"FATPACK_CACHE_PATH", cache}, {"FAKECUDA_JIT_LOG", jitlog}});
  for (auto& kv : extra) e[kv.first] = kv.second;
  return e;
}

// Waits at most `limit_s` for a child started with start(); a child still running then is killed
// (SIGKILL) and `timed_out` set, so a hang fails the test instead of stalling it.
child_result finish_within(const running& r, int limit_s, bool& timed_out) {
  timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  while (true) {
    siginfo_t info{};
    // WNOWAIT: leave the child to finish(), which reaps it and reads its output.
    if (::waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      ::kill(r.pid, SIGKILL);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return finish(r);
}

}  // namespace

TEST_CASE("second process hits the cache; entries are files named by key") {
  const std::string pkg = keys_package("basic", 3);
  const std::string dir = fresh_dir("basic"), log = dir + "/jit.log", cache = dir + "/cache";
  auto a = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log));
  CHECK(a.status == 0);
  CHECK(field(a.out, "load-all", "jit") == 3);
  CHECK(field(a.out, "cache", "stores") == 3);
  CHECK(a.has("cache mode=read-write path=" + cache));
  CHECK(count_lines(log) == 3);
  CHECK(files_under(cache, ".fpc").size() == 3);
  auto b = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log));
  CHECK(b.status == 0);
  CHECK(field(b.out, "load-all", "cache") == 3);
  CHECK(field(b.out, "load-all", "jit") == 0);
  CHECK(field(b.out, "cache", "hits_exact") == 3);
  CHECK(field(b.out, "cache", "misses") == 0);
  CHECK(count_lines(log) == 3);
  // The directory is private.
  struct stat st{};
  REQUIRE(::stat((cache + "/v1").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  // Disabled: no lookups, no files.
  const std::string off = dir + "/off";
  auto c = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"},
                 cache_env(off, log, {{"FATPACK_CACHE_DISABLE", "1"}}));
  CHECK(field(c.out, "load-all", "jit") == 3);
  CHECK(c.has("cache mode=disabled"));
  CHECK(files_under(off, ".fpc").empty());
}

TEST_CASE("a process that exits right after compiling still publishes its entries") {
  // Stores run on the pool; the process exits without waiting for them (no cache-wait): the exit
  // flush publishes them, so the next process hits all three.
  const std::string pkg = keys_package("exitflush", 3);
  const std::string dir = fresh_dir("exitflush"), log = dir + "/jit.log", cache = dir + "/cache";
  auto a = probe({"--package", pkg, "load-all"}, cache_env(cache, log));
  CHECK(a.status == 0);
  CHECK(field(a.out, "load-all", "jit") == 3);
  CHECK(files_under(cache, ".fpc").size() == 3);
  auto b = probe({"--package", pkg, "load-all", "cache-stats"}, cache_env(cache, log));
  CHECK(field(b.out, "load-all", "cache") == 3);
  CHECK(field(b.out, "cache", "hits_exact") == 3);
}

TEST_CASE("cache_status() before any load opens and creates nothing") {
  // Before: the getter built the disk cache, creating the directories and the index lock file.
  const std::string dir = fresh_dir("getter"), cache = dir + "/not-yet";
  auto a = probe({"cache-stats"}, cache_env(cache, dir + "/jit.log"));
  CHECK(a.status == 0);
  CHECK(a.has("cache mode=read-write path=" + cache));
  struct stat st{};
  CHECK(::stat(cache.c_str(), &st) != 0);
  auto off = probe({"cache-stats"}, cache_env(cache, dir + "/jit.log", {{"FATPACK_CACHE_DISABLE", "1"}}));
  CHECK(off.has("cache mode=disabled"));
  auto ro = probe({"cache-stats"}, cache_env(cache, dir + "/jit.log", {{"FATPACK_CACHE_READONLY", "1"}}));
  CHECK(ro.has("cache mode=read-only"));
  CHECK(::stat(cache.c_str(), &st) != 0);
}

TEST_CASE("a load whose SASS fits the device opens no cache directory; one that needs the JIT does") {
  // A load arms the default cache; the directory is opened (stat, statfs, mkdir, index lock) only
  // when the JIT first asks for it. Before: load_module opened it eagerly, creating the directory;
  // and then wait_cache_refresh() (cache-wait) opened the armed cache to flush it.
  const std::string dir = fresh_dir("armed"), cache = dir + "/not-yet", log = dir + "/jit.log";
  const std::string sass = package_file("armed_sass", entries_of("vadd", {"vadd.sm_90.cubin", "vadd.compute_80.ptx"}));
  struct stat st{};
  auto a = probe({"--package", sass, "load", "vadd", "cache-wait"}, cache_env(cache, log));
  CHECK(a.status == 0);
  CHECK(a.has("load vadd device=0 ok"));
  CHECK(a.has("target=sm_90 jit=0"));
  CHECK(::stat(cache.c_str(), &st) != 0);  // not created, not even its root
  // load_library arms it the same way.
  auto l = probe({"--package", sass, "load-library", "vadd", "cache-wait"}, cache_env(cache, log));
  CHECK(l.status == 0);
  CHECK(l.has("load-library vadd ok"));
  CHECK(l.has("target=sm_90 jit=0"));
  CHECK(::stat(cache.c_str(), &st) != 0);
  // fatpack::warm() (--warm) with nothing to compile: the same.
  auto w = probe({"--package", sass, "--warm", "load", "vadd", "cache-wait"}, cache_env(cache, log));
  CHECK(w.status == 0);
  CHECK(w.has("warm jobs=0 ok"));
  CHECK(::stat(cache.c_str(), &st) != 0);
  // The same module as PTX only: the JIT needs the cache, which is opened then and keeps the entry.
  const std::string ptx = package_file("armed_ptx", entries_of("vadd", {"vadd.compute_80.ptx"}));
  auto b = probe({"--package", ptx, "load", "vadd", "cache-wait"}, cache_env(cache, log));
  CHECK(b.status == 0);
  CHECK(b.has("jit=1"));
  CHECK(::stat((cache + "/v1").c_str(), &st) == 0);
  CHECK(files_under(cache, ".fpc").size() == 1);
}

TEST_CASE("N processes x 200 keys started together: 0 wrong reads, exactly 200 JITs a round") {
  // CI: 16 processes, one round. FATPACK_FULL=1: 32 processes, 5 rounds (each round a fresh cache).
  const bool full = fatpack_test::full_run();
  const int n = full ? 32 : 16, m = 200, rounds = full ? 5 : 1;
  const std::string pkg = keys_package("stress", m);
  for (int round = 0; round < rounds; ++round) {
    const std::string dir = fresh_dir("stress" + std::to_string(round)), log = dir + "/jit.log", cache = dir + "/cache";
    std::vector<running> kids;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i)
      // Four groups start at the same key (they contend for every key), the groups a quarter of the
      // keys apart.
      kids.push_back(start({PROBE_PATH, "--package", pkg, "--rotate", std::to_string((i % 4) * m / 4), "load-all", "cache-wait", "cache-stats"},
                           cache_env(cache, log, {{"FAKECUDA_JIT_DELAY_MS", "3"}})));
    long wrong = 0, failed = 0, jits = 0, hits = 0, waited = 0;
    for (auto& k : kids) {
      auto r = finish(k);
      INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
      CHECK(r.status == 0);
      wrong += field(r.out, "load-all", "wrong");
      failed += field(r.out, "load-all", "failed");
      jits += field(r.out, "load-all", "jit");
      hits += field(r.out, "load-all", "cache");
      waited += field(r.out, "cache", "waited");
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(n << " x " << m << ", round " << round + 1 << "/" << rounds << ": " << s << " s, " << jits << " JITs, "
              << hits << " cache hits, " << wrong << " wrong, " << waited << " waits for another process");
    CHECK(wrong == 0);
    CHECK(failed == 0);
    CHECK(count_lines(log) == m);  // one JIT per key, machine-wide
    CHECK(jits == m);
    CHECK(hits == long(n) * m - m);
    CHECK(files_under(cache, ".fpc").size() == static_cast<std::size_t>(m));
    CHECK(files_under(cache, ".tmp").empty());
    CHECK(waited > 0);  // the single flight was exercised: processes found others compiling their key
  }
}

TEST_CASE("kill -9 of concurrent writers at random points: every read right or a miss, the cache keeps working") {
#if defined(__SANITIZE_THREAD__)
  // What this checks is the files a killed writer leaves (crash consistency), not threads: a killed
  // process reports nothing, and 200 kills of TSan-built probes (slow to start) take a minute of the
  // TSan job. It runs in the normal and the ASan builds.
  MESSAGE("SKIPPED under TSan: kill -9 of writers checks files, not threads; this case runs in the normal and ASan builds");
  return;
#endif
  const int m = 30, per_wave = 8, max_waves = 100;
  const std::string pkg = keys_package("kill", m);
  const std::string dir = fresh_dir("kill"), log = dir + "/jit.log", cache = dir + "/cache";
  std::mt19937 rng(12345);
  int kills = 0, survivors = 0, waves = 0;
  // Kill times are uniform in [0, window); the window adapts so that most writers die mid-run
  // whatever the machine's speed (a writer that finishes first is checked instead).
  int window_us = 20000;
  auto t0 = std::chrono::steady_clock::now();
  for (int w = 0; w < max_waves && kills < 200; ++w, ++waves) {
    // A new driver version per wave: every key is a new exact key, so each wave writes (and, with
    // a small bound, evicts and rebuilds) while it is being killed. 64K holds one version's 30
    // stored entries (~1.7 KB each), not two.
    env_map env = cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", std::to_string(13000 + 10 * (w % 10))},
                                         {"FATPACK_CACHE_OTHER_DRIVER", "0"},
                                         {"FATPACK_CACHE_MAXSIZE", "64K"},
                                         {"FAKECUDA_JIT_DELAY_MS", "1"}});
    std::vector<running> kids;
    std::vector<std::chrono::steady_clock::time_point> when;
    const auto spawned = std::chrono::steady_clock::now();
    for (int i = 0; i < per_wave; ++i) {
      kids.push_back(start({PROBE_PATH, "--package", pkg, "--rotate", std::to_string(i * 4), "load-all"}, env));
      when.push_back(spawned + std::chrono::microseconds(std::uniform_int_distribution<int>(0, window_us)(rng)));
    }
    for (std::size_t i = 0; i < kids.size(); ++i) {
      std::this_thread::sleep_until(when[i]);
      ::kill(kids[i].pid, SIGKILL);
    }
    int wave_kills = 0;
    for (auto& k : kids) {
      auto r = finish(k);
      if (r.status == 128 + SIGKILL) {
        ++kills;
        ++wave_kills;
      } else {
        // Finished before the kill: then it must have been right.
        ++survivors;
        INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
        CHECK(r.status == 0);
        CHECK(field(r.out, "load-all", "wrong") == 0);
      }
    }
    if (wave_kills < per_wave / 2) window_us = std::max(1000, window_us * 2 / 3);
    else if (wave_kills == per_wave) window_us = std::min(200000, window_us * 3 / 2);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("kill -9 loop: " << kills << " kills (" << survivors << " writers finished first) in " << waves << " waves, " << s << " s");
  CHECK(kills >= 200);
  // No entry file is damaged: a killed writer leaves at most a temp file (and index accounting
  // that misses its entry, which is advisory).
  {
    auto a = fatpack::detail::cache::admin::open(cache, true);
    REQUIRE(a.has_value());
    auto problems = (*a)->verify(false);
    std::size_t strays = 0;
    for (const auto& p : problems) {
      const bool temp = p.problem.find("stray temporary file") != std::string::npos;
      const bool index = p.file.size() > 9 && p.file.compare(p.file.size() - 9, 9, "/index.v1") == 0;
      strays += temp;
      CHECK_MESSAGE((temp || index), p.file << ": " << p.problem);
    }
    MESSAGE("after the kills: " << (*a)->stats().entries << " entries, " << strays << " stray temp files");
    auto rw = fatpack::detail::cache::admin::open(cache, false);
    REQUIRE(rw.has_value());
    (*rw)->verify(true);
    CHECK((*rw)->verify(false).empty());
  }
  // Afterwards, without any repair: every driver version's run is right (hits or fresh JITs).
  for (int v = 0; v < 10; ++v) {
    auto r = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"},
                   cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", std::to_string(13000 + 10 * v)},
                                          {"FATPACK_CACHE_OTHER_DRIVER", "0"}, {"FATPACK_CACHE_MAXSIZE", "64K"}}));
    CHECK(r.status == 0);
    CHECK(field(r.out, "load-all", "wrong") == 0);
    CHECK(field(r.out, "load-all", "ok") == m);
  }
  // A second pass of the last version hits.
  auto again = probe({"--package", pkg, "load-all"},
                     cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13090"}, {"FATPACK_CACHE_OTHER_DRIVER", "0"},
                                            {"FATPACK_CACHE_MAXSIZE", "1G"}}));
  CHECK(field(again.out, "load-all", "cache") == m);
}

TEST_CASE("SASS from the cache that the driver refuses is compiled again, never a failed load") {
  // Entries built by driver 13000; driver 13010 refuses SASS another driver made (a real driver may
  // refuse a prebuilt layer from a newer one, or after a rollback). Before: the load failed with
  // load_failed, and with a read-only cache every start failed.
  const std::string pkg = keys_package("refused", 2);
  const std::string dir = fresh_dir("refused"), log = dir + "/jit.log", cache = dir + "/cache";
  auto old = probe({"--package", pkg, "load-all"}, cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13000"}}));
  REQUIRE(field(old.out, "load-all", "jit") == 2);
  const env_map refusing = {{"FAKECUDA_DRIVER_VERSION", "13010"}, {"FAKECUDA_FAIL_LOAD", "jit-other-driver"}};
  auto ro = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"},
                  cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}, {"FAKECUDA_FAIL_LOAD", "jit-other-driver"},
                                         {"FATPACK_CACHE_READONLY", "1"}}));
  INFO(ro.out << ro.err);
  CHECK(ro.status == 0);
  CHECK(field(ro.out, "load-all", "ok") == 2);
  CHECK(field(ro.out, "cache", "jits") == 2);
  auto rw = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log, refusing));
  INFO(rw.out << rw.err);
  CHECK(rw.status == 0);
  CHECK(field(rw.out, "load-all", "ok") == 2);
  // The next process with that driver gets its own entries: exact hits the driver accepts.
  auto next = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log, refusing));
  CHECK(next.status == 0);
  CHECK(field(next.out, "load-all", "ok") == 2);
  CHECK(field(next.out, "cache", "hits_exact") == 2);
  CHECK(field(next.out, "cache", "jits") == 0);
}

TEST_CASE("a fork() child never waits for the parent's background re-JIT or stores") {
  // The parent gets other-driver hits and queues slow re-JITs (3 s each), then forks. Before: the
  // child's wait_cache_refresh() waited for counts only the parent's threads bring down: for ever.
  const std::string pkg = keys_package("forkwait", 2);
  const std::string dir = fresh_dir("forkwait"), log = dir + "/jit.log", cache = dir + "/cache";
  auto old = probe({"--package", pkg, "load-all"}, cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13000"}}));
  REQUIRE(field(old.out, "load-all", "jit") == 2);
  auto r = probe({"--package", pkg, "load-all", "fork", "forkwait_m0"},
                 cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}, {"FAKECUDA_JIT_DELAY_MS", "3000"}}));
  INFO(r.out << r.err);
  CHECK(field(r.out, "load-all", "cache") == 2);
  CHECK(r.has("fork status=0 init=cuda load=cuda warm=cuda done=1 refresh=returned"));
  CHECK(r.status == 0);
}

TEST_CASE("an entry built by another driver is used at once and re-JIT-ed in the background") {
  const std::string pkg = keys_package("stale", 3);
  const std::string dir = fresh_dir("stale"), log = dir + "/jit.log", cache = dir + "/cache";
  auto old = probe({"--package", pkg, "load-all"}, cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13000"}}));
  CHECK(field(old.out, "load-all", "jit") == 3);
  // A driver update: the old SASS is used (no JIT on the load path), refreshed in the background.
  auto upd = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"},
                   cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}}));
  CHECK(upd.status == 0);
  CHECK(field(upd.out, "load-all", "cache") == 3);
  CHECK(field(upd.out, "load-all", "jit") == 0);
  CHECK(field(upd.out, "cache", "hits_other") == 3);
  CHECK(field(upd.out, "cache", "refreshes") == 3);
  CHECK(count_lines(log) == 6);
  CHECK(files_under(cache, ".fpc").size() == 6);
  auto next = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}}));
  CHECK(field(next.out, "cache", "hits_exact") == 3);
  CHECK(field(next.out, "cache", "hits_other") == 0);
  CHECK(count_lines(log) == 6);
  // The driver build string is part of the identity (same cuDriverGetVersion, new kernel module).
  const std::string ver = dir + "/version";
  write_file(ver, std::vector<std::uint8_t>{});
  {
    std::string text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Oct 10 2026\n";
    write_file(ver, std::vector<std::uint8_t>(text.begin(), text.end()));
  }
  auto build = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"},
                     cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}, {"FATPACK_DRIVER_VERSION_FILE", ver},
                                            {"FATPACK_CACHE_OTHER_DRIVER", "0"}}));
  CHECK(field(build.out, "cache", "hits_exact") == 0);
  CHECK(field(build.out, "load-all", "jit") == 3);
  CHECK(count_lines(log) == 9);
}

TEST_CASE("exit during background re-JITs: the running ones finish before the process tears down") {
  // Found by the CI's TSan job: the probe returned from main while a re-JIT slept in the fake
  // driver's cuLinkAddData, and exit() destroyed the driver's statics under that pool thread. The
  // exit flush now waits for re-JITs already running (within its 10 s; ones not started yet are
  // dropped), so they also publish: the next process gets exact hits.
  const std::string pkg = keys_package("exitrefresh", 2);
  const std::string dir = fresh_dir("exitrefresh"), log = dir + "/jit.log", cache = dir + "/cache";
  auto old = probe({"--package", pkg, "load-all"}, cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13000"}}));
  REQUIRE(field(old.out, "load-all", "jit") == 2);
  // Two pool threads, each re-JIT 2.5 s; the process exits 1.5 s after queueing them (no cache-wait).
  auto upd = probe({"--threads", "2", "--package", pkg, "load-all", "sleep", "1500"},
                   cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}, {"FAKECUDA_JIT_DELAY_MS", "2500"}}));
  INFO(upd.out << upd.err);
  CHECK(upd.status == 0);
  CHECK(field(upd.out, "load-all", "cache") == 2);
  auto next = probe({"--package", pkg, "load-all", "cache-stats"}, cache_env(cache, log, {{"FAKECUDA_DRIVER_VERSION", "13010"}}));
  CHECK(field(next.out, "cache", "hits_exact") == 2);
  CHECK(field(next.out, "cache", "hits_other") == 0);
}

TEST_CASE("size bound: LRU eviction keeps the directory under FATPACK_CACHE_MAXSIZE") {
  const int m = 60;
  const std::string pkg = keys_package("evict", m);
  const std::string dir = fresh_dir("evict"), log = dir + "/jit.log", cache = dir + "/cache";
  const std::uint64_t bound = 16 * 1024;
  auto r = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log, {{"FATPACK_CACHE_MAXSIZE", "16K"}}));
  CHECK(r.status == 0);
  auto files = files_under(cache, ".fpc");
  std::uint64_t bytes = bytes_of(files);
  const std::uint64_t one = files.empty() ? 0 : bytes / files.size();
  MESSAGE("eviction: " << files.size() << " entries, " << bytes << " bytes kept of " << m << " stored (bound " << bound << ")");
  CHECK(field(r.out, "cache", "evictions") > 0);
  CHECK(bytes <= bound + one);
  CHECK(files.size() < static_cast<std::size_t>(m));
  // The most recently stored keys survived: loading the last ones again hits.
  auto again = probe({"--package", pkg, "--rotate", std::to_string(m - 5), "load-all"}, cache_env(cache, log, {{"FATPACK_CACHE_MAXSIZE", "16K"}}));
  CHECK(again.status == 0);
}

TEST_CASE("prebuilt read-only layers are searched first and never written") {
  const std::string pkg = keys_package("layers", 4);
  const std::string dir = fresh_dir("layers"), log = dir + "/jit.log";
  const std::string pre = dir + "/pre", user = dir + "/user", user2 = dir + "/user2";
  auto build = probe({"--package", pkg, "load-all"}, cache_env(pre, log));
  CHECK(field(build.out, "load-all", "jit") == 4);
  REQUIRE(std::system(("chmod -R a-w '" + pre + "'").c_str()) == 0);  // as shipped: read-only
  auto use = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(user, log, {{"FATPACK_CACHE_PREBUILT_PATH", "/nonexistent:" + pre}}));
  CHECK(use.status == 0);
  CHECK(field(use.out, "load-all", "cache") == 4);
  CHECK(field(use.out, "cache", "prebuilt") == 1);
  CHECK(count_lines(log) == 4);
  CHECK(files_under(user, ".fpc").empty());
  // Through the API.
  auto api = probe({"--prebuilt", pre, "--package", pkg, "load-all"}, cache_env(user2, log));
  CHECK(field(api.out, "load-all", "cache") == 4);
  // A prebuilt layer writable by others is refused (with a reason).
  const std::string bad = dir + "/bad";
  REQUIRE(std::system(("cp -r '" + pre + "' '" + bad + "' && chmod -R u+w '" + bad + "' && chmod 777 '" + bad + "'").c_str()) == 0);
  auto refused = probe({"--prebuilt", bad, "--package", pkg, "load-all"}, cache_env(dir + "/user3", log));
  CHECK(refused.has("prebuilt error=invalid_argument"));
  CHECK(refused.has("writable by group or others"));
  CHECK(field(refused.out, "load-all", "ok") == 4);
  REQUIRE(std::system(("chmod -R u+w '" + pre + "'").c_str()) == 0);
}

TEST_CASE("FATPACK_CACHE_READONLY: hits served, nothing written") {
  const std::string pkg = keys_package("ro", 3);
  const std::string dir = fresh_dir("ro"), log = dir + "/jit.log", cache = dir + "/cache";
  probe({"--package", pkg, "--rotate", "1", "load-all"}, cache_env(cache, log));
  REQUIRE(files_under(cache, ".fpc").size() == 3);
  const std::string pkg2 = keys_package("ro2", 2);
  auto r = probe({"--package", pkg, "--package", pkg2, "load-all", "cache-wait", "cache-stats"},
                 cache_env(cache, log, {{"FATPACK_CACHE_READONLY", "1"}}));
  CHECK(r.status == 0);
  CHECK(r.has("cache mode=read-only"));
  CHECK(field(r.out, "cache", "hits_exact") == 3);
  CHECK(field(r.out, "load-all", "jit") == 2);
  CHECK(files_under(cache, ".fpc").size() == 3);
}

TEST_CASE("security: world-writable or foreign-owned cache directories are refused, loads still work") {
  const std::string pkg = keys_package("sec", 2);
  const std::string dir = fresh_dir("sec"), log = dir + "/jit.log";
  const std::string open_dir = dir + "/open";
  REQUIRE(std::system(("mkdir -p '" + open_dir + "' && chmod 777 '" + open_dir + "'").c_str()) == 0);
  auto r = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(open_dir, log, {{"FATPACK_LOG", "warn"}}));
  CHECK(r.status == 0);
  CHECK(r.has("cache mode=memory-only"));
  CHECK(r.err_has("writable by group or others"));
  CHECK(files_under(open_dir, ".fpc").empty());
  if (geteuid() == 0) {
    const std::string foreign = dir + "/foreign";
    REQUIRE(std::system(("mkdir -p '" + foreign + "' && chown 65534:65534 '" + foreign + "' && chmod 700 '" + foreign + "'").c_str()) == 0);
    auto f = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(foreign, log, {{"FATPACK_LOG", "warn"}}));
    CHECK(f.status == 0);
    CHECK(f.has("cache mode=memory-only"));
    CHECK(f.err_has("owned by uid 65534"));
  } else {
    MESSAGE("foreign-owned case needs root to chown (the seam covers it in cache_unit)");
  }
}

TEST_CASE("permissions as an unprivileged user: unwritable and read-only directories degrade to read-only") {
  if (geteuid() != 0) {
    MESSAGE("SKIPPED: not root, cannot drop to an unprivileged uid (the seam covers EACCES/EROFS in cache_unit)");
    return;
  }
  const int nobody = 65534;
  const std::string pkg = keys_package("perm", 2);
  // Everything the child needs must be reachable by it.
  const std::string dir = "/tmp/fatpack-cache-perm-" + std::to_string(getpid());
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "' && chmod 755 '" + dir + "' && cp '" + pkg + "' '" + dir +
                       "/p.fpk' && chmod 644 '" + dir + "/p.fpk' && touch '" + dir + "/jit.log' && chmod 666 '" + dir + "/jit.log'")
                          .c_str()) == 0);
  const std::string log = dir + "/jit.log", cache = dir + "/cache";
  REQUIRE(std::system(("mkdir -p '" + cache + "' && chown 65534:65534 '" + cache + "' && chmod 700 '" + cache + "'").c_str()) == 0);
  auto fill = run_as(nobody, {"--package", dir + "/p.fpk", "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log));
  if (fill.status == 126 || fill.status == 127) {
    MESSAGE("SKIPPED: cannot run the probe as uid 65534 (status " << fill.status << ")");
    return;
  }
  CHECK(fill.status == 0);
  CHECK(fill.has("cache mode=read-write"));
  CHECK(field(fill.out, "load-all", "jit") == 2);
  // Unwritable now (the owner took away its own write permission): hits still served, nothing written,
  // one warning.
  REQUIRE(std::system(("chmod -R u-w '" + cache + "/v1'").c_str()) == 0);
  const std::string pkg2 = keys_package("perm2", 1);
  REQUIRE(std::system(("cp '" + pkg2 + "' '" + dir + "/p2.fpk' && chmod 644 '" + dir + "/p2.fpk'").c_str()) == 0);
  auto ro = run_as(nobody, {"--package", dir + "/p.fpk", "--package", dir + "/p2.fpk", "load-all", "cache-wait", "cache-stats"},
                   cache_env(cache, log, {{"FATPACK_LOG", "warn"}}));
  CHECK(ro.status == 0);
  CHECK(ro.has("cache mode=read-only"));
  CHECK(ro.err_has("not writable"));
  CHECK(field(ro.out, "cache", "hits_exact") == 2);
  CHECK(field(ro.out, "load-all", "jit") == 1);
  // A cache directory that cannot even be created: memory-only.
  REQUIRE(std::system(("chmod 555 '" + dir + "'").c_str()) == 0);
  auto none = run_as(nobody, {"--package", dir + "/p.fpk", "load-all", "cache-wait", "cache-stats"},
                     cache_env(dir + "/nope/cache", log, {{"FATPACK_LOG", "warn"}}));
  CHECK(none.status == 0);
  CHECK(none.has("cache mode=memory-only"));
  CHECK(none.err_has("cannot create the cache directory"));
  std::system(("chmod -R u+w '" + dir + "' ; rm -rf '" + dir + "'").c_str());
}

TEST_CASE("setuid: a setuid program run by another user uses no disk cache and no path from the environment") {
  if (geteuid() != 0) {
    MESSAGE("SKIPPED: needs root to make a setuid copy of the probe (the seam covers it in cache_unit)");
    return;
  }
  const std::string pkg = keys_package("suid", 1);
  const std::string dir = "/tmp/fatpack-cache-suid-" + std::to_string(getpid());
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "' && chmod 755 '" + dir + "' && cp '" + PROBE_PATH + "' '" +
                       dir + "/probe' && chmod 4755 '" + dir + "/probe' && cp '" + pkg + "' '" + dir + "/p.fpk' && chmod 644 '" +
                       dir + "/p.fpk'").c_str()) == 0);
  struct statvfs vfs{};
  const bool nosuid = ::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_NOSUID) != 0;
  // FATPACK_LIBCUDA names the fake driver and FATPACK_CACHE_PATH a directory: a setuid process must
  // use neither (secure_getenv semantics), or the invoking user picks the library it loads with the
  // program's privileges. Before: it loaded the fake (devices count=2, "FakeCUDA GPU").
  auto r = finish(start({dir + "/probe", "devices", "--package", dir + "/p.fpk", "cache-stats"},
                        fake_env({{"FATPACK_CACHE_PATH", dir + "/cache"}, {"FATPACK_LOG", "warn"}}), 65534));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  if (r.status == 126 || r.status == 127) {
    MESSAGE("SKIPPED: cannot run as uid 65534");
  } else if (nosuid) {
    MESSAGE("SKIPPED: " << dir << " is on a file system mounted nosuid");
  } else {
    CHECK_FALSE(r.has("FakeCUDA"));
    CHECK_FALSE(r.has(FAKECUDA_PATH));
    // Without a driver on the machine: the default library name, not the one from the environment.
    if (r.has("devices error=")) CHECK(r.has("libcuda.so.1"));
    CHECK(r.has("cache mode=memory-only"));
    CHECK_FALSE(r.has(dir + "/cache"));
    struct stat st{};
    CHECK(::stat((dir + "/cache").c_str(), &st) != 0);
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("full disk (a 64 KiB tmpfs): loads succeed, one warning, the cache turns read-only") {
  const int m = 80;
  const std::string pkg = keys_package("full", m);
  const std::string dir = fresh_dir("full"), log = dir + "/jit.log", mnt = dir + "/mnt";
  REQUIRE(std::system(("mkdir -p '" + mnt + "'").c_str()) == 0);
  if (::access("/usr/bin/unshare", X_OK) != 0) {
    MESSAGE("SKIPPED: no /usr/bin/unshare (util-linux); the seam covers ENOSPC/EDQUOT in cache_unit");
    return;
  }
  std::string inner = std::string(PROBE_PATH) + " --package '" + pkg + "' load-all cache-wait cache-stats";  // stores are queued: wait for them
  auto r = run_child({"/usr/bin/unshare", "-m", "/bin/sh", "-c",
                      "mount -t tmpfs -o size=64k tmpfs '" + mnt + "' || exit 77; exec " + inner},
                     cache_env(mnt + "/cache", log, {{"FATPACK_LOG", "warn"}}));
  if (r.status == 77 || r.err_has("unshare failed") || r.err_has("Operation not permitted")) {
    MESSAGE("SKIPPED: unshare -m / mount tmpfs not permitted here (the seam covers ENOSPC/EDQUOT in cache_unit): " << r.err);
    return;
  }
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  CHECK(field(r.out, "load-all", "ok") == m);
  CHECK(field(r.out, "load-all", "wrong") == 0);
  CHECK(r.has("cache mode=read-only"));
  CHECK(r.err_has("the disk is full"));
  std::size_t warnings = 0;
  for (std::size_t p = r.err.find("disk is full"); p != std::string::npos; p = r.err.find("disk is full", p + 1)) ++warnings;
  CHECK(warnings == 1);
  CHECK(field(r.out, "cache", "stores") > 0);
  CHECK(field(r.out, "cache", "stores") < m);
}

// GPU (ctest cache_gpu, label gpu; exits 77 without a GPU): the real driver's cuLink output through
// the cache. A package without SASS for the GPU: the first process JITs, the second one hits.
TEST_CASE("gpu: first process JITs the PTX, the second process loads it from the cache") {
  auto dev = probe({"devices"}, {{"CUDA_CACHE_DISABLE", "1"}, {"FATPACK_CACHE_DISABLE", "1"}});
  if (dev.status != 0) {
    std::printf("SKIPPED: no CUDA driver/GPU: %s\n", dev.out.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
  const std::string pkg = keys_package("gpu", 4);
  const std::string dir = fresh_dir("gpu"), cache = dir + "/cache";
  env_map env{{"FATPACK_CACHE_PATH", cache}, {"CUDA_CACHE_DISABLE", "1"}};
  auto first = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, env);
  CHECK(first.status == 0);
  CHECK(field(first.out, "load-all", "jit") == 4);
  CHECK(field(first.out, "cache", "stores") == 4);
  auto second = probe({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, env);
  CHECK(second.status == 0);
  CHECK(field(second.out, "load-all", "cache") == 4);
  CHECK(field(second.out, "cache", "hits_exact") == 4);
  CHECK(field(second.out, "cache", "jits") == 0);
  MESSAGE("GPU: " << first.out << second.out);
}

TEST_CASE("a FIFO planted at an entry path (user cache or prebuilt layer) never hangs a start") {
  // Before: the entry was opened (O_RDONLY, blocking) before its type was checked, and opening a
  // FIFO waits for a writer: every start that looked up that key hung.
  const std::string pkg = keys_package("fifo", 2);
  const std::string dir = fresh_dir("fifo"), log = dir + "/jit.log", cache = dir + "/cache", pre = dir + "/pre";
  REQUIRE(probe({"--package", pkg, "load-all"}, cache_env(cache, log)).status == 0);
  REQUIRE(std::system(("cp -a '" + cache + "' '" + pre + "'").c_str()) == 0);
  for (const std::string& root : {cache, pre}) {
    auto entries = files_under(root, ".fpc");
    REQUIRE(entries.size() == 2);
    for (const auto& e : entries) {
      REQUIRE(::unlink(e.c_str()) == 0);
      REQUIRE(::mkfifo(e.c_str(), 0600) == 0);
    }
  }
  bool hung = false;
  auto r = finish_within(start({PROBE_PATH, "--package", pkg, "load-all", "cache-wait", "cache-stats"},
                               cache_env(cache, log, {{"FATPACK_CACHE_PREBUILT_PATH", pre}})),
                         30, hung);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK_FALSE(hung);
  CHECK(r.status == 0);
  CHECK(field(r.out, "load-all", "ok") == 2);
  CHECK(field(r.out, "load-all", "jit") == 2);  // refused, compiled again
  CHECK(files_under(cache, ".fpc").size() == 2);  // the user cache's FIFOs were replaced by entries
  // The admin API (fatpack cache verify / list / stats), in a child so that a hang cannot stall us.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto a = fatpack::detail::cache::admin::open(pre, true);
    if (!a) ::_exit(2);
    (void)(*a)->stats();
    (void)(*a)->list();
    int fifos = 0;
    for (const auto& p : (*a)->verify(false)) fifos += p.problem.find("not a regular file") != std::string::npos;
    ::_exit(fifos == 2 ? 0 : 3);  // both FIFOs reported
  }
  running kid;
  kid.pid = pid;
  kid.out = kid.err = "/dev/null";
  auto v = finish_within(kid, 30, hung);
  CHECK_FALSE(hung);
  CHECK(v.status == 0);
}

// Key-lock holder records (docs/cache.md §4): v1/inflight.holders, 64-byte slots starting "FPKH",
// u32 pid at +12, the host name's first 16 bytes at +40.
namespace {

// The pid (in the holder's PID namespace) and host of every record in the table.
std::vector<std::pair<long, std::string>> holder_records(const std::string& cache) {
  const std::string t = read_text(cache + "/v1/inflight.holders");
  std::vector<std::pair<long, std::string>> v;
  for (std::size_t at = 0; at + 64 <= t.size(); at += 64) {
    if (t.compare(at, 4, "FPKH") != 0) continue;
    long pid = 0;
    for (int i = 3; i >= 0; --i) pid = pid * 256 + static_cast<unsigned char>(t[at + 12 + i]);
    v.emplace_back(pid, std::string(t.c_str() + at + 40, strnlen(t.c_str() + at + 40, 16)));
  }
  return v;
}

bool has_record(const std::string& cache, long pid, const std::string& host = {}) {
  for (const auto& r : holder_records(cache))
    if ((pid < 0 || r.first == pid) && (host.empty() || r.second == host)) return true;
  return false;
}

bool eventually(const std::function<bool()>& cond, int limit_ms) {
  for (int waited = 0; waited < limit_ms; waited += 10) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// The state letter of /proc/<pid>/stat (0 if unreadable).
char proc_state(long pid) {
  const std::string s = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = s.rfind(')');
  return paren == std::string::npos || paren + 2 >= s.size() ? 0 : s[paren + 2];
}

// SIGSTOP, and wait until the kernel shows it stopped (kill() returns before that).
bool stop_process(long pid) { return ::kill(static_cast<pid_t>(pid), SIGSTOP) == 0 && eventually([&] { return proc_state(pid) == 'T'; }, 5000); }

// A holder compiling the one key of `pkg` for a long time (the fake JIT sleeps 120 s).
running start_holder(const std::string& pkg, const std::string& cache, const std::string& log, int jit_ms = 120000) {
  return start({PROBE_PATH, "--package", pkg, "load-all"}, cache_env(cache, log, {{"FAKECUDA_JIT_DELAY_MS", std::to_string(jit_ms)}}));
}

void end_holder(const running& h) {
  ::kill(h.pid, SIGKILL);  // also when stopped
  finish(h);
}

// Some process holds a byte lock of inflight.lock (F_OFD_GETLK over the whole file): what any
// version of the cache does while it compiles, record or not.
bool key_lock_held(const std::string& cache) {
  const int fd = ::open((cache + "/v1/inflight.lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock l{};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  const bool held = ::fcntl(fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

// Waits until the holder holds its key lock and, for a moment, for its record (written right after
// the lock; a cache without records goes on after 2 s); then stops it (SIGSTOP) when `stop`.
void settle_holder(const running& h, const std::string& cache, long record_pid, const std::string& record_host, bool stop,
                   long stop_pid) {
  const bool locked = eventually([&] { return key_lock_held(cache); }, 30000);
  if (locked) eventually([&] { return has_record(cache, record_pid, record_host); }, 2000);
  if (!locked || (stop && !stop_process(stop_pid))) {
    end_holder(h);
    FAIL("the holder never took its key lock, or could not be stopped");
  }
}

// A holder compiling, stopped (SIGSTOP) when `stop`.
running settled_holder(const std::string& pkg, const std::string& cache, const std::string& log, bool stop, int jit_ms = 120000) {
  running h = start_holder(pkg, cache, log, jit_ms);
  settle_holder(h, cache, h.pid, {}, stop, h.pid);
  return h;
}

struct timed_result {
  child_result r;
  double s = 0;
  bool hung = false;
};

timed_result run_waiter(const std::string& pkg, const std::string& cache, const std::string& log, env_map extra, int limit_s) {
  timed_result t;
  const auto t0 = std::chrono::steady_clock::now();
  t.r = finish_within(start({PROBE_PATH, "--package", pkg, "load-all", "cache-wait", "cache-stats"}, cache_env(cache, log, std::move(extra))),
                      limit_s, t.hung);
  t.s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

}  // namespace

TEST_CASE("a stopped process holding a key lock does not stall the next start for the whole lock wait") {
  // Before: OFD locks name no owner, so a waiter could not tell a SIGSTOPped holder from a slow one
  // and waited the full FATPACK_CACHE_LOCK_WAIT_MS (here 60 s, by default 120 s). Now the holder's
  // record (pid, host, start time) says it is stopped: the waiter compiles after about a second.
  const std::string pkg = keys_package("stopped", 1);
  const std::string dir = fresh_dir("stopped"), log = dir + "/jit.log", cache = dir + "/cache";
  running holder = settled_holder(pkg, cache, log, true);
  auto w = run_waiter(pkg, cache, log, {{"FATPACK_CACHE_LOCK_WAIT_MS", "60000"}}, 45);
  end_holder(holder);
  INFO("stdout:\n" << w.r.out << "\nstderr:\n" << w.r.err);
  MESSAGE("waiter behind a stopped holder: " << w.s << " s (lock wait 60 s)");
  CHECK_FALSE(w.hung);  // well under the 60 s bound
  CHECK(w.r.status == 0);
  CHECK(field(w.r.out, "load-all", "ok") == 1);
  CHECK(field(w.r.out, "load-all", "jit") == 1);
  CHECK(w.r.err_has("pid " + std::to_string(holder.pid) + " on "));  // the warning names the holder
  CHECK(w.r.err_has(" is stopped; compiling it here"));
  CHECK(field(w.r.out, "cache", "stores") == 1);
}

TEST_CASE("a holder on another host whose heartbeat stops is waited for only FATPACK_CACHE_HOLDER_STALL_S") {
  // Another host, for real: the holder runs in its own UTS and PID namespaces (host name
  // fp-other-host, pid 1 there), so the waiter cannot ask /proc about it; only the heartbeat tells.
  // Before: the waiter waited the full lock wait (60 s here).
  if (::access("/usr/bin/unshare", X_OK) != 0) {
    MESSAGE("SKIPPED: no /usr/bin/unshare (util-linux)");
    return;
  }
  const std::string pkg = keys_package("otherhost", 1);
  const std::string dir = fresh_dir("otherhost"), log = dir + "/jit.log", cache = dir + "/cache";
  const std::string inner = "echo fp-other-host > /proc/sys/kernel/hostname || exit 77; exec " + std::string(PROBE_PATH) +
                            " --package '" + pkg + "' load-all";
  running ns = start({"/usr/bin/unshare", "-u", "-p", "-f", "--mount-proc", "/bin/sh", "-c", inner},
                     cache_env(cache, log, {{"FAKECUDA_JIT_DELAY_MS", "120000"}}));
  const bool locked = eventually([&] {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(ns.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) return true;
    return key_lock_held(cache);
  }, 30000) && key_lock_held(cache);
  if (!locked) {
    ::kill(ns.pid, SIGKILL);
    auto r = finish(ns);
    MESSAGE("SKIPPED: unshare -u -p --mount-proc not permitted here: " << r.err);
    return;
  }
  // The probe, in this namespace: the child of unshare.
  long holder = -1;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string s = read_text("/proc/" + name + "/stat");
    const auto paren = s.rfind(')');
    if (paren != std::string::npos && std::atol(s.c_str() + s.find(' ', paren + 2) + 1) == ns.pid) holder = std::atol(name.c_str());
  }
  if (holder < 0) {
    end_holder(ns);
    FAIL("the holder in the namespaces could not be found");
  }
  settle_holder(ns, cache, 1, "fp-other-host", true, holder);
  auto w = run_waiter(pkg, cache, log, {{"FATPACK_CACHE_LOCK_WAIT_MS", "60000"}, {"FATPACK_CACHE_HOLDER_STALL_S", "3"}}, 45);
  ::kill(static_cast<pid_t>(holder), SIGKILL);  // the namespace's init: the namespace goes with it
  end_holder(ns);
  INFO("stdout:\n" << w.r.out << "\nstderr:\n" << w.r.err);
  MESSAGE("waiter behind a frozen holder on another host: " << w.s << " s (stall bound 3 s, lock wait 60 s)");
  CHECK_FALSE(w.hung);
  CHECK(w.s >= 3.0);  // it did wait for the heartbeat to stand still (1 s to the first look, + 3 s)
  CHECK(w.r.status == 0);
  CHECK(field(w.r.out, "load-all", "jit") == 1);
  CHECK(w.r.err_has("pid 1 on fp-other-host has not updated its heartbeat for "));
}

TEST_CASE("a live holder with a ticking heartbeat is waited for: the waiter gets its entry and compiles nothing") {
  // The holder compiles for 7 s, longer than the stall bound (3 s): its heartbeat keeps the waiter
  // waiting, and the waiter then loads the holder's entry.
  const std::string pkg = keys_package("ticking", 1);
  const std::string dir = fresh_dir("ticking"), log = dir + "/jit.log", cache = dir + "/cache";
  running holder = settled_holder(pkg, cache, log, false, 7000);
  auto w = run_waiter(pkg, cache, log, {{"FATPACK_CACHE_LOCK_WAIT_MS", "60000"}, {"FATPACK_CACHE_HOLDER_STALL_S", "3"}}, 45);
  auto h = finish(holder);
  INFO("holder stderr:\n" << h.err << "\nwaiter stdout:\n" << w.r.out << "\nwaiter stderr:\n" << w.r.err);
  MESSAGE("waiter behind a live holder (7 s JIT): " << w.s << " s");
  CHECK(h.status == 0);
  CHECK_FALSE(w.hung);
  CHECK(w.r.status == 0);
  CHECK(field(w.r.out, "load-all", "cache") == 1);
  CHECK(field(w.r.out, "load-all", "jit") == 0);
  CHECK(count_lines(log) == 1);
  CHECK_FALSE(w.r.err_has("not waiting"));
  CHECK(holder_records(cache).empty());  // the holder zeroed its record before it unlocked
}

TEST_CASE("garbage or a FIFO or a symlink at inflight.holders: no crash or hang; the waiter waits the lock bound as before") {
  const std::string pkg = keys_package("garbage", 1);
  const std::string dir = fresh_dir("garbage"), log = dir + "/jit.log", cache = dir + "/cache";
  running holder = settled_holder(pkg, cache, log, true);
  const std::string table = cache + "/v1/inflight.holders";
  std::mt19937 rng(7);
  for (const std::string how : {"random", "magic", "fifo", "symlink"}) {
    CAPTURE(how);
    ::unlink(table.c_str());
    if (how == "fifo") {
      REQUIRE(::mkfifo(table.c_str(), 0600) == 0);
    } else if (how == "symlink") {
      REQUIRE(::symlink(log.c_str(), table.c_str()) == 0);
    } else {
      // Random bytes; or every slot a record's magic and version followed by garbage.
      std::string bytes(16384, '\0');
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(rng());
      if (how == "magic")
        for (std::size_t at = 0; at < bytes.size(); at += 64) bytes.replace(at, 5, std::string("FPKH\1", 5));
      std::FILE* f = std::fopen(table.c_str(), "wb");
      REQUIRE(f);
      REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
      std::fclose(f);
    }
    auto w = run_waiter(pkg, cache, log, {{"FATPACK_CACHE_LOCK_WAIT_MS", "2500"}, {"FATPACK_CACHE_HOLDER_STALL_S", "2"}}, 45);
    INFO("stdout:\n" << w.r.out << "\nstderr:\n" << w.r.err);
    MESSAGE("waiter with a " << how << " holder table: " << w.s << " s (lock wait 2.5 s)");
    CHECK_FALSE(w.hung);
    CHECK(w.r.status == 0);
    CHECK(field(w.r.out, "load-all", "jit") == 1);
    CHECK(w.s >= 2.5);  // no information: the full bound, as before
    CHECK(w.r.err_has("for more than 2500 ms"));
    CHECK_FALSE(w.r.err_has("not waiting"));
    std::system(("rm -rf '" + cache + "/v1/objects'").c_str());  // the next round compiles again
  }
  end_holder(holder);
}

TEST_CASE("background upgrade: lower-minor SASS runs now, the PTX's JIT is used from the next start") {
  // sm_80 SASS and compute_80 PTX of one module on a CC 8.6 device: the SASS loads without a JIT;
  // with the upgrade on, the PTX is compiled for CC 8.6 in the background and the next process loads
  // that SASS from the cache instead.
  std::vector<fatpack::core::entry_input> entries;
  for (const char* f : {"vadd.sm_80.cubin", "vadd.compute_80.ptx"}) {
    auto bytes = read_file(artifact(f));
    auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), f, "up");
    REQUIRE(r.has_value());
    for (auto& e : r.value()) {
      e.module_name = "up";
      entries.push_back(std::move(e));
    }
  }
  const std::string pkg = package_file("upgrade", entries);
  const std::string dir = fresh_dir("upgrade"), log = dir + "/jit.log", cache = dir + "/cache";
  const env_map on = {{"FAKECUDA_DEVICES", "86"}, {"FATPACK_BACKGROUND_UPGRADE", "1"}};
  const std::vector<std::string> args = {"--package", pkg, "load", "up", "cache-wait", "cache-stats"};

  // Off by default: the SASS, nothing compiled, no upgrade line.
  auto off = probe(args, cache_env(cache, log, {{"FAKECUDA_DEVICES", "86"}}));
  CHECK(off.status == 0);
  CHECK(off.has("target=sm_80 jit=0"));
  CHECK_FALSE(off.has("background upgrade"));
  CHECK(count_lines(log) == 0);

  auto first = probe(args, cache_env(cache, log, on));
  CHECK(first.status == 0);
  CHECK(first.has("target=sm_80 jit=0"));
  CHECK(first.has("background upgrade: queued: compute_80"));
  CHECK(field(first.out, "cache", "upgrades") == 1);
  CHECK(count_lines(log) == 1);
  CHECK(files_under(cache, ".fpc").size() == 1);

  auto next = probe(args, cache_env(cache, log, on));
  CHECK(next.status == 0);
  CHECK(next.has("target=compute_80"));
  CHECK(next.has("background upgrade: used: compute_80"));
  CHECK(field(next.out, "cache", "hits_exact") == 1);
  CHECK(field(next.out, "cache", "upgrades") == 0);
  CHECK(count_lines(log) == 1);  // nothing compiled again

  // The API wins over the environment.
  auto api_off = probe({"--upgrade", "off", "--package", pkg, "load", "up", "cache-stats"}, cache_env(cache, log, on));
  CHECK(api_off.has("target=sm_80 jit=0"));
  CHECK_FALSE(api_off.has("background upgrade"));

  // The device's own SASS: nothing to upgrade.
  auto exact = probe(args, cache_env(cache, log, {{"FAKECUDA_DEVICES", "80"}, {"FATPACK_BACKGROUND_UPGRADE", "1"}}));
  CHECK(exact.has("target=sm_80 jit=0"));
  CHECK_FALSE(exact.has("background upgrade"));
  CHECK(count_lines(log) == 1);

  // No cache: nothing is queued, and the report says why.
  auto nocache = probe(args, cache_env(dir + "/off", log, {{"FAKECUDA_DEVICES", "86"}, {"FATPACK_BACKGROUND_UPGRADE", "1"},
                                                            {"FATPACK_CACHE_DISABLE", "1"}}));
  CHECK(nocache.has("target=sm_80 jit=0"));
  CHECK(nocache.has("background upgrade: not queued"));
  CHECK(count_lines(log) == 1);
}
