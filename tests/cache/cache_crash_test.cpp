// Crash enumeration (issue 10, "The suite"): for each scenario, a forked child runs it through the
// fault seam and dies at the N-th file-system call (before the call, after it, or in the middle of a
// pwrite), for every N in turn; then a fresh process with the real file system reopens the cache and
// checks the promises of docs/cache.md: no wrong entry served (the bytes equal what was stored under
// that key, or a miss), no manual repair (storing and finding every key works at once), temp files
// bounded (at most one per dead process, and none once a later process cleans an hour later).
//
// Scenarios: first write of entries; two writers of the same key (two keys in the full run; one frozen at call i and killed after
// the other ran, the other itself crashing at call j); eviction; index rebuild (index deleted or
// garbage); layered read with a prebuilt layer (which must not change).
//
// CI runs a subset (every call of each scenario, each way to die; a sample of the writer pairs);
// FATPACK_FULL=1 (ctest -L full) runs more keys per scenario and every writer pair.
#include "crash_support.hpp"

#include "fatpack/fatpack.hpp"

#include <fcntl.h>
#include <sys/stat.h>

using namespace crash_test;

namespace {

fault::shared_block* g_block = fault::new_shared_block();

// Dies at call `at` in the way `how` (crash, crash_after, or torn: half a pwrite, then die before
// the next call); every other call passes. `freeze` instead of dying: stop at `at` until killed.
struct die_at final : fault::fault_fs::policy {
  long at = -1;
  fault::action how = fault::action::crash;
  bool tearing = false;
  fault::action decide(long n, fault::op o, std::uintptr_t, int& err) override {
    if (tearing) return fault::action::crash;  // the call after the torn write
    if (n != at) return fault::action::pass;
    if (how == fault::action::torn) {
      if (o != fault::op::pwrite) return fault::action::crash;
      tearing = true;
      err = EIO;
      return fault::action::torn;
    }
    return how;
  }
};

// A scenario: how to prepare the cache (with the real file system), what the dying process does,
// and which keys exist (for the checks).
struct scenario {
  std::string name;
  std::function<void(const std::string& root)> prepare;  // builds <root>/cache (and <root>/prebuilt)
  std::function<bool(const std::string& root)> body;     // false: a lookup served wrong bytes
  std::vector<int> keys;
  std::uint64_t max_bytes = 1ull << 30;
  bool prebuilt = false;
  int other_driver_keys_from = -1;  // keys >= this have an entry of driver 12080 in the prebuilt layer
};

std::string prebuilt_of(const std::string& root) { return root + "/prebuilt"; }
std::string cache_of(const std::string& root) { return root + "/cache"; }

std::shared_ptr<disk_cache> open_cache(const std::string& root, const scenario& s) {
  return disk_cache::create(cfg_of(cache_of(root), s.max_bytes, s.prebuilt ? prebuilt_of(root) : std::string()));
}

// Runs `body` in a child through the fault seam with policy `p`; returns its exit code.
int run_faulted(const std::function<int()>& body, fault::fault_fs::policy* p, int freeze_fd = -1, pid_t* out_pid = nullptr) {
  fault::reset(g_block);
  pid_t pid = spawn([&] {
    fault::fault_fs f(g_block, p);
    f.freeze_fd = freeze_fd;
    fault::installed in(&f);
    return body();
  });
  if (out_pid) {
    *out_pid = pid;
    return 0;
  }
  return reap(pid);
}

// Starts `body` in a child that stops at call `at` until it is killed (a writer stopped right
// there); `frozen` is false when it finished without reaching that call. Returns its pid.
pid_t start_frozen(const std::function<int()>& body, long at, bool& frozen) {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  die_at pa;  // the child keeps its own copy of this frame (it never returns from spawn)
  pa.at = at;
  pa.how = fault::action::freeze;
  pid_t pid = -1;
  run_faulted(body, &pa, pipefd[1], &pid);
  ::close(pipefd[1]);
  char c = 0;
  frozen = ::read(pipefd[0], &c, 1) == 1;  // EOF: it finished first
  ::close(pipefd[0]);
  return pid;
}

// The checks, in a fresh process with the real file system (an hour later: clock + 2 h, so that the
// hourly temp-file cleaning is due and the dead writers' temp files are old enough to go).
struct verdict {
  int rc = 0;
  int temps_before = 0, temps_after = 0;
};

// Runs `body` on the scenario's cache in a later process (real file system, clock + `hours`).
int later(const std::string& root, const scenario& s, int hours, const std::function<int(disk_cache&)>& body) {
  return run_child([&] {
    fault::reset(g_block);
    fault::fault_fs f(g_block);
    f.clock_offset_s = hours * 3600;
    fault::installed in(&f);
    auto c = open_cache(root, s);
    return body(*c);
  });
}

verdict check(const std::string& root, const scenario& s, int dead_processes, const std::map<std::string, std::vector<std::uint8_t>>* prebuilt_before) {
  verdict v;
  v.temps_before = temp_files(cache_of(root));
  v.rc = later(root, s, 2, [&](disk_cache& c) {
    // 1. Whatever is there: the right bytes or a miss, exact or from another driver.
    for (int k : s.keys)
      if (auto h = c.find(key_of(k), true))
        if (!same(h->sass, cubin_of(k))) return exit_wrong;
    // 2. No repair: the next store and lookup of every key work (each found right after its store:
    // with a size bound, older ones may be evicted by later stores).
    for (int k : s.keys) {
      if (!jit_like(c, k)) return exit_wrong;
      auto h = c.find(key_of(k), false);
      if (!h || !same(h->sass, cubin_of(k))) return exit_needs_repair;
    }
    return exit_ok;
  });
  // 3. Temp files: a process a few hours later (the hourly cleaning is due whoever created the
  // index, and a dead writer's temp file is old and unlocked) stores one more key, which cleans.
  if (v.rc == exit_ok) v.rc = later(root, s, 5, [](disk_cache& c) { return jit_like(c, 39) ? exit_ok : exit_wrong; });
  v.temps_after = temp_files(cache_of(root));
  if (v.rc == exit_ok && v.temps_before > dead_processes) v.rc = exit_temp;
  if (v.rc == exit_ok && v.temps_after != 0) v.rc = exit_temp;
  if (v.rc == exit_ok && prebuilt_before && snapshot(prebuilt_of(root)) != *prebuilt_before) v.rc = exit_prebuilt;
  return v;
}

const char* rc_text(int rc) {
  switch (rc) {
    case exit_ok: return "ok";
    case exit_wrong: return "WRONG ENTRY SERVED";
    case exit_needs_repair: return "the cache needs a manual repair (a key cannot be stored and found)";
    case exit_temp: return "temp files not bounded (more than one per dead process, or left after the hourly clean)";
    case exit_prebuilt: return "the prebuilt layer changed";
    case exit_exception: return "exception";
    case -1: return "hung (killed after 30 s)";
    default: return "crashed";
  }
}

struct tally {
  long cases = 0, completed = 0, wrong = 0, failures = 0;
  int max_temps = 0;
};

void record(tally& t, const scenario& s, const std::string& what, const verdict& v) {
  ++t.cases;
  t.max_temps = std::max(t.max_temps, v.temps_before);
  if (v.rc == exit_wrong) ++t.wrong;
  if (v.rc != exit_ok) {
    ++t.failures;
    if (t.failures <= 5) FAIL_CHECK(s.name << ": " << what << ": " << std::string(rc_text(v.rc)) << " (temp files " << v.temps_before << " -> " << v.temps_after << ")");
  }
}

const char* how_name(fault::action a) {
  return a == fault::action::crash ? "before" : a == fault::action::crash_after ? "after" : "torn";
}

// One process dying at every call of `s.body` in turn, each of the three ways.
tally enumerate_single(const scenario& s) {
  tally t;
  const std::string tmpl = work_dir() + "/crash-" + s.name + "-template";
  const std::string root = work_dir() + "/crash-" + s.name;
  remove_tree(tmpl);
  stdfs::create_directories(tmpl);
  REQUIRE(run_child([&] { s.prepare(tmpl); return 0; }) == 0);
  const auto prebuilt_before = s.prebuilt ? snapshot(prebuilt_of(tmpl)) : std::map<std::string, std::vector<std::uint8_t>>{};
  // The number of calls of an undisturbed run.
  copy_tree(tmpl, root);
  REQUIRE(run_faulted([&] { return s.body(root) ? 0 : exit_wrong; }, nullptr) == 0);
  const long calls = g_block->ops.load();
  REQUIRE(calls > 0);
  REQUIRE(calls < 8192);
  std::vector<fault::op> ops(calls);
  for (long n = 0; n < calls; ++n) ops[n] = static_cast<fault::op>(g_block->op_at[n]);
  // CI: every third call (a different third per scenario way is not needed: the calls of one
  // scenario repeat per key); the full run: every call.
  const long stride = full_run() ? 1 : 3;
  for (long n = 0; n < calls; n += stride) {
    for (fault::action how : {fault::action::crash, fault::action::crash_after, fault::action::torn}) {
      if (how == fault::action::torn && ops[n] != fault::op::pwrite) continue;  // the same as "before" elsewhere
      copy_tree(tmpl, root);
      die_at p;
      p.at = n;
      p.how = how;
      int rc = run_faulted([&] { return s.body(root) ? 0 : exit_wrong; }, &p);
      const bool died = rc == fault::crash_exit;
      std::string what = "call " + std::to_string(n) + " (" +
                         std::string(g_block->crashed_op >= 0 ? fault::op_name(static_cast<fault::op>(g_block->crashed_op.load())) : "-") +
                         "), " + how_name(how);
      if (!died && rc != 0) {
        verdict v;
        v.rc = rc;
        record(t, s, what + ", the dying run itself", v);
        continue;
      }
      if (!died) ++t.completed;  // torn at a call that is not a pwrite past the end, etc.
      record(t, s, what, check(root, s, died ? 1 : 0, s.prebuilt ? &prebuilt_before : nullptr));
    }
  }
  MESSAGE("crash enumeration, " << s.name << ": " << calls << " calls x (before, after; torn for pwrite) = " << t.cases << " cases (" << t.completed
                                << " ran to the end), wrong entries served: " << t.wrong << ", failures: " << t.failures
                                << ", most temp files left by one crash: " << t.max_temps);
  remove_tree(root);
  remove_tree(tmpl);
  return t;
}

// Entry sizes of the test keys (all the same cubin size; compressed sizes differ by a few bytes).
std::uint64_t entry_bytes() {
  static std::uint64_t n = [] {
    full_key k = make_full_key(key_of(0));
    std::string why;
    auto e = encode_entry(k, fatpack::core::byte_span(cubin_of(0).data(), cubin_of(0).size()), 0, why);
    REQUIRE(e.has_value());
    return static_cast<std::uint64_t>(e->size());
  }();
  return n;
}

std::vector<int> range(int from, int to) {
  std::vector<int> v;
  for (int i = from; i < to; ++i) v.push_back(i);
  return v;
}

void prepare_keys(const std::string& root, const std::vector<int>& keys, std::uint64_t max_bytes = 1ull << 30) {
  auto c = disk_cache::create(cfg_of(cache_of(root), max_bytes));
  for (int k : keys) REQUIRE(jit_like(*c, k));
}

}  // namespace

TEST_CASE("crash at every call: first write, eviction, index rebuild, layered read") {
  const bool full = full_run();
  const int nkeys = full ? 30 : 2;
  for (int i = 0; i < 40; ++i) cubin_of(i);  // before any fork: computed once
  std::vector<scenario> all;
  {
    scenario s;
    s.name = "first-write";
    s.keys = range(0, nkeys);
    s.prepare = [](const std::string&) {};
    s.body = [s](const std::string& root) {
      auto c = open_cache(root, s);
      for (int k : s.keys)
        if (!jit_like(*c, k)) return false;
      return true;
    };
    all.push_back(s);
  }
  {
    // Four entries of a bound of 3.5: the next stores evict (to 90% of the bound) while the dying
    // process writes.
    scenario s;
    s.name = "eviction";
    s.keys = range(0, 4 + nkeys);
    s.max_bytes = entry_bytes() * 7 / 2;
    s.prepare = [](const std::string& root) { prepare_keys(root, range(0, 4)); };
    s.body = [s, nkeys](const std::string& root) {
      auto c = open_cache(root, s);
      if (!jit_like(*c, 1)) return false;  // a hit: touches its LRU time
      for (int k = 4; k < 4 + nkeys; ++k)
        if (!jit_like(*c, k)) return false;
      return true;
    };
    all.push_back(s);
  }
  for (const char* damage : {"deleted", "garbage"}) {
    scenario s;
    s.name = std::string("index-rebuild-") + damage;
    s.keys = range(0, 3 + nkeys);
    const bool del = std::string(damage) == "deleted";
    s.prepare = [del](const std::string& root) {
      prepare_keys(root, range(0, 3));
      const std::string idx = cache_of(root) + "/v1/index.v1";
      if (del) {
        REQUIRE(::unlink(idx.c_str()) == 0);
      } else {
        int fd = ::open(idx.c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        REQUIRE(::pwrite(fd, "garbage!garbage!", 16, 0) == 16);
        ::close(fd);
      }
    };
    s.body = [s, nkeys](const std::string& root) {
      auto c = open_cache(root, s);
      for (int k = 3; k < 3 + nkeys; ++k)
        if (!jit_like(*c, k)) return false;  // the first store rebuilds the index
      return jit_like(*c, 0);
    };
    all.push_back(s);
  }
  {
    // Prebuilt layer: keys 0..1 for this driver, key 2.. only from driver 12080 (used at once, then
    // "re-JIT-ed" and stored in the user cache). The user cache starts empty; the layer never changes.
    scenario s;
    s.name = "layered-read";
    s.prebuilt = true;
    s.keys = range(0, 3 + nkeys);
    s.prepare = [nkeys](const std::string& root) {
      REQUIRE(::mkdir(prebuilt_of(root).c_str(), 0700) == 0);
      auto c = disk_cache::create(cfg_of(prebuilt_of(root), 1ull << 30));
      for (int k = 0; k < 2; ++k) REQUIRE(jit_like(*c, k));
      for (int k = 2; k < 3 + nkeys; ++k) REQUIRE(jit_like(*c, k, 12080));
      REQUIRE(std::system(("rm -f '" + prebuilt_of(root) + "/v1/'*.lock").c_str()) == 0);
    };
    s.body = [s](const std::string& root) {
      auto c = open_cache(root, s);
      for (int k : s.keys) {
        auto h = c->find(key_of(k), true);
        if (!h || !same(h->sass, cubin_of(k))) return false;
        if (!h->exact) {  // the background refresh: compile for this driver, store in the user cache
          auto g = c->begin_compile(key_of(k));
          c->store(key_of(k), fatpack::core::byte_span(cubin_of(k).data(), cubin_of(k).size()));
        }
      }
      return true;
    };
    all.push_back(s);
  }
  long total = 0, wrong = 0;
  for (const auto& s : all) {
    tally t = enumerate_single(s);
    total += t.cases;
    wrong += t.wrong;
    CHECK(t.failures == 0);
  }
  MESSAGE("crash enumeration, single process: " << total << " cases, wrong entries served: " << wrong);
}

TEST_CASE("crash at every call: two writers of the same keys, one frozen and killed while the other runs (and dies)") {
  const bool full = full_run();
  for (int i = 0; i < 40; ++i) cubin_of(i);
  scenario s;
  s.name = "two-writers";
  // CI: both write key 0; the full run: keys 0 and 2, one after the other (twice the calls of A and
  // of B, four times the pairs).
  const std::vector<int> written = full ? std::vector<int>{0, 2} : std::vector<int>{0};
  s.keys = full ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1};
  s.max_bytes = 1ull << 30;
  const std::string tmpl = work_dir() + "/crash-two-template";
  const std::string root = work_dir() + "/crash-two";
  remove_tree(tmpl);
  stdfs::create_directories(tmpl);
  // The key's earlier entry (another key) exists, so the writers find a working cache and index.
  REQUIRE(run_child([&] { prepare_keys(tmpl, {1}); return 0; }) == 0);
  auto writer = [&](const std::string& r) {
    return [&, r] {
      auto c = open_cache(r, s);
      for (int k : written)
        if (!jit_like(*c, k)) return exit_wrong;
      return 0;
    };
  };

  copy_tree(tmpl, root);
  REQUIRE(run_faulted(writer(root), nullptr) == 0);
  const long calls_a = g_block->ops.load();

  tally t;
  long pairs = 0, blocked = 0;
  for (long i = 0; i < calls_a; ++i) {
    // B's own calls when A is frozen at i (B finishing undisturbed), then B dying at each of them.
    long calls_b = -1;
    const long stride = full ? 1 : 9;  // CI: every 9th call of B (and B undisturbed), all of A's
    bool again = false;
    for (long j = -1; calls_b < 0 || j < calls_b;
         full && j >= 0 && !again ? (void)(again = true) : (void)(again = false, j = j < 0 ? (i % stride) : j + stride)) {
      copy_tree(tmpl, root);
      bool frozen = false;
      const pid_t a = start_frozen(writer(root), i, frozen);
      // B runs (and maybe dies) while A is stopped in the middle of its store.
      die_at pb;
      pb.at = j;
      // CI alternates B's way of dying; the full run does each call both ways (the second pass of
      // the same j, `again`).
      pb.how = (full ? again : j % 2) ? fault::action::crash_after : fault::action::crash;
      const int frozen_op = g_block->crashed_op.load();
      fault::reset(g_block);
      pid_t b = -1;
      run_faulted(writer(root), j < 0 ? nullptr : &pb, -1, &b);
      const int rb = reap(b, 5);
      if (j < 0) calls_b = g_block->ops.load();
      kill(a, SIGKILL);
      const int ra = reap(a);
      const int dead = (ra == 128 + SIGKILL) + (rb == fault::crash_exit);
      if (rb == -1 && frozen_op == static_cast<int>(fault::op::stat)) {
        // B blocked by A stopped inside index.lock (was so before the wait was bounded; test below).
        ++blocked;
        kill(a, SIGKILL);
        reap(a);
        break;
      }
      std::string what = "A frozen at call " + std::to_string(i) + " (" +
                         (frozen_op >= 0 ? fault::op_name(static_cast<fault::op>(frozen_op)) : "-") + ")" +
                         (frozen ? "" : " (finished first)") + ", B " +
                         (j < 0 ? std::string("undisturbed") : "dying at call " + std::to_string(j));
      if ((rb != 0 && rb != fault::crash_exit) || (ra != 0 && ra != 128 + SIGKILL)) {
        verdict v;
        v.rc = rb != 0 && rb != fault::crash_exit ? rb : ra;
        record(t, s, what + ", the writers themselves", v);
        continue;
      }
      ++pairs;
      record(t, s, what, check(root, s, dead, nullptr));
    }
  }
  MESSAGE("crash enumeration, two-writers: A has " << calls_a << " calls; " << t.cases << " cases (A frozen x B dying or not)"
                                                   << ", wrong entries served: " << t.wrong << ", failures: " << t.failures
                                                   << ", most temp files left: " << t.max_temps
                                                   << "; A stopped inside index.lock and B blocked by it: " << blocked);
  CHECK(t.failures == 0);
  CHECK(blocked == 0);  // the directory locks' wait is bounded
  remove_tree(root);
  remove_tree(tmpl);
}

// A process stopped (SIGSTOP, a debugger, a frozen container) while it holds index.lock, here in the
// middle of cache_dir::index_insert, blocked every other process's next index update with no bound
// (the lock waited in the kernel); a loading thread gets there too (read_exact adds a missing slot,
// quarantine erases one), so the other process's load hung. Now the wait is bounded
// (dir_lock_wait_ms) and the other writer skips its index update and finishes.
TEST_CASE("a writer stopped inside index.lock does not block another writer's store") {
  for (int i = 0; i < 4; ++i) cubin_of(i);
  scenario s;
  s.name = "stopped-holder";
  const std::string tmpl = work_dir() + "/stopped-template", root = work_dir() + "/stopped";
  remove_tree(tmpl);
  stdfs::create_directories(tmpl);
  REQUIRE(run_child([&] { prepare_keys(tmpl, {1}); return 0; }) == 0);
  auto writer = [&](int key) { return [&, key] { auto c = open_cache(root, s); return jit_like(*c, key) ? 0 : exit_wrong; }; };
  copy_tree(tmpl, root);
  REQUIRE(run_faulted(writer(0), nullptr) == 0);
  const long calls = g_block->ops.load();
  std::vector<fault::op> ops(calls);
  for (long n = 0; n < calls; ++n) ops[n] = static_cast<fault::op>(g_block->op_at[n]);
  // The last stat of a store is index_insert's check of index.v1, under index.lock.
  long at = -1;
  for (long n = 0; n < calls; ++n)
    if (ops[n] == fault::op::stat) at = n;
  REQUIRE(at >= 0);
  copy_tree(tmpl, root);
  bool frozen = false;
  const pid_t a = start_frozen(writer(0), at, frozen);
  REQUIRE(frozen);
  // Another key: no per-key lock in the way, only index.lock.
  const int rb = run_child(writer(2), 3);
  kill(a, SIGKILL);
  reap(a);
  INFO("the second writer " << (rb == -1 ? "was still blocked after 3 s" : "finished"));
  CHECK(rb == 0);
  remove_tree(root);
  remove_tree(tmpl);
}
