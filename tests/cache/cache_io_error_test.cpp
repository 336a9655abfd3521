// I/O error matrix (issue 10, "The suite"): every call site of the cache's file-system seam (found
// by running the loads once and recording the caller of each call) x errno (ENOSPC, EIO, EACCES,
// EROFS, EDQUOT, EINTR, a short write / short read) x (once, persistent). In each case a forked
// child runs what the JIT service does for a few loads (look up, lock, look up, compile, store) and
// must: never get bytes of another key, never throw, crash or hang (so the load goes on with the
// JIT, or from memory), and say exactly one warning, with "JIT cache" in it (it names the call, the
// path and the errno), unless the case is on the allow-list below of faults that are silent by
// design (then it says nothing). Afterwards a process with the real file system must find the cache
// working (store and find every key: no repair).
//
// Three starting states: no cache directory yet (creation); a used cache (entries, one from another
// driver, a stale temp file, a garbage index to rebuild, a size bound that evicts); and, for the call
// sites the first two do not reach, the hourly cleaning due (a valid index, stale temp files: the
// used state's rebuild stamps the last cleaning now). CI runs every site x errno persistent and the
// once cases for EIO and short writes; FATPACK_FULL=1 runs the whole matrix.
#include "crash_support.hpp"

#include "fatpack/fatpack.hpp"

#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>
#include <sys/stat.h>
#include <utime.h>

using namespace crash_test;

namespace {

fault::shared_block* g_block = fault::new_shared_block();

constexpr int kshort = -1;  // "errno" of the short write / short read case

struct at_site final : fault::fault_fs::policy {
  fault::site target;
  int err = EIO;
  bool persistent = false;
  bool done = false;
  fault::action decide(long, fault::op o, std::uintptr_t ra, int& e) override {
    if (ra != target.ra || o != target.what || (done && !persistent)) return fault::action::pass;
    done = true;
    if (err == kshort) {
      e = ENOSPC;  // a short write is what a full disk gives; the seam reports the error after it
      return fault::action::torn;
    }
    e = err;
    return fault::action::fail;
  }
};

// The function a call site is in, from the executable's symbol table: the cache's functions have
// hidden visibility, so dladdr (fault::site_name) cannot name them. "cache_dir::scan",
// "make_dirs", "key_lock::~key_lock" ("?" when the executable has no symbol table).
std::string function_of(std::uintptr_t ra) {
  static const auto syms = [] {
    std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>> v;
    std::ifstream in("/proc/self/exe", std::ios::binary);
    const std::string img((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (img.size() < sizeof(Elf64_Ehdr)) return v;
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(img.data());
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff + std::uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) > img.size())
      return v;
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(img.data() + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      const auto* sym = reinterpret_cast<const Elf64_Sym*>(img.data() + sh[i].sh_offset);
      for (std::size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); ++j)
        if (ELF64_ST_TYPE(sym[j].st_info) == STT_FUNC && sym[j].st_size && sym[j].st_name < strs.sh_size)
          v.emplace_back(sym[j].st_value, sym[j].st_size, std::string(img.c_str() + strs.sh_offset + sym[j].st_name));
    }
    return v;
  }();
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(ra), &info)) return "?";
  const std::uint64_t off = ra - 1 - reinterpret_cast<std::uintptr_t>(info.dli_fbase);  // inside the call
  for (const auto& [at, size, mangled] : syms) {
    if (off < at || off >= at + size) continue;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    std::string n = d ? d : mangled;
    std::free(d);
    for (const std::string cut : {"fatpack::detail::cache::", "(anonymous namespace)::"})
      for (auto p = n.find(cut); p != std::string::npos; p = n.find(cut)) n.erase(p, cut.size());
    return n.substr(0, n.find('('));
  }
  return "?";
}

// Faults that are silent by design: (function of the call site, call, once or both). Every other
// case must warn exactly once; these must not warn. Keyed by the function too, not by the call alone:
// one call (stat) is a harmless shortcut at some sites and, failing, skips work at others (scan:
// an entry left out of the index). Every injected errno is covered by a rule: none of them is an
// error of a normal race (ENOENT/ESTALE, EAGAIN/EWOULDBLOCK, EEXIST: race_errno in store.cpp, silent
// everywhere), and EINTR is not retried by the callers because the POSIX seam retries it itself
// (fs_posix.cpp): an EINTR that reaches the cache is an error like EIO.
constexpr fault::op any_op = fault::op::count_;  // a rule for every call of its functions

struct quiet_rule {
  const char* function;
  fault::op what;
  bool once_only;  // only the `once` faults (the persistent ones warn)
  const char* why;
};
const quiet_rule quiet_rules[] = {
    // Every caller (key_lock::~key_lock, ofd_dir_lock::unlock), so that inlining cannot move it.
    {"*", fault::op::byte_unlock, false,
     "releasing a lock: a key lock's descriptor is closed right after, which releases it anyway; index.lock/"
     "evict.lock: F_UNLCK of one byte fails only on a bad descriptor, and a lock left would only make other "
     "processes skip an advisory index update or an eviction pass, never this one"},
    {"cache_dir::write", fault::op::try_flock, false,
     "the temp file's 'writer alive' flock: a cleaner never removes a temp file younger than a minute, and the "
     "writer renames or removes it within milliseconds"},
    {"make_dirs", fault::op::stat, false,
     "a shortcut before mkdir: mkdir then creates the directory or answers EEXIST, and the directory is "
     "checked (stat) again by the ownership rules"},
    {"prepare_user_dir", fault::op::stat, false,
     "\"does v1/ exist?\": on an error make_dirs creates it or finds it, and check_private stats it again "
     "(an error there warns: memory-only)"},
    // "|": the function it may be inlined into (which makes no such call itself).
    {"temp_writer_of|clean_temp_files", fault::op::open_read, false,
     "\"is the temp file's writer alive?\": cannot tell, so the cleaner goes by age (a day), the rule for file "
     "systems where flock cannot tell (this stale file is older: removed all the same)"},
    {"temp_writer_of|clean_temp_files", fault::op::try_flock, false, "as above: cannot tell, so by age"},
    // Every call of the key-lock holder records (holders.cpp, in whatever function it is inlined into).
    {"holder_record::*|holder_watch::*|tick|read_self|read_proc|open_table|self_of|this_process", any_op, false,
     "the holder record is advisory: a failed read is no information and a failed write no record, so a waiter "
     "waits the full lock wait as before (docs/cache.md §4)"},
    {"cache_dir::index_insert", fault::op::stat, true,
     "\"was the index replaced?\" before an insert: on an error the index is mapped again and the check retried "
     "(a persistent fault warns: the entry is not indexed)"},
};

// `names`: "*" (any), or names separated by '|'.
bool names_match(const std::string& names, const std::string& function) {
  if (names == "*") return true;
  std::size_t b = 0;
  while (true) {
    const std::size_t e = names.find('|', b);
    const std::string name = names.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (name == function) return true;
    if (name.size() > 1 && name.back() == '*' && function.compare(0, name.size() - 1, name, 0, name.size() - 1) == 0) return true;
    if (e == std::string::npos) return false;
    b = e + 1;
  }
}

const quiet_rule* quiet_rule_for(const std::string& function, fault::op what, bool persistent) {
  for (const auto& r : quiet_rules)
    if ((what == r.what || r.what == any_op) && !(persistent && r.once_only) && names_match(r.function, function)) return &r;
  return nullptr;
}

const char* err_name(int e) {
  switch (e) {
    case ENOSPC: return "ENOSPC";
    case EIO: return "EIO";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case EDQUOT: return "EDQUOT";
    case EINTR: return "EINTR";
    default: return "short";
  }
}

struct state {
  std::string name;
  std::function<void(const std::string& root)> prepare;
  std::uint64_t max_bytes = 1ull << 30;
  std::int64_t clock_offset_s = 0;
  std::vector<int> keys;
  bool new_sites_only = false;  // only call sites the states before did not reach
};

std::string cache_of(const std::string& root) { return root + "/cache"; }

// The loads: every key once (misses compile and store, hits are checked), then every key again.
int loads(const std::string& root, const state& st, int& warnings, std::string& first_warning) {
  std::mutex mu;
  fatpack::set_log_level(fatpack::log_level::warn);
  fatpack::set_log_callback([&](fatpack::log_level l, std::string_view line) {
    if (l != fatpack::log_level::warn && l != fatpack::log_level::error) return;
    std::lock_guard<std::mutex> g(mu);
    if (warnings++ == 0) first_warning = std::string(line);
  });
  auto c = disk_cache::create(cfg_of(cache_of(root), st.max_bytes));
  for (int round = 0; round < 2; ++round)
    for (int k : st.keys)
      if (!jit_like(*c, k)) return exit_wrong;
  fatpack::set_log_callback(nullptr);
  return exit_ok;
}

// Exit code, plus warnings written to the shared block's spare words: [0] count, text in a pipe.
struct outcome {
  int rc = 0, warnings = 0;
  std::string warning;
};

outcome run_case(const std::string& root, const state& st, fault::fault_fs::policy* p, bool record) {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  fault::reset(g_block);
  pid_t pid = spawn([&] {
    ::close(pipefd[0]);
    fault::fault_fs f(g_block, p);
    f.record_sites = record;
    f.clock_offset_s = st.clock_offset_s;
    fault::installed in(&f);
    int warnings = 0;
    std::string first;
    int rc = loads(root, st, warnings, first);
    std::string msg = std::to_string(warnings) + "\n" + first;
    if (::write(pipefd[1], msg.data(), msg.size()) < 0) return exit_exception;
    return rc;
  });
  ::close(pipefd[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(pipefd[0]);
  outcome o;
  o.rc = reap(pid);
  auto nl = text.find('\n');
  if (nl != std::string::npos) {
    o.warnings = std::atoi(text.substr(0, nl).c_str());
    o.warning = text.substr(nl + 1);
  }
  return o;
}

// With the real file system: every key can be stored and found (each right after its store).
int still_works(const std::string& root, const state& st) {
  return run_child([&] {
    auto c = disk_cache::create(cfg_of(cache_of(root), st.max_bytes));
    for (int k : st.keys) {
      if (!jit_like(*c, k)) return exit_wrong;
      auto h = c->find(key_of(k), false);
      if (!h || !same(h->sass, cubin_of(k))) return exit_needs_repair;
    }
    return exit_ok;
  });
}

}  // namespace

TEST_CASE("I/O errors at every call site x errno x (once, persistent): loads go on, one warning, no repair") {
  const bool full = full_run();
  for (int i = 0; i < 10; ++i) cubin_of(i);
  std::uint64_t entry = 0;
  {
    std::string why;
    auto e = encode_entry(make_full_key(key_of(0)), fatpack::core::byte_span(cubin_of(0).data(), cubin_of(0).size()), 0, why);
    REQUIRE(e.has_value());
    entry = e->size();
  }
  std::vector<state> states;
  {
    state s;
    s.name = "new";
    s.keys = {0, 1};
    s.prepare = [](const std::string&) {};
    states.push_back(s);
  }
  {
    state s;
    s.name = "used";
    s.keys = {0, 1, 4, 5, 6};
    s.max_bytes = entry * 9 / 2;  // 4.5 entries: the stores evict
    s.clock_offset_s = 2 * 3600;  // the hourly cleaning is due
    s.prepare = [](const std::string& root) {
      auto c = disk_cache::create(cfg_of(cache_of(root), 1ull << 30));
      for (int k : {0, 1, 2, 3}) REQUIRE(jit_like(*c, k));
      REQUIRE(jit_like(*c, 4, 12080));  // key 4 only from another driver: used, then re-stored
      const std::string dir = cache_of(root) + "/v1";
      // A stale temp file of a dead writer, and a garbage index (rebuilt by the first store).
      const std::string tmp = dir + "/objects/00/.dead.1.0.tmp";
      REQUIRE(std::system(("mkdir -p '" + dir + "/objects/00' && echo x > '" + tmp + "'").c_str()) == 0);
      struct utimbuf old{1000, 1000};
      REQUIRE(::utime(tmp.c_str(), &old) == 0);
      int fd = ::open((dir + "/index.v1").c_str(), O_WRONLY);
      REQUIRE(fd >= 0);
      REQUIRE(::pwrite(fd, "garbage!", 8, 0) == 8);
      ::close(fd);
    };
    states.push_back(s);
  }
  {
    // The hourly cleaning, which the used state never reaches (its index rebuild stamps the last
    // cleaning now): a valid index, the cleaning due, a stale temp file of a dead writer and a stale
    // index temp file. Only the call sites the states above did not reach.
    state s;
    s.name = "cleaning";
    s.keys = {0, 4};
    s.clock_offset_s = 2 * 3600;
    s.new_sites_only = true;
    s.prepare = [](const std::string& root) {
      auto c = disk_cache::create(cfg_of(cache_of(root), 1ull << 30));
      for (int k : {0, 1}) REQUIRE(jit_like(*c, k));
      const std::string dir = cache_of(root) + "/v1";
      const std::string tmp = dir + "/objects/00/.dead.1.0.tmp", itmp = dir + "/index.v1.tmp.1.1";
      REQUIRE(std::system(("mkdir -p '" + dir + "/objects/00' && echo x > '" + tmp + "' && echo x > '" + itmp + "'").c_str()) == 0);
      struct utimbuf old{1000, 1000};
      REQUIRE(::utime(tmp.c_str(), &old) == 0);
      REQUIRE(::utime(itmp.c_str(), &old) == 0);
    };
    states.push_back(s);
  }
  long cases = 0, failures = 0, warned = 0, quiet = 0, wrong = 0, sites_total = 0;
  std::map<int, long> per_errno;
  std::map<const quiet_rule*, long> quiet_by;  // rule -> silent cases
  std::set<std::pair<std::uintptr_t, int>> reached;  // (call site, op) of the states so far
  for (const auto& st : states) {
    const std::string tmpl = work_dir() + "/io-" + st.name + "-template", root = work_dir() + "/io-" + st.name;
    remove_tree(tmpl);
    stdfs::create_directories(tmpl);
    REQUIRE(run_child([&] { st.prepare(tmpl); return 0; }) == 0);
    copy_tree(tmpl, root);
    outcome clean = run_case(root, st, nullptr, true);
    REQUIRE(clean.rc == 0);
    CHECK_MESSAGE(clean.warnings == 0, st.name << ": a run without faults warned: " << clean.warning);
    std::vector<fault::site> sites;
    for (int i = 0; i < g_block->nsites.load(); ++i) {
      const fault::site& x = g_block->sites[i];
      const bool seen = !reached.insert({x.ra, static_cast<int>(x.what)}).second;
      if (fault::can_fail(x.what) && !(seen && st.new_sites_only)) sites.push_back(x);
    }
    sites_total += static_cast<long>(sites.size());
    for (const auto& site : sites) {
      const std::string function = function_of(site.ra);
      for (int err : {ENOSPC, EIO, EACCES, EROFS, EDQUOT, EINTR, kshort}) {
        if (err == kshort && site.what != fault::op::pwrite && site.what != fault::op::pread) continue;
        for (bool persistent : {false, true}) {
          if (!full && !persistent && err != EIO && err != kshort) continue;
          copy_tree(tmpl, root);
          at_site p;
          p.target = site;
          p.err = err;
          p.persistent = persistent;
          outcome o = run_case(root, st, &p, false);
          ++cases;
          ++per_errno[err];
          const bool injected = g_block->acted.load() > 0;
          const int after = o.rc == 0 ? still_works(root, st) : o.rc;
          if (o.rc == exit_wrong) ++wrong;
          const quiet_rule* rule = quiet_rule_for(function, site.what, persistent);
          // Silent by design: no warning. Otherwise exactly one, from the cache ("JIT cache: ...": the
          // call, the path, the errno's text and what the cache does instead).
          const bool as_designed = rule ? o.warnings == 0 : o.warnings == 1 && o.warning.find("JIT cache") != std::string::npos;
          if (rule && o.warnings == 0) ++quiet_by[rule], ++quiet;
          if (!rule && as_designed) ++warned;
          if (o.rc != 0 || after != 0 || !as_designed || !injected) {
            ++failures;
            if (failures <= 12)
              FAIL_CHECK(st.name << ": " << std::string(fault::op_name(site.what)) << " in " << function << ", "
                                 << std::string(err_name(err)) << std::string(persistent ? " persistent" : " once") << ": rc " << o.rc
                                 << ", afterwards " << after << ", " << o.warnings << " warnings, "
                                 << std::string(rule ? "silent by design" : "exactly one expected") << " (first: " << o.warning << ")"
                                 << std::string(injected ? "" : ", the fault was never hit"));
          }
        }
      }
    }
    remove_tree(root);
    remove_tree(tmpl);
  }
  std::ostringstream by;
  for (auto& kv : per_errno) by << " " << std::string(err_name(kv.first)) << "=" << kv.second;
  std::ostringstream q;
  for (const auto& r : quiet_rules)
    q << "\n  " << r.function << " " << (r.what == any_op ? "any call" : fault::op_name(r.what)) << (r.once_only ? " (once)" : "") << ": " << quiet_by[&r] << " cases";
  MESSAGE("silent by design:" << q.str());
  MESSAGE("I/O error matrix: " << sites_total << " call sites in " << states.size() << " states, " << cases << " injected-fault cases (" << by.str()
                               << "); loads that failed or got wrong bytes: " << wrong << " wrong; " << warned
                               << " warned exactly once; " << quiet << " silent by design; " << failures << " failing cases");
  CHECK(failures == 0);
}
