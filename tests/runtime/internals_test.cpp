// Unit tests of runtime internals: ptxas options -> JIT options, the JIT key, and the fake driver's JIT
// output read back by core::parse_cubin through the runtime's own cuLink wrapper.
#include "jit/culink.hpp"
#include "cache/sass_cache.hpp"

#include <doctest/doctest.h>

using namespace fatpack::detail;

TEST_CASE("ptxas options stored with an entry become JIT options") {
  auto o = parse_jit_options("-O3 -lineinfo --maxrregcount=64");
  CHECK(o.optimization_level == 3);
  CHECK(o.line_info);
  CHECK(o.max_registers == 64);
  CHECK_FALSE(o.debug_info);
  CHECK(o.ignored.empty());
  CHECK(o.invalid.empty());
  CHECK(o.canonical() == "-O3 -maxrregcount=64 --generate-line-info");
  auto p = parse_jit_options("  -g\t-maxrregcount 32 --generate-line-info --warn-on-spills -O9 ");
  CHECK(p.debug_info);
  CHECK(p.line_info);
  CHECK(p.max_registers == 32);
  CHECK(p.optimization_level == -1);  // -O9 is not a JIT level: reported, not guessed
  REQUIRE(p.ignored.size() == 1);
  CHECK(p.ignored[0] == "--warn-on-spills");
  REQUIRE(p.invalid.size() == 1);
  CHECK(p.invalid[0] == "-O9: not an optimization level (0..4)");
  auto e = parse_jit_options("");
  CHECK(e.optimization_level == -1);
  CHECK(e.ignored.empty());
  CHECK(e.canonical().empty());
  // What nvcc writes into its fatbins: "-O2  -maxrregcount=32 --generate-line-info", and with -G
  // " -g --dont-merge-basicblocks --return-at-end" (the last two need nothing more than -g).
  auto nv = parse_jit_options("-O2  -maxrregcount=32 --generate-line-info");
  CHECK(nv.canonical() == "-O2 -maxrregcount=32 --generate-line-info");
  auto g = parse_jit_options(" -g --dont-merge-basicblocks --return-at-end -v");
  CHECK(g.canonical() == "-g");
  CHECK(g.ignored.empty());
  CHECK(g.invalid.empty());
  // Same meaning, other spelling: the same canonical text (so the same JIT key).
  CHECK(parse_jit_options("--opt-level 2 --maxrregcount 32 -lineinfo").canonical() == nv.canonical());
}

TEST_CASE("hostile options text: every bad value is named, none reaches the JIT") {
  auto bad = parse_jit_options("-maxrregcount=-5 --maxrregcount=99999999999999 -maxrregcount=0 -maxrregcount=256 "
                               "-O-1 -Ofast --opt-level=x garbage \x01\xff -maxrregcount");
  CHECK(bad.max_registers == 0);
  CHECK(bad.optimization_level == -1);
  CHECK(bad.canonical().empty());
  REQUIRE(bad.invalid.size() == 10);
  CHECK(bad.invalid[0] == "-maxrregcount=-5: not a register count (1..255)");
  CHECK(bad.invalid[1] == "--maxrregcount=99999999999999: not a register count (1..255)");
  CHECK(bad.invalid[2] == "-maxrregcount=0: not a register count (1..255)");
  CHECK(bad.invalid[3] == "-maxrregcount=256: not a register count (1..255)");
  CHECK(bad.invalid[4] == "-O-1: not an optimization level (0..4)");
  CHECK(bad.invalid[5] == "-Ofast: not an optimization level (0..4)");
  CHECK(bad.invalid[6] == "--opt-level=x: not an optimization level (0..4)");
  CHECK(bad.invalid[7] == "garbage: not an option");
  CHECK(bad.invalid[8] == "\\x01\\xff: not an option");  // control bytes never reach a log raw
  CHECK(bad.invalid[9] == "-maxrregcount: no value follows");
  // ptxas's symbolic limits are valid, but no CU_JIT_MAX_REGISTERS value says them.
  auto sym = parse_jit_options("-maxrregcount=archmax");
  CHECK(sym.max_registers == 0);
  REQUIRE(sym.ignored.size() == 1);
  CHECK(sym.ignored[0] == "-maxrregcount=archmax");
  // Bounded: text longer than max_options_text is not parsed at all.
  auto huge = parse_jit_options(std::string(fatpack::core::max_options_text + 1, 'x'));
  CHECK(huge.canonical().empty());
  REQUIRE(huge.invalid.size() == 1);
  CHECK(huge.invalid[0].find("options text of 4097 bytes") != std::string::npos);
  // One over-long word is shown cut short.
  auto longword = parse_jit_options("-" + std::string(1000, 'z'));
  REQUIRE(longword.ignored.size() == 1);
  CHECK(longword.ignored[0].size() == 67);
}

TEST_CASE("fatpack build records the nvcc options the JIT needs, in ptxas syntax") {
  using fatpack::core::ptxas_options_from_nvcc;
  auto r = ptxas_options_from_nvcc({"-O3", "-maxrregcount", "32", "-lineinfo", "-G", "--use_fast_math", "-Xptxas",
                                    "-O2,-v", "--ptxas-options=--warn-on-spills", "-I", "include", "-std=c++17"});
  CHECK(r.text == "-maxrregcount=32 --generate-line-info -g -O2 -v --warn-on-spills");
  CHECK(r.invalid.empty());
  REQUIRE(r.not_mapped.size() == 1);
  CHECK(r.not_mapped[0] == "--warn-on-spills");
  const auto o = parse_jit_options(r.text);
  CHECK(o.canonical() == "-O2 -maxrregcount=32 --generate-line-info -g");
  // The other spellings.
  CHECK(ptxas_options_from_nvcc({"--maxrregcount=64", "--generate-line-info", "-Xptxas=-O1"}).text ==
        "-maxrregcount=64 --generate-line-info -O1");
  CHECK(ptxas_options_from_nvcc({"--maxrregcount", "16", "--device-debug", "--ptxas-options", "-O0"}).text ==
        "-maxrregcount=16 -g -O0");
  // Options that shape the PTX itself are not recorded.
  CHECK(ptxas_options_from_nvcc({"-O3", "--use_fast_math", "-DN=3", "-arch=sm_90"}).text.empty());
  // Bad values refuse the build.
  auto bad = ptxas_options_from_nvcc({"-maxrregcount=-5", "-Xptxas", "-O7", "-maxrregcount"});
  REQUIRE(bad.invalid.size() == 3);
  CHECK(bad.invalid[0] == "-maxrregcount: no value follows");
  CHECK(bad.invalid[1] == "-maxrregcount=-5: not a register count (1..255)");
  CHECK(bad.invalid[2] == "-O7: not an optimization level (0..4)");
}

TEST_CASE("the JIT key names every field that changes the SASS") {
  jit_key a;
  a.ptx_xxh3 = 0x1234;
  a.ptx_size = 100;
  a.ptx_target.kind = fatpack::core::entry_kind::ptx;
  a.ptx_target.arch = 80;
  a.ptx_isa = {9, 0};
  a.target_arch = 90;
  a.options = "-O3";
  a.driver_version = 13000;
  const std::string base = a.str();
  auto differs = [&](auto change) {
    jit_key b = a;
    change(b);
    return b.str() != base;
  };
  CHECK(differs([](jit_key& k) { k.ptx_xxh3 = 0x1235; }));
  CHECK(differs([](jit_key& k) { k.ptx_size = 101; }));
  CHECK(differs([](jit_key& k) { k.target_arch = 86; }));
  CHECK(differs([](jit_key& k) { k.target_variant = fatpack::core::arch_variant::arch_specific; }));
  CHECK(differs([](jit_key& k) { k.options = "-O2"; }));
  CHECK(differs([](jit_key& k) { k.backend = "nvjitlink"; }));
  CHECK(differs([](jit_key& k) { k.driver_version = 13010; }));
  CHECK(differs([](jit_key& k) { k.piece_of = "0000000000001234:100"; }));
  null_sass_cache none;
  CHECK_FALSE(none.lookup(a).has_value());
}

// The fake driver's JIT output must be a cubin fatpack itself reads (so cache tests can validate it).
// runtime_test.cpp points FATPACK_LIBCUDA at the fake (CC 9.0 and 8.6) before anything loads.
#include "platform/device.hpp"

#include "fatpack/core/input.hpp"

#include <fstream>
#include <iterator>

TEST_CASE("the fake JIT's cubin parses with core::parse_cubin") {
  const auto& ds = load_devices();
  REQUIRE(ds.has_value());
  const driver& d = *(*ds)->drv;
  REQUIRE((*ds)->devices.size() == 2);
  std::ifstream f(std::string(FATPACK_TEST_ARTIFACTS) + "/vadd.compute_80.ptx", std::ios::binary);
  std::vector<std::uint8_t> ptx((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(ptx.empty());
  ptx.push_back(0);
  for (const auto& dev : (*ds)->devices) {
    auto ctx = primary_context::retain(d, dev);
    REQUIRE(ctx.has_value());
    scoped_context current(d, ctx->get());
    REQUIRE(current.ok());
    auto out = jit_link(d, fatpack::core::byte_span(ptx.data(), ptx.size()), "vadd: compute_80", jit_options{},
                        std::nullopt);
    REQUIRE_MESSAGE(out.has_value(), (out ? "" : out.error().what()));
    CHECK_FALSE(out->info_log.empty());
    fatpack::core::byte_span bytes(out->sass.data(), out->sass.size());
    CHECK(fatpack::core::detect_input(bytes) == fatpack::core::input_kind::cubin);
    auto ci = fatpack::core::parse_cubin(bytes, "fake jit output");
    REQUIRE_MESSAGE(ci.has_value(), (ci ? "" : ci.error().message));
    CHECK(ci->target.kind == fatpack::core::entry_kind::sass);
    CHECK(ci->target.arch == dev.arch);
    CHECK(ci->target.variant == fatpack::core::arch_variant::plain);
    CHECK(ci->kernels == std::vector<std::string>{"vadd", "saxpy"});
    // Cross-target JIT (CU_JIT_TARGET), as `fatpack warm --target` will use.
    auto x = jit_link(d, fatpack::core::byte_span(ptx.data(), ptx.size()), "vadd: compute_80", jit_options{}, 86u);
    REQUIRE(x.has_value());
    auto xi = fatpack::core::parse_cubin(fatpack::core::byte_span(x->sass.data(), x->sass.size()), "cross");
    REQUIRE(xi.has_value());
    CHECK(xi->target.arch == 86);
  }
  // The driver refuses a PTX ISA newer than its JIT: an error value with the log.
  std::string text(ptx.begin(), ptx.end() - 1);
  text.replace(text.find(".version 9.0"), 12, ".version 9.9");
  std::vector<std::uint8_t> p99(text.begin(), text.end());
  p99.push_back(0);
  auto ctx = primary_context::retain(d, (*ds)->devices[0]);
  scoped_context current(d, ctx->get());
  auto bad = jit_link(d, fatpack::core::byte_span(p99.data(), p99.size()), "vadd 9.9", jit_options{}, std::nullopt);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == fatpack::errc::jit_failed);
  CHECK(bad.error().cuda_status == 222);
  CHECK(bad.error().log.find("Unsupported .version 9.9; current version is '9.0'") != std::string::npos);
  CHECK(bad.error().message.find("cuLinkAddData") != std::string::npos);
}

// ---- the JIT service: a task always finishes; stores leave the loading thread --------------------

#include "jit/service.hpp"
#include "platform/log.hpp"
#include "registry/registry.hpp"
#include "registry/image_names.hpp"

#include "test_support.hpp"

#include "fatpack/fatpack.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {

// A package with one PTX module whose bytes no other test uses (a key of its own).
module_entries fresh_ptx_module(const std::string& name) {
  auto path = fatpack_test::package_file(name, fatpack_test::entries_of(name, {"vadd.compute_80.ptx#" + name}));
  REQUIRE(fatpack::add_package_file(path).ok());
  auto me = registry::instance().find_module(name, name);
  REQUIRE(me.has_value());
  return me.value();
}

jit_request request_for(const module_entries& me, const std::string& name) {
  const auto& ds = load_devices();
  REQUIRE(ds.has_value());
  jit_request r;
  r.package = me.package;
  r.entry = me.entries.front();
  r.drv = (*ds)->drv;
  r.dev = &(*ds)->devices.front();
  r.module = name;
  return r;
}

// Restores the log level and callback.
struct throwing_log {
  throwing_log() {
    fatpack::set_log_level(fatpack::log_level::debug);
    fatpack::set_log_callback([](fatpack::log_level, std::string_view line) {
      if (line.rfind("JIT ", 0) == 0) throw std::runtime_error("log sink refused a line");
    });
  }
  ~throwing_log() {
    fatpack::set_log_callback(nullptr);
    fatpack::set_log_level(fatpack::log_level::off);
  }
};

}  // namespace

TEST_CASE("a compile that throws finishes its task with an error, on the caller and on the pool") {
  // The throw comes from the application's log callback, in the middle of a compile. Before: the
  // task stayed `running` for ever (every later load of the key hung) and, on a pool thread,
  // std::terminate ended the process.
  auto me = fresh_ptx_module("throwing_compile");
  auto req = request_for(me, "throwing_compile");
  auto& jit = jit_service::instance();
  {
    throwing_log log;
    auto r = jit.compile(req);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == fatpack::errc::jit_failed);
    CHECK(r.error().message.find("log sink refused a line") != std::string::npos);
    CHECK(r.error().message.find("throwing_compile") != std::string::npos);
    // On the pool: a pool thread's lines go out after its task is done (platform/log.hpp), so the
    // throw cannot interrupt the compile there; it must neither end the process (std::terminate)
    // nor hang the waiter (bounded by the future), and the waiter gets the SASS.
    // Polled until done, not waited: wait() would take a task still queued over and run it on the
    // waiting thread, where the throw does interrupt the compile (the case above).
    auto t = jit.enqueue(req);
    REQUIRE(t.has_value());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!jit_task_done(*t) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE_MESSAGE(jit_task_done(*t), "the pool's task did not finish in 30 s");
    auto w = jit.wait(*t);
    REQUIRE_MESSAGE(w.has_value(), (w ? "" : w.error().message));
    CHECK(w->sass->size() > 0);
    jit.forget(req);
  }
  // Failures are forgotten: without the throwing sink the same key compiles.
  auto ok = jit.compile(req);
  REQUIRE_MESSAGE(ok.has_value(), (ok ? "" : ok.error().message));
  CHECK(ok->sass->size() > 0);
  jit.flush_stores();
}

TEST_CASE("log lines held back while fatpack holds a lock go out in order afterwards, bounded") {
  std::vector<std::string> seen;
  fatpack::set_log_level(fatpack::log_level::debug);
  fatpack::set_log_callback([&](fatpack::log_level, std::string_view line) { seen.emplace_back(line); });
  {
    log_deferral outer;
    log_line(fatpack::log_level::debug, "first");
    {
      log_deferral inner;
      log_line(fatpack::log_level::debug, "second\nthird");
    }
    CHECK(seen.empty());  // the inner one hands its lines to the outer one
    for (int i = 0; i < 10005; ++i) log_line(fatpack::log_level::debug, "line " + std::to_string(i));
    CHECK(seen.empty());
  }
  fatpack::set_log_callback(nullptr);
  fatpack::set_log_level(fatpack::log_level::off);
  // 10,000 held ("first", "second\nthird" and 9,998 more), then the count of the 7 dropped.
  REQUIRE(seen.size() == 10002);
  CHECK(seen[0] == "first");
  CHECK(seen[1] == "second");
  CHECK(seen[2] == "third");
  CHECK(seen[3] == "line 0");
  CHECK(seen[10000] == "line 9997");
  CHECK(seen[10001].find("7 more log lines were dropped") == 0);
}

TEST_CASE("with no log callback, a line logged inside a deferral reaches stderr at once") {
  // Before: held until the deferral ended. A pool task's deferral ends after the task has counted
  // itself done, so a program that exited right after its load could lose the task's warning (the
  // nvJitLink fallback warning went missing that way on a 2-core CI run).
  char path[] = "/tmp/fatpack_log_stderr_XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  REQUIRE(saved >= 0);
  ::dup2(file, 2);
  std::string written;
  fatpack::set_log_level(fatpack::log_level::warn);
  {
    log_deferral held;
    log_line(fatpack::log_level::warn, "written while deferred");
    std::fflush(stderr);
    std::ifstream in(path);
    written.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  fatpack::set_log_level(fatpack::log_level::off);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  ::unlink(path);
  CHECK(written == "fatpack: warn: written while deferred\n");
}

TEST_CASE("a thread that defers its lines never waits for a log callback running on another thread") {
  // Thread B is inside the application's callback (slow: a symbolizer, a lock of the application's).
  // The main thread defers (as when it holds a fatpack lock or the loader's, inside dl_iterate_phdr)
  // and logs. Before: it took the callback's mutex to see whether a callback was set, and so waited
  // for B's callback; a callback that needs what the deferring thread holds never returned.
  std::mutex m;
  std::condition_variable cv;
  bool in_callback = false, released = false, timed_out = false;
  std::vector<std::string> seen;
  fatpack::set_log_level(fatpack::log_level::warn);
  fatpack::set_log_callback([&](fatpack::log_level, std::string_view line) {
    std::unique_lock<std::mutex> lock(m);
    seen.emplace_back(line);
    if (line != "slow") return;
    in_callback = true;
    cv.notify_all();
    timed_out = !cv.wait_for(lock, std::chrono::seconds(3), [&] { return released; });
  });
  std::thread b([] { log_line(fatpack::log_level::warn, "slow"); });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return in_callback; });
  }
  {
    log_deferral held;
    log_line(fatpack::log_level::warn, "deferred");  // held: returns without waiting for B
    std::lock_guard<std::mutex> lock(m);
    released = true;
    cv.notify_all();
  }  // the held line goes to the callback now, after B's
  b.join();
  fatpack::set_log_callback(nullptr);
  fatpack::set_log_level(fatpack::log_level::off);
  CHECK_FALSE(timed_out);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == "slow");
  CHECK(seen[1] == "deferred");
}

TEST_CASE("terminal_text: well-formed UTF-8 stays, every control character and malformed byte is '?'") {
  using fatpack::core::terminal_text;
  CHECK(terminal_text("plain\ttab") == "plain\ttab");
  CHECK(terminal_text("a\x1b[2Jb\rc\x7f") == "a?[2Jb?c?");
  CHECK(terminal_text("/home/j\xc3\xbcrgen/\xe2\x82\xac/\xf0\x9f\x98\x80") == "/home/j\xc3\xbcrgen/\xe2\x82\xac/\xf0\x9f\x98\x80");
  CHECK(terminal_text("x\xc2\x9b" "2Jy") == "x??2Jy");  // U+009B, a CSI to some terminals
  CHECK(terminal_text("x\x9b" "2J") == "x?2J");          // a lone C1 byte
  CHECK(terminal_text("\xe2\x82") == "??");           // cut short
  CHECK(terminal_text("\xc0\xaf") == "??");           // overlong '/'
  CHECK(terminal_text("\xed\xa0\x80") == "???");      // a surrogate
  CHECK(terminal_text("\xf4\x90\x80\x80") == "????");  // past U+10FFFF
  CHECK(terminal_text("\xc2\xa0ok") == "\xc2\xa0ok");    // U+00A0 is not a control character
}

TEST_CASE("a log callback may take a lock the application holds while it waits for a JIT") {
  // The application holds its own lock while a warm-up compiles on the pool, and its log callback
  // takes that lock. Before: the pool thread called the callback in the middle of the compile, so the
  // task could not finish while the application waited for it holding the lock (a deadlock; here
  // bounded by the callback's 60 s try_lock_for and the 20 s poll). The same order, through a
  // fatpack lock held while logging, was found by the TSan job (jit_service::pool).
  auto me = fresh_ptx_module("callback_lock");
  auto req = request_for(me, "callback_lock");
  auto& jit = jit_service::instance();
  // The application's lock, held by the test's thread; a callback on that thread passes (as with a
  // recursive mutex), one on another thread waits at most 60 s. (A condition variable, not
  // std::recursive_timed_mutex: TSan does not follow pthread_mutex_clocklock.)
  struct {
    std::mutex mu;
    std::condition_variable cv;
    bool held = false;
    std::thread::id owner;
  } app;
  std::atomic<int> lines{0};
  std::atomic<bool> callback_gave_up{false};
  fatpack::set_log_level(fatpack::log_level::debug);
  fatpack::set_log_callback([&](fatpack::log_level, std::string_view) {
    std::unique_lock<std::mutex> l(app.mu);
    if (!app.cv.wait_for(l, std::chrono::seconds(60),
                         [&] { return !app.held || app.owner == std::this_thread::get_id(); })) {
      callback_gave_up = true;
      return;
    }
    ++lines;
  });
  bool done = false;
  {
    {
      std::lock_guard<std::mutex> l(app.mu);
      app.held = true;
      app.owner = std::this_thread::get_id();
    }
    auto t = jit.enqueue(req);
    REQUIRE(t.has_value());
    // Polled, not waited: wait() could take the task over and run it on this thread.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!(done = jit_task_done(*t)) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK_MESSAGE(done, "the warm-up did not finish in 20 s while the application held the lock its log callback takes");
    {
      std::lock_guard<std::mutex> l(app.mu);
      app.held = false;
    }
    app.cv.notify_all();
  }
  auto t = jit.enqueue(req);
  REQUIRE(t.has_value());
  auto r = jit.wait(*t);
  CHECK(r.has_value());
  jit.flush_stores();
  // The lines were not lost: emitted once the task was done.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (lines.load() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  fatpack::set_log_callback(nullptr);
  fatpack::set_log_level(fatpack::log_level::off);
  CHECK(lines.load() > 0);
  CHECK_FALSE(callback_gave_up.load());
}

namespace {

// A cache whose store() blocks until released, and whose compile guard says when it is released.
class blocking_cache final : public sass_cache {
 public:
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, storing = false, stored = false, guard_alive = false;
  std::thread::id store_thread;

  class guard final : public compile_guard {
   public:
    explicit guard(blocking_cache& c) : c_(c) {
      std::lock_guard<std::mutex> l(c_.mu);
      c_.guard_alive = true;
    }
    ~guard() override {
      std::lock_guard<std::mutex> l(c_.mu);
      c_.guard_alive = false;
    }

   private:
    blocking_cache& c_;
  };

  std::optional<cache_hit> find(const jit_key&, bool) noexcept override { return std::nullopt; }
  std::unique_ptr<compile_guard> begin_compile(const jit_key&) noexcept override { return std::make_unique<guard>(*this); }
  std::string store(const jit_key&, fatpack::core::byte_span) noexcept override {
    std::unique_lock<std::mutex> l(mu);
    storing = true;
    store_thread = std::this_thread::get_id();
    cv.notify_all();
    cv.wait(l, [&] { return release; });
    stored = true;
    return {};
  }
  const char* name() const noexcept override { return "blocking"; }
};

}  // namespace

TEST_CASE("a fresh compile returns before its store; the compile lock is held until the entry is published") {
  auto me = fresh_ptx_module("offthread_store");
  auto req = request_for(me, "offthread_store");
  auto cache = std::make_shared<blocking_cache>();
  const bool had = sass_cache_installed();
  auto previous = get_sass_cache();
  set_sass_cache(cache);
  auto& jit = jit_service::instance();
  auto r = jit.compile(req);  // returns although store() blocks: the store is not on this thread
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  {
    std::unique_lock<std::mutex> l(cache->mu);
    REQUIRE(cache->cv.wait_for(l, std::chrono::seconds(30), [&] { return cache->storing; }));
    CHECK((cache->store_thread != std::this_thread::get_id()));
    CHECK_FALSE(cache->stored);
    CHECK(cache->guard_alive);  // other processes still wait on the key
  }
  CHECK_FALSE(jit.flush_stores(50));  // bounded flush: the store is still blocked
  {
    std::lock_guard<std::mutex> l(cache->mu);
    cache->release = true;
  }
  cache->cv.notify_all();
  CHECK(jit.flush_stores());
  std::lock_guard<std::mutex> l(cache->mu);
  CHECK(cache->stored);
  CHECK_FALSE(cache->guard_alive);
  if (had) set_sass_cache(previous);
  else uninstall_sass_cache();
}

// ---- an entry's recorded options reach the JIT and its key ---------------------------------------

#include "jit/nvjitlink.hpp"

namespace {

// A package `name` with one PTX module `name` whose PTX is `ptx_file` tagged `tag` (same tag, same
// bytes) and whose entry records `options`.
module_entries ptx_module_with_options(const std::string& name, const std::string& ptx_file, const std::string& tag,
                                       const std::string& options) {
  auto entries = fatpack_test::entries_of(name, {ptx_file + "#" + tag});
  for (auto& e : entries) e.options = options;
  REQUIRE(fatpack::add_package_file(fatpack_test::package_file(name, entries)).ok());
  auto me = registry::instance().find_module(name, name);
  REQUIRE(me.has_value());
  return me.value();
}

// The fake driver's log line of the JIT of module `name` (FAKECUDA_JIT_LOG, set by runtime_test.cpp).
std::string jit_log_line(const std::string& name) {
  const std::string log = fatpack_test::read_text(fatpack_test::temp_dir() + "/jit.log");
  std::string found;
  std::size_t at = 0;
  while ((at = log.find(" " + name + ": ", at)) != std::string::npos) {
    const std::size_t start = log.rfind('\n', at);
    const std::size_t end = log.find('\n', at);
    found = log.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1));
    at = end;
  }
  return found;
}

}  // namespace

TEST_CASE("an entry's -maxrregcount=32 reaches cuLink as CU_JIT_MAX_REGISTERS, and options change the key") {
  auto& jit = jit_service::instance();
  auto with = ptx_module_with_options("opts_with", "vadd.compute_80.ptx", "opts", "-maxrregcount=32 -O2 -lineinfo -v");
  auto without = ptx_module_with_options("opts_without", "vadd.compute_80.ptx", "opts", "");
  auto respelt = ptx_module_with_options("opts_respelt", "vadd.compute_80.ptx", "opts",
                                         "--generate-line-info --opt-level 2 --maxrregcount 32");
  auto req_with = request_for(with, "opts_with");
  auto req_without = request_for(without, "opts_without");
  auto req_respelt = request_for(respelt, "opts_respelt");
  // The key: other options, another key; the same options spelt otherwise, the same key.
  CHECK(make_jit_key(req_with).str() != make_jit_key(req_without).str());
  CHECK(make_jit_key(req_with).str() == make_jit_key(req_respelt).str());
  CHECK(make_jit_key(req_with).options == "-O2 -maxrregcount=32 --generate-line-info");

  const std::size_t before = jit.compiles();
  auto a = jit.compile(req_with);
  REQUIRE_MESSAGE(a.has_value(), (a ? "" : a.error().message));
  CHECK(jit_log_line("opts_with").find(" opts=O2,maxrregcount=32,lineinfo opts_with: ") != std::string::npos);
  CHECK(a->info_log.find("not passed") == std::string::npos);  // -v needs nothing; all four applied
  auto b = jit.compile(req_without);
  REQUIRE(b.has_value());
  CHECK(jit_log_line("opts_without").find(" opts=- opts_without: ") != std::string::npos);
  CHECK(*a->sass != *b->sass);  // the fake's cubin names its options, as a real one differs
  auto c = jit.compile(req_respelt);
  REQUIRE(c.has_value());
  CHECK(c->reused);
  CHECK(jit.compiles() == before + 2);
  jit.flush_stores();
}

TEST_CASE("invalid or unusable options from a package: never given to the driver, always said") {
  auto& jit = jit_service::instance();
  auto me = ptx_module_with_options("opts_hostile", "vadd.compute_80.ptx", "hostile",
                                    "-maxrregcount=-5 -O99 --maxrregcount=4294967296 -maxrregcount=100000 "
                                    "--warn-on-spills -lineinfo");
  auto req = request_for(me, "opts_hostile");
  std::vector<std::string> warnings;
  std::mutex mu;
  fatpack::set_log_level(fatpack::log_level::warn);
  fatpack::set_log_callback([&](fatpack::log_level, std::string_view line) {
    std::lock_guard<std::mutex> l(mu);
    if (line.find("opts_hostile") != std::string_view::npos) warnings.emplace_back(line);
  });
  auto r = jit.compile(req);
  fatpack::set_log_callback(nullptr);
  fatpack::set_log_level(fatpack::log_level::off);
  // The fake driver refuses an out-of-range CU_JIT_MAX_REGISTERS / CU_JIT_OPTIMIZATION_LEVEL: the
  // compile succeeding with only the valid option shows none was passed. (The parser before this
  // test passed -maxrregcount=100000 on to the driver.)
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  CHECK(jit_log_line("opts_hostile").find(" opts=lineinfo opts_hostile: ") != std::string::npos);
  CHECK(r->info_log.find("fatpack: invalid ptxas options not passed to the JIT: -maxrregcount=-5: not a register "
                         "count (1..255), -O99: not an optimization level (0..4), --maxrregcount=4294967296: not a "
                         "register count (1..255), -maxrregcount=100000: not a register count (1..255); ptxas "
                         "options no JIT takes, not passed: --warn-on-spills") != std::string::npos);
  {
    // What the driver does with such a value when it is passed (so the check above can fail).
    auto ctx = primary_context::retain(*req.drv, *req.dev);
    REQUIRE(ctx.has_value());
    scoped_context current(*req.drv, ctx->get());
    auto ptx = fatpack_test::read_file(fatpack_test::artifact("vadd.compute_80.ptx"));
    ptx.push_back(0);
    jit_options passed;
    passed.max_registers = 100000;
    auto refused = jit_link(*req.drv, fatpack::core::byte_span(ptx.data(), ptx.size()), "vadd", passed, std::nullopt);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().cuda_status == CUDA_ERROR_INVALID_VALUE);
  }
  std::lock_guard<std::mutex> l(mu);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("package 'opts_hostile'") != std::string::npos);
  CHECK(warnings[0].find("-maxrregcount=-5") != std::string::npos);
  jit.flush_stores();
}

#include "cache/key.hpp"
#include "fatpack/core/hex.hpp"

TEST_CASE("an LTO-IR group's JIT key: every part, the LTO-IR target, and nvJitLink whatever the PTX backend") {
  setenv("FATPACK_NVJITLINK", NVJITLINK_PATH, 0);
  auto entries = fatpack_test::lto_and_ptx_groups();
  for (auto& e : entries) e.module_name = "lto_key";
  REQUIRE(fatpack::add_package_file(fatpack_test::package_file("lto_key", entries)).ok());
  auto me = registry::instance().find_module("lto_key", "lto_key");
  REQUIRE(me.has_value());
  auto req = request_for(*me, "lto_key");
  REQUIRE(req.package->view.entries().at(req.entry).target.str() == "lto_90");
  const jit_key k = make_jit_key(req);
  CHECK(k.backend == "nvjitlink");  // cuLink is the PTX backend here: LTO-IR has only nvJitLink
  CHECK(k.str().find("|src=lto_90@") != std::string::npos);
  const auto& part1 = req.package->view.entries().at(req.entry + 1);
  CHECK(k.link_parts == fatpack::core::hex16(part1.raw_xxh3) + ":" + std::to_string(part1.raw_size));
  // Its PTX group's key differs (another first part, another target).
  jit_request ptx = req;
  ptx.entry = req.entry + 2;
  CHECK(make_jit_key(ptx).str() != k.str());
  const auto& lib = load_nvjitlink();
  if (!lib) {
    MESSAGE("skipped the cache key's library version: " << lib.error().message);
    return;
  }
  CHECK(jit_service::instance().cache_key_for(req).backend ==
        "nvjitlink-" + std::to_string((*lib)->major) + "." + std::to_string((*lib)->minor));
}

TEST_CASE("a piece's JIT key names its text and the whole entry as the package declares it") {
  auto me = ptx_module_with_options("piece_key", "vadd.compute_80.ptx", "piece_key", "");
  jit_request whole = request_for(me, "piece_key");
  const auto& e = whole.package->view.entries().at(whole.entry);
  const std::string entry = fatpack::core::hex16(e.raw_xxh3) + ":" + std::to_string(e.raw_size);
  auto piece = std::make_shared<jit_piece>();
  piece->xxh3 = 0xabc;
  piece->size = 42;
  piece->count = 2;
  jit_request one = whole;
  one.piece = piece;
  const std::string key = make_jit_key(one).str();
  CHECK_MESSAGE(key.find("|ptx=0000000000000abc:42|entry=" + entry + "|src=") != std::string::npos, key);
  CHECK(make_jit_key(one).str() == key);  // deterministic
  CHECK(make_jit_key(whole).str().find("|entry=") == std::string::npos);  // a whole entry's key: as before
  CHECK(fatpack::detail::cache::make_code_key(make_jit_key(one)).text.find("|entry=" + entry + "|") != std::string::npos);
}

TEST_CASE("nvJitLink gets the same options in its syntax: -maxrregcount=32 limits a real compile") {
  setenv("FATPACK_NVJITLINK", NVJITLINK_PATH, 0);
  const auto& lib = load_nvjitlink();
  if (!lib) {
    MESSAGE("skipped: " << lib.error().message);
    return;
  }
  auto bytes = fatpack_test::read_file(fatpack_test::artifact("regs.compute_80.ptx"));
  bytes.push_back(0);
  const fatpack::core::byte_span ptx(bytes.data(), bytes.size());
  // "ptxas info    : Used 32 registers, ..." in nvJitLink's verbose info log.
  auto registers_used = [](const std::string& log) {
    const auto at = log.find("Used ");
    return at == std::string::npos ? -1 : std::atoi(log.c_str() + at + 5);
  };
  bool unknown = false;
  auto free_run = nvjitlink_compile(**lib, {ptx}, "regs", jit_options{}, 90, fatpack::core::arch_variant::plain, unknown);
  REQUIRE_MESSAGE(free_run.has_value(), (free_run ? "" : free_run.error().message + "\n" + free_run.error().log));
  auto limited = nvjitlink_compile(**lib, {ptx}, "regs", parse_jit_options("-maxrregcount=32 -O3 -lineinfo"), 90,
                                   fatpack::core::arch_variant::plain, unknown);
  REQUIRE_MESSAGE(limited.has_value(), (limited ? "" : limited.error().message + "\n" + limited.error().log));
  INFO(free_run->info_log);
  INFO(limited->info_log);
  CHECK(registers_used(free_run->info_log) > 32);
  CHECK(registers_used(limited->info_log) > 0);
  CHECK(registers_used(limited->info_log) <= 32);
}

// The ports name images by XXH3 and size; a hash that collides (made on purpose: XXH3 resists no
// such attack) must never let a different image share the first one's package.
TEST_CASE("port image names: equal bytes share a name, a colliding hash with other bytes does not") {
  using fatpack::detail::image_names;
  image_names names;
  const std::vector<std::uint8_t> a{1, 2, 3, 4}, b{1, 2, 3, 5}, c{9, 9, 9, 9};
  const std::uint64_t same_hash = 0x1234;  // as if all three collided

  auto first = names.name_of(a.data(), a.size(), same_hash);
  CHECK(first.is_new);
  names.keep(a.data(), a.size(), same_hash);
  auto again = names.name_of(a.data(), a.size(), same_hash);
  CHECK_FALSE(again.is_new);
  CHECK(again.name == first.name);

  auto other = names.name_of(b.data(), b.size(), same_hash);
  CHECK(other.is_new);
  CHECK(other.name != first.name);
  names.keep(b.data(), b.size(), same_hash);
  CHECK(names.name_of(b.data(), b.size(), same_hash).name == other.name);
  CHECK(names.name_of(a.data(), a.size(), same_hash).name == first.name);

  auto third = names.name_of(c.data(), c.size(), same_hash);
  CHECK(third.is_new);
  CHECK(third.name != first.name);
  CHECK(third.name != other.name);
}

TEST_CASE("registry: add_image_in_place makes the package around the bytes, or copies where the room is short") {
  const auto cubin = fatpack_test::read_file(fatpack_test::artifact("vadd.sm_90.cubin"));
  constexpr std::size_t before = 16 * 1024;
  // The room after the cubin holds junk: the package's padding must become zeros.
  std::vector<std::uint8_t> buf(before + cubin.size() + 64, 0xEE);
  std::copy(cubin.begin(), cubin.end(), buf.begin() + before);
  auto keep = std::make_shared<int>(0);
  std::uint8_t* data = buf.data() + before;
  REQUIRE(registry::instance().add_image_in_place(keep, data, cubin.size(), before, 64, "in_place", "in_place").ok());
  auto me = registry::instance().find_module("in_place", "in_place");
  REQUIRE(me.has_value());
  const auto& view = me.value().package->view;
  const auto payload = view.stored_payload(me.value().entries.front());
  CHECK(payload.data == data);  // the bytes themselves, not a copy
  CHECK(payload.size == cubin.size());
  CHECK(view.bytes().data >= buf.data());
  CHECK(view.bytes().data + view.total_size() <= buf.data() + buf.size());
  CHECK(view.total_size() % 64 == 0);
  for (std::size_t i = cubin.size(); i < view.total_size() - (data - view.bytes().data); ++i) CHECK(data[i] == 0);
  CHECK(me.value().package->keep == keep);
  CHECK(view.verify().ok());
  auto loaded = fatpack::load_module("in_place", [] {
    fatpack::load_options o;
    o.package = "in_place";
    return o;
  }());
  CHECK(loaded.has_value());

  // No room before (or too little after): copied into a package of its own, as add_image does.
  std::vector<std::uint8_t> tight(cubin);
  REQUIRE(registry::instance().add_image_in_place(keep, tight.data(), tight.size(), 0, 0, "copied", "copied").ok());
  auto cme = registry::instance().find_module("copied", "copied");
  REQUIRE(cme.has_value());
  const auto cp = cme.value().package->view.stored_payload(cme.value().entries.front());
  CHECK(cp.data != tight.data());
  CHECK(std::equal(cp.data, cp.data + cp.size, cubin.begin(), cubin.end()));
}
