// Runtime tests in one process against the fake driver (tests/fakecuda): two devices, CC 9.0 and
// 8.6, driver CUDA 13.0. Covers selection end to end, the JIT path, fallback chains, policies,
// thread safety, RAII handles, the log trace, bare images, the registry, warm-up and the C API.
// Configurations that need a fresh process (no driver, no device, old driver, environment policies)
// are in runtime_process_test.cpp.
#include "test_support.hpp"

#include "fatpack/fatpack.h"
#include "fatpack/fatpack.hpp"

#include "fatpack/core/registry_record.hpp"

#include "fatpack/core/package.hpp"
#include "../../core/src/format/package_layout.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <chrono>
#include <cstdlib>
#include <future>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>

#include <dlfcn.h>

using namespace fatpack_test;
namespace core = fatpack::core;

extern "C" int fatpack_c_smoke(void);  // capi_smoke.c: the C header compiles as C

namespace {

// Before anything loads the driver: point the runtime at the fake and configure it.
const bool g_env = [] {
  setenv("FATPACK_LIBCUDA", FAKECUDA_PATH, 1);
  setenv("FAKECUDA_DEVICES", "90,86", 1);
  setenv("FAKECUDA_JIT_LOG", (temp_dir() + "/jit.log").c_str(), 1);
  // These tests count JITs; the disk cache (on by default) has its own suite in tests/cache.
  setenv("FATPACK_CACHE_DISABLE", "1", 1);
  // These tests count JITs and modules of whole-module loads (the children of runtime_process_test
  // too); kernel-granular JIT, the default, has its own suite (pieces_test.cpp).
  setenv("FATPACK_JIT_PIECES", "off", 1);
  for (const char* v : {"FATPACK_FORCE_PTX_JIT", "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT", "FATPACK_LOG",
                        "FAKECUDA_FAIL_JIT", "FAKECUDA_FAIL_LOAD", "FAKECUDA_MAX_PTX_ISA", "FAKECUDA_JIT_DELAY_MS"})
    unsetenv(v);
  return true;
}();

int fake_stat(const char* name, int arg = -1) {
  void* h = dlopen(FAKECUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h != nullptr);
  if (arg >= 0) {
    auto f = reinterpret_cast<int (*)(int)>(dlsym(h, name));
    REQUIRE(static_cast<bool>(f));
    return f(arg);
  }
  auto f = reinterpret_cast<int (*)()>(dlsym(h, name));
  REQUIRE(static_cast<bool>(f));
  return f();
}
int jit_count() { return fake_stat("fakecuda_jit_count"); }

void add(const std::string& package, const std::string& module, const std::vector<std::string>& items) {
  auto bytes = make_package(package, entries_of(module, items));
  auto s = fatpack::add_package_memory(bytes.data(), bytes.size(), package);
  REQUIRE_MESSAGE(s.ok(), s.error().what());
}

fatpack::module load(const std::string& module, int device = 0, std::optional<fatpack::policy> p = std::nullopt) {
  fatpack::load_options o;
  o.device = device;
  o.policy = p;
  auto m = fatpack::load_module(module, o);
  REQUIRE_MESSAGE(m.has_value(), (m ? "" : m.error().what()));
  return std::move(m.value());
}

// Sets an environment variable for the scope (the fake reads its failure knobs on every call).
struct scoped_env {
  std::string name;
  scoped_env(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~scoped_env() { unsetenv(name.c_str()); }
};

const std::vector<std::string> k_sass_ptx = {"vadd.sm_75.cubin", "vadd.sm_80.cubin", "vadd.sm_90.cubin",
                                             "vadd.compute_80.ptx"};

// The error of a load that must fail.
fatpack::error load_error(std::string_view module, const fatpack::load_options& o) {
  auto m = fatpack::load_module(module, o);
  REQUIRE_FALSE(m.has_value());
  return m.error();
}

}  // namespace

TEST_CASE("devices: CC, driver, PTX ISA limit, name, UUID per device") {
  REQUIRE(fatpack::init().ok());
  CHECK(fatpack::driver_library() == FAKECUDA_PATH);
  CHECK(fatpack::driver_version().value() == 13000);
  REQUIRE(fatpack::device_count().value() == 2);
  auto d0 = fatpack::device(0).value();
  auto d1 = fatpack::device(1).value();
  CHECK(d0.arch == 90);
  CHECK(d0.cc_major == 9);
  CHECK(d0.cc_minor == 0);
  CHECK(d1.arch == 86);
  CHECK(d0.max_ptx_isa == "9.0");
  CHECK(d0.driver_version == 13000);
  CHECK(d0.name.find("FakeCUDA") != std::string::npos);
  CHECK(d0.uuid_str.rfind("GPU-", 0) == 0);
  CHECK(d0.uuid != d1.uuid);
  auto bad = fatpack::device(2);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == fatpack::errc::invalid_device);
  // Only -1 means "the current context's device": -2 loaded on device 0 (C and C++ alike).
  add("ordinalpkg", "ordinal_vadd", {"vadd.sm_90.cubin", "vadd.sm_86.cubin"});
  for (int ordinal : {-2, -1000, std::numeric_limits<int>::min()}) {
    fatpack::load_options o;
    o.device = ordinal;
    const fatpack::error e = load_error("ordinal_vadd", o);
    CHECK(e.code == fatpack::errc::invalid_device);
    CHECK(e.message.find("-1 means the current context's device") != std::string::npos);
    fatpack_module* cm = nullptr;
    CHECK(fatpack_load_module("ordinal_vadd", nullptr, ordinal, &cm) == FATPACK_ERROR_INVALID_DEVICE);
    CHECK(cm == nullptr);
    fatpack::warm_options w;
    w.device = ordinal;
    auto h = fatpack::warm(w);
    CHECK(h.jobs() == 0);
    CHECK(h.wait().error().code == fatpack::errc::invalid_device);
  }
  fatpack::warm_options past;
  past.device = 2;  // two devices: 0 and 1
  CHECK(fatpack::warm(past).wait().error().code == fatpack::errc::invalid_device);
  CHECK(fatpack::load_module("ordinal_vadd").has_value());
  CHECK(fatpack::driver_entry_point("cuModuleLoadDataEx").has_value());
  auto missing = fatpack::driver_entry_point("cuNoSuchCall");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("cuNoSuchCall") != std::string::npos);
  // The default ABI is cuda.h 13.0's: cuCtxCreate is cuCtxCreate_v4, what a cast to cuda.h's
  // declaration calls (before, the default 12000 gave the CUDA 12 entry point, whose arguments
  // differ: a context made on device 0 whatever device was asked for).
  auto ctx_default = fatpack::driver_entry_point("cuCtxCreate");
  auto ctx_13 = fatpack::driver_entry_point("cuCtxCreate", 13000);
  auto ctx_12 = fatpack::driver_entry_point("cuCtxCreate", 12000);
  REQUIRE(ctx_default.has_value());
  REQUIRE(ctx_13.has_value());
  REQUIRE(ctx_12.has_value());
  CHECK(ctx_default.value() == ctx_13.value());
  CHECK(ctx_12.value() != ctx_13.value());
}

TEST_CASE("selection end to end: two devices, each gets its own entry") {
  add("e2e", "e2e_vadd", k_sass_ptx);
  auto m0 = load("e2e_vadd", 0);
  auto m1 = load("e2e_vadd", 1);
  CHECK(m0.report().target == "sm_90");
  CHECK_FALSE(m0.report().jit);
  CHECK_FALSE(m0.report().reason.empty());
  CHECK(m1.report().target == "sm_80");  // CC 8.6 runs sm_80 SASS (same major, lower minor)
  CHECK(m0.device() == 0);
  CHECK(m1.device() == 1);
  CHECK(m0.handle() != m1.handle());
  CHECK(m0.context() != m1.context());
  CHECK(m0.package_name() == "e2e");
  CHECK(m0.name() == "e2e_vadd");
  auto f = m0.function("vadd");
  REQUIRE(f.has_value());
  CHECK(*f != nullptr);
  CHECK(m0.function("saxpy").has_value());
  CHECK(m0.function("vadd").value() == *f);  // cached
  auto nope = m0.function("nope");
  REQUIRE_FALSE(nope);
  CHECK(nope.error().code == fatpack::errc::not_found);
  CHECK(nope.error().message.find("vadd") != std::string::npos);  // names the kernels it has
  CHECK_THROWS_AS(m0.function("nope").value(), fatpack::exception);

  // The same module on the same device is one loaded module.
  auto again = load("e2e_vadd", 0);
  CHECK(again.handle() == m0.handle());

  // The report ranks every entry; sm_75 cannot run on 9.0.
  bool saw_rejected_75 = false;
  for (const auto& c : m0.report().candidates)
    if (c.target == "sm_75") saw_rejected_75 = c.verdict == fatpack::verdict::rejected && !c.reason.empty();
  CHECK(saw_rejected_75);
  CHECK(m0.report().attempts.size() == 1);
  CHECK(m0.report().total_ms >= m0.report().load_ms);
}

TEST_CASE("PTX path: JIT through cuLink once, kernels from the fake cubin, reused after unload") {
  add("jitpkg", "jit_vadd", {"vadd.sm_75.cubin", "vadd.compute_80.ptx#jit"});
  int n0 = jit_count();
  int live0 = fake_stat("fakecuda_live_modules");
  {
    auto m = load("jit_vadd", 0);
    CHECK(m.report().jit);
    CHECK_FALSE(m.report().jit_reused);
    CHECK_FALSE(m.report().jit_from_cache);
    CHECK(m.report().target.rfind("compute_80", 0) == 0);
    CHECK(jit_count() == n0 + 1);
    CHECK(m.function("vadd").has_value());
    CHECK(m.function("saxpy").has_value());
    CHECK(m.kernels().size() == 2);
    CHECK(fake_stat("fakecuda_live_modules") == live0 + 1);
    auto m2 = load("jit_vadd", 0);
    CHECK(m2.handle() == m.handle());
    CHECK(jit_count() == n0 + 1);
  }
  // Every handle gone: the module is unloaded.
  CHECK(fake_stat("fakecuda_live_modules") == live0);
  auto m3 = load("jit_vadd", 0);
  CHECK(m3.report().jit);
  CHECK(m3.report().jit_reused);  // the SASS from the first JIT, no new compile
  CHECK_FALSE(m3.report().jit_from_cache);  // that JIT ran in this process (and there is no disk cache)
  CHECK(m3.report().trace().find("(JIT from PTX, SASS reused): ") != std::string::npos);
  CHECK(jit_count() == n0 + 1);
  // Device 1 (CC 8.6) cannot run sm_75 either: its own JIT for its own CC.
  auto m4 = load("jit_vadd", 1);
  CHECK(m4.report().jit);
  CHECK(jit_count() == n0 + 2);
  // The JIT log counts what happened (for cross-process tests).
  CHECK(count_lines(temp_dir() + "/jit.log") >= 2);
}

TEST_CASE("policy: force_ptx and sass_only per load, set_policy as process default") {
  add("polpkg", "pol_vadd", {"vadd.sm_90.cubin", "vadd.compute_80.ptx"});
  add("polptx", "pol_ptx_only", {"vadd.compute_80.ptx"});
  auto sass = load("pol_vadd", 0);
  CHECK_FALSE(sass.report().jit);
  auto forced = load("pol_vadd", 0, fatpack::policy::force_ptx);
  CHECK(forced.report().jit);
  CHECK(forced.report().policy == fatpack::policy::force_ptx);
  CHECK(forced.handle() != sass.handle());

  fatpack::load_options o;
  o.policy = fatpack::policy::sass_only;
  auto none = fatpack::load_module("pol_ptx_only", o);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == fatpack::errc::no_compatible_entry);
  CHECK(none.error().message.find("9.0") != std::string::npos);  // names the device's CC

  CHECK(fatpack::effective_policy() == fatpack::policy::prefer_sass);
  fatpack::set_policy(fatpack::policy::force_ptx);
  CHECK(fatpack::effective_policy() == fatpack::policy::force_ptx);
  fatpack::set_policy(fatpack::policy::prefer_sass);
}

TEST_CASE("fallback: the driver refuses the chosen SASS, the next candidate loads") {
  add("fbpkg", "fb_vadd", {"vadd.sm_90.cubin", "vadd.compute_90.ptx", "vadd.compute_80.ptx"});
  scoped_env fail("FAKECUDA_FAIL_LOAD", "sm_90");
  auto m = load("fb_vadd", 0);
  const auto& r = m.report();
  REQUIRE(r.attempts.size() == 2);
  CHECK(r.attempts[0].target == "sm_90");
  CHECK_FALSE(r.attempts[0].ok);
  CHECK(r.attempts[0].cuda_status == 200);  // CUDA_ERROR_INVALID_IMAGE
  CHECK(r.attempts[0].message.find("CUDA_ERROR_INVALID_IMAGE") != std::string::npos);
  CHECK(r.attempts[1].ok);
  CHECK(r.target.rfind("compute_90", 0) == 0);
  CHECK(r.trace().find("refused") != std::string::npos);
}

TEST_CASE("every candidate refused: load_failed lists each attempt with the driver's error and log") {
  add("allfailpkg", "allfail_vadd", {"vadd.sm_90.cubin", "vadd.compute_80.ptx#allfail"});
  scoped_env fail("FAKECUDA_FAIL_LOAD", "sm_90,jit");
  auto m = fatpack::load_module("allfail_vadd");
  REQUIRE_FALSE(m);
  CHECK(m.error().code == fatpack::errc::load_failed);
  CHECK(m.error().cuda_status == 200);
  const auto& msg = m.error().message;
  CHECK(msg.find("cannot load module 'allfail_vadd' of package 'allfailpkg' on device 0") != std::string::npos);
  CHECK(msg.find("entry 0 sm_90: cuModuleLoadDataEx: CUDA_ERROR_INVALID_IMAGE") != std::string::npos);
  CHECK(msg.find("entry 1 compute_80 (PTX ISA 9.0): cuModuleLoadDataEx (JIT output)") != std::string::npos);
  CHECK(m.error().log.find("FAKECUDA_FAIL_LOAD refuses sm_90") != std::string::npos);
}

TEST_CASE("fallback chain: the driver refuses a PTX ISA, an older PTX is used") {
  // The driver claims CUDA 13.0 (so the selector allows ISA 9.0) but its JIT stops at 8.5.
  add("isapkg", "isa_vadd", {"vadd.compute_90.ptx#isa", "vadd.compute_80.ptx@8.0"});
  scoped_env limit("FAKECUDA_MAX_PTX_ISA", "8.5");
  auto m = load("isa_vadd", 0);
  const auto& r = m.report();
  REQUIRE(r.attempts.size() == 2);
  CHECK(r.attempts[0].target == "compute_90 (PTX ISA 9.0)");
  CHECK(r.attempts[0].cuda_status == 222);  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
  CHECK(r.attempts[0].log.find("Unsupported .version 9.0") != std::string::npos);
  CHECK(r.attempts[1].ok);
  CHECK(r.target == "compute_80 (PTX ISA 8.0)");
}

TEST_CASE("selection refuses PTX newer than the driver's ISA before trying it") {
  add("isa99pkg", "isa99_vadd", {"vadd.compute_90.ptx@9.9", "vadd.compute_80.ptx"});
  auto m = load("isa99_vadd", 0);
  CHECK(m.report().target == "compute_80 (PTX ISA 9.0)");
  CHECK(m.report().attempts.size() == 1);
  bool rejected = false;
  for (const auto& c : m.report().candidates)
    if (c.target == "compute_90 (PTX ISA 9.9)") rejected = c.verdict == fatpack::verdict::rejected;
  CHECK(rejected);
}

TEST_CASE("JIT failure: an error value with the JIT log; not remembered") {
  add("failjitpkg", "failjit_vadd", {"vadd.compute_80.ptx#failjit"});
  {
    scoped_env fail("FAKECUDA_FAIL_JIT", "1");
    auto m = fatpack::load_module("failjit_vadd");
    REQUIRE_FALSE(m);
    CHECK(m.error().code == fatpack::errc::jit_failed);
    CHECK(m.error().cuda_status == 218);  // CUDA_ERROR_INVALID_PTX
    CHECK(m.error().log.find("FAKECUDA_FAIL_JIT") != std::string::npos);
    CHECK(std::string(m.error().what()).find("FAKECUDA_FAIL_JIT") != std::string::npos);
    CHECK_THROWS_AS(fatpack::load_module("failjit_vadd").value(), fatpack::exception);
  }
  auto ok = fatpack::load_module("failjit_vadd");
  CHECK(ok.has_value());
}

TEST_CASE("thread safety: 16 threads load one module, one JIT, one module") {
  add("mtpkg", "mt_vadd", {"vadd.compute_80.ptx#mt"});
  scoped_env delay("FAKECUDA_JIT_DELAY_MS", "200");
  int n0 = jit_count();
  int loads0 = fake_stat("fakecuda_module_loads");
  std::vector<std::thread> ts;
  std::mutex mu;
  std::set<fatpack::cu_module> handles;
  std::atomic<int> failures{0};
  std::vector<fatpack::module> keep;
  for (int i = 0; i < 16; ++i)
    ts.emplace_back([&] {
      auto m = fatpack::load_module("mt_vadd");
      if (!m) {
        ++failures;
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      handles.insert(m->handle());
      keep.push_back(std::move(m.value()));
    });
  for (auto& t : ts) t.join();
  CHECK(failures == 0);
  CHECK(handles.size() == 1);
  CHECK(jit_count() == n0 + 1);
  CHECK(fake_stat("fakecuda_module_loads") == loads0 + 1);
}

TEST_CASE("module handles: move-only RAII") {
  static_assert(!std::is_copy_constructible_v<fatpack::module>);
  static_assert(!std::is_copy_assignable_v<fatpack::module>);
  static_assert(std::is_nothrow_move_constructible_v<fatpack::module>);
  static_assert(std::is_nothrow_move_assignable_v<fatpack::module>);
  add("raiipkg", "raii_vadd", {"vadd.sm_90.cubin"});
  int live0 = fake_stat("fakecuda_live_modules");
  int ref0 = fake_stat("fakecuda_primary_refcount", 0);
  fatpack::module a = load("raii_vadd", 0);
  CHECK(fake_stat("fakecuda_live_modules") == live0 + 1);
  CHECK(fake_stat("fakecuda_primary_refcount", 0) == ref0 + 1);
  auto h = a.handle();
  fatpack::module b(std::move(a));
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(a.handle() == nullptr);
  CHECK(a.function("vadd").error().code == fatpack::errc::invalid_argument);
  CHECK(b.handle() == h);
  fatpack::module c;
  CHECK_FALSE(c);
  c = std::move(b);
  CHECK(c.handle() == h);
  fatpack::module& alias = c;
  c = std::move(alias);  // self-move keeps the module
  CHECK(c.handle() == h);
  CHECK(c.function("vadd").has_value());
  fatpack::module d = load("raii_vadd", 0);
  c = std::move(d);  // assigning over a handle of the same module: still loaded
  CHECK(fake_stat("fakecuda_live_modules") == live0 + 1);
  c.reset();
  CHECK(fake_stat("fakecuda_live_modules") == live0);
  CHECK(fake_stat("fakecuda_primary_refcount", 0) == ref0);
}

TEST_CASE("FATPACK_LOG trace: through the API callback") {
  add("logpkg", "log_vadd", {"vadd.sm_75.cubin", "vadd.sm_90.cubin", "vadd.compute_80.ptx"});
  std::vector<std::string> lines;
  std::mutex mu;
  fatpack::set_log_callback([&](fatpack::log_level, std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(line);
  });
  fatpack::set_log_level(fatpack::log_level::info);
  auto m = load("log_vadd", 0);
  fatpack::set_log_level(fatpack::log_level::off);
  fatpack::set_log_callback(nullptr);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  CHECK(all.find("module 'log_vadd' (package 'logpkg') on device 0") != std::string::npos);
  CHECK(all.find("PTX ISA <= 9.0, policy prefer_sass") != std::string::npos);
  CHECK(all.find("candidate entry 1 sm_90: chosen: ") != std::string::npos);
  CHECK(all.find("sm_75: rejected: ") != std::string::npos);
  CHECK(all.find("compute_80 (PTX ISA 9.0): usable: ") != std::string::npos);
  CHECK(all.find("try entry 1 sm_90: ok") != std::string::npos);
  CHECK(all.find("loaded entry 1 sm_90 (SASS)") != std::string::npos);
  CHECK(m.report().trace() + "\n" == all);
}

TEST_CASE("bare images: cubin, PTX and nvcc fatbin buffers the application hands in") {
  auto cubin = read_file(artifact("vadd.sm_90.cubin"));
  REQUIRE(fatpack::add_image(cubin.data(), cubin.size(), "img_cubin").ok());
  auto a = load("img_cubin", 0);
  CHECK(a.report().target == "sm_90");
  CHECK(a.package_name() == "img_cubin");

  auto ptx = read_file(artifact("vadd.compute_80.ptx"));
  REQUIRE(fatpack::add_image(ptx.data(), ptx.size(), "img_ptx", "img_pkg").ok());
  auto b = load("img_ptx", 0);
  CHECK(b.report().jit);
  CHECK(b.function("saxpy").has_value());

  for (const char* f : {"vadd.fatbin", "vadd.compressed.fatbin"}) {
    auto fat = read_file(artifact(f));
    std::string module = std::string("img_") + (f[5] == 'c' ? "cfatbin" : "fatbin");
    REQUIRE(fatpack::add_image(fat.data(), fat.size(), module).ok());
    auto c0 = load(module, 0);
    CHECK(c0.report().target == "sm_90");
    auto c1 = load(module, 1);
    CHECK(c1.report().target == "sm_80");
  }
  auto bad = fatpack::add_image(nullptr, 0, "x");
  CHECK(bad.error().code == fatpack::errc::invalid_argument);
  const char junk[] = "not a cubin";
  CHECK_FALSE(fatpack::add_image(junk, sizeof junk, "junk").ok());
}

TEST_CASE("registry: files, borrowed memory, embedded records, names and errors") {
  auto missing = fatpack::add_package_file("/nonexistent/app.fpk");
  CHECK(missing.error().code == fatpack::errc::io);
  CHECK(missing.error().message.find("/nonexistent/app.fpk") != std::string::npos);

  REQUIRE(fatpack::add_package_file(package_file("filepkg", entries_of("file_vadd", {"vadd.sm_90.cubin"}))).ok());
  CHECK(load("file_vadd").report().package == "filepkg");

  const char junk[] = "definitely not a package";
  auto bad = fatpack::add_package_memory(junk, sizeof junk, "junk");
  CHECK(bad.error().code == fatpack::errc::bad_package);
  CHECK(bad.error().reason == fatpack::fault::bad_magic);

  // A truncated package: bad_package, with core's finer reason kept in the error and its what().
  const auto whole = make_package("cutpkg", entries_of("cut_vadd", {"vadd.sm_90.cubin"}));
  auto cut = fatpack::add_package_memory(whole.data(), whole.size() / 2, "cut");
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().code == fatpack::errc::bad_package);
  CHECK(cut.error().reason == fatpack::fault::truncated);
  CHECK(std::string(cut.error().what()).rfind("fatpack: bad_package (truncated): ", 0) == 0);
  CHECK(cut.error().code_as_std() == fatpack::errc::bad_package);

  static const std::vector<std::uint8_t> borrowed = make_package("borrowpkg", entries_of("borrow_vadd", {"vadd.sm_90.cubin"}));
  REQUIRE(fatpack::add_package_memory(borrowed.data(), borrowed.size(), "borrowed", fatpack::ownership::borrow).ok());
  CHECK(load("borrow_vadd").report().package == "borrowpkg");

  // A record as `fatpack embed` writes it, registered the way a shared library's constructor does.
  static const std::vector<std::uint8_t> embedded = make_package("embpkg", entries_of("emb_vadd", {"vadd.sm_90.cubin"}));
  static const core::registry_record rec{core::registry_record_magic, core::registry_record_version, "embpkg",
                                         embedded.data(), embedded.data() + embedded.size()};
  fatpack_register_embedded(&rec);
  fatpack_register_embedded(&rec);  // twice: counted once
  auto e = load("emb_vadd");
  CHECK(e.report().package == "embpkg");
  {
    // A registered record's object may be dlclose()d and is not pinned: a library of its
    // uncompressed SASS gets the driver's own copy, never CU_LIBRARY_BINARY_IS_PRESERVED (packages
    // the runtime owns or pins do: context_test "library-preserved", unload_test).
    static const std::vector<std::uint8_t> plain =
        make_package("embplain", entries_of("emb_plain", {"vadd.sm_90.cubin"}), core::codec::none);
    static const core::registry_record plain_rec{core::registry_record_magic, core::registry_record_version,
                                                 "embplain", plain.data(), plain.data() + plain.size()};
    fatpack_register_embedded(&plain_rec);
    const int preserved = fake_stat("fakecuda_preserved_libraries");
    auto lib = fatpack::load_library("emb_plain");
    REQUIRE_MESSAGE(lib.has_value(), (lib ? std::string() : std::string(lib.error().what())));
    CHECK(fake_stat("fakecuda_preserved_libraries") == preserved);
    CHECK(lib->function("vadd").has_value());
  }
  auto pk = fatpack::packages().value();
  int embpkg = 0;
  for (const auto& p : pk) embpkg += p.name == "embpkg";
  CHECK(embpkg == 1);

  // The same bytes again: fine; a different package under a used name: refused.
  REQUIRE(fatpack::add_package_memory(embedded.data(), embedded.size(), "again").ok());
  auto other = make_package("embpkg", entries_of("emb_other", {"vadd.sm_80.cubin"}));
  auto clash = fatpack::add_package_memory(other.data(), other.size(), "clash");
  CHECK(clash.error().code == fatpack::errc::ambiguous);

  // Two embedded packages of one name and different bytes (two static libraries of kernels that
  // both took NAME kernels): the second is skipped, and a module of that name is ambiguous, not
  // silently the first one's (before: the first library's module was loaded, one warning said so).
  static const std::vector<std::uint8_t> dup_a = make_package("dupname", entries_of("dup_vadd", {"vadd.sm_90.cubin"}));
  // The second also holds a module the first has not: ambiguous too (before: not_found).
  static const std::vector<std::uint8_t> dup_b = [] {
    auto e = entries_of("dup_vadd", {"vadd.sm_80.cubin"});
    const auto only = entries_of("dup_only_b", {"vadd.sm_80.cubin"});
    e.insert(e.end(), only.begin(), only.end());
    return make_package("dupname", e);
  }();
  static const core::registry_record dup_rec_a{core::registry_record_magic, core::registry_record_version, "dupname",
                                               dup_a.data(), dup_a.data() + dup_a.size()};
  static const core::registry_record dup_rec_b{core::registry_record_magic, core::registry_record_version, "dupname",
                                               dup_b.data(), dup_b.data() + dup_b.size()};
  fatpack_register_embedded(&dup_rec_a);
  fatpack_register_embedded(&dup_rec_b);
  for (const char* package : {"", "dupname"}) {
    fatpack::load_options named;
    named.package = package;
    for (const char* module : {"dup_vadd", "dup_only_b"}) {
      CAPTURE(module);
      const fatpack::error e = load_error(module, named);
      CHECK(e.code == fatpack::errc::ambiguous);
      CHECK(e.message.find("package 'dupname': that name belongs to two different packages") != std::string::npos);
      CHECK(e.message.find("a different package named 'dupname' is already registered") != std::string::npos);
    }
  }
  fatpack::load_options other_name;
  other_name.package = "embpkg";
  CHECK(load_error("dup_only_b", other_name).code == fatpack::errc::not_found);  // not in the package named

  // Two packages of one name in one buffer would leave their modules unloadable (ambiguous even
  // when the package is named): refused as a whole, naming both.
  auto twins = make_package("twinpkg", entries_of("twin_vadd", {"vadd.sm_90.cubin"}));
  const auto twin2 = make_package("twinpkg", entries_of("twin_vadd", {"vadd.sm_80.cubin"}));
  twins.insert(twins.end(), twin2.begin(), twin2.end());
  auto twin = fatpack::add_package_memory(twins.data(), twins.size(), "twins");
  REQUIRE_FALSE(twin.ok());
  CHECK(twin.error().code == fatpack::errc::bad_package);
  CHECK(twin.error().message.find("a second package named 'twinpkg' (the first is twins)") != std::string::npos);
  CHECK(fatpack::load_module("twin_vadd").error().code == fatpack::errc::not_found);

  auto nf = fatpack::load_module("no_such_module");
  REQUIRE_FALSE(nf);
  CHECK(nf.error().code == fatpack::errc::not_found);
  CHECK(nf.error().message.find("embpkg [emb_vadd]") != std::string::npos);
  fatpack::load_options o;
  o.package = "no_such_package";
  CHECK(fatpack::load_module("emb_vadd", o).error().code == fatpack::errc::not_found);
  o.package = "embpkg";
  CHECK(fatpack::load_module("emb_vadd", o).has_value());

  // The same module name in two packages needs the package named.
  add("dup1", "dup_vadd", {"vadd.sm_90.cubin"});
  add("dup2", "dup_vadd", {"vadd.sm_80.cubin", "vadd.compute_80.ptx"});
  auto amb = fatpack::load_module("dup_vadd");
  CHECK(amb.error().code == fatpack::errc::ambiguous);
  o.package = "dup2";
  CHECK(fatpack::load_module("dup_vadd", o).value().report().jit);
}

TEST_CASE("warm-up: background compiles on the pool, loads find the SASS") {
  add("warmpkg", "warm_vadd", {"vadd.compute_80.ptx#warm"});
  add("warmpkg2", "warm_vadd2", {"vadd.sm_90.cubin", "vadd.sm_86.cubin"});
  scoped_env delay("FAKECUDA_JIT_DELAY_MS", "100");
  int n0 = jit_count();
  fatpack::warm_options o;
  o.package = "warmpkg";
  auto h = fatpack::warm(o);
  CHECK(h.jobs() == 2);  // one module, two devices of different CC
  REQUIRE(h.wait().ok());
  CHECK(h.done());
  CHECK(jit_count() == n0 + 2);
  auto m = load("warm_vadd", 1);
  CHECK(m.report().jit);
  CHECK(m.report().jit_reused);
  CHECK(jit_count() == n0 + 2);
  o.package = "warmpkg2";
  CHECK(fatpack::warm(o).jobs() == 0);  // SASS for both devices: nothing to compile
}

TEST_CASE("plan_module: the selector's answer without loading") {
  add("planpkg", "plan_vadd", k_sass_ptx);
  int loads0 = fake_stat("fakecuda_module_loads");
  auto r = fatpack::plan_module("plan_vadd").value();
  CHECK(r.target == "sm_90");
  CHECK_FALSE(r.loaded);
  CHECK(r.candidates.size() == 4);
  CHECK(r.trace().find("planned entry 2 sm_90") != std::string::npos);
  CHECK(fake_stat("fakecuda_module_loads") == loads0);
}

TEST_CASE("C API: load, function, report, errors") {
  add("capipkg", "capi_vadd", k_sass_ptx);
  fatpack_module* m = nullptr;
  REQUIRE(fatpack_load_module("capi_vadd", nullptr, 0, &m) == FATPACK_OK);
  REQUIRE(m != nullptr);
  struct CUfunc_st* f = nullptr;
  CHECK(fatpack_module_function(m, "vadd", &f) == FATPACK_OK);
  CHECK(f != nullptr);
  CHECK(fatpack_module_handle(m) != nullptr);
  CHECK(fatpack_module_context(m) != nullptr);
  CHECK(fatpack_module_device(m) == 0);
  CHECK(fatpack_module_jit(m) == 0);
  CHECK(std::string(fatpack_module_report(m)).find("loaded entry 2 sm_90") != std::string::npos);
  CHECK(fatpack_module_function(m, "nope", &f) == FATPACK_ERROR_NOT_FOUND);
  CHECK(std::string(fatpack_last_error()).find("nope") != std::string::npos);
  CHECK(fatpack_last_cuda_status() == 500);
  fatpack_module_release(m);
  fatpack_module_release(nullptr);

  fatpack_module* j = nullptr;
  REQUIRE(fatpack_load_module_with_policy("capi_vadd", "capipkg", 1, FATPACK_POLICY_FORCE_PTX, &j) == FATPACK_OK);
  CHECK(fatpack_module_jit(j) == 1);
  fatpack_module_release(j);

  fatpack_module* none = reinterpret_cast<fatpack_module*>(1);
  CHECK(fatpack_load_module("capi_missing", nullptr, -1, &none) == FATPACK_ERROR_NOT_FOUND);
  CHECK(none == nullptr);
  CHECK(std::string(fatpack_last_error()).find("capi_missing") != std::string::npos);
  CHECK(fatpack_load_module(nullptr, nullptr, 0, &none) == FATPACK_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(fatpack_status_name(FATPACK_ERROR_NO_DRIVER)) == "FATPACK_ERROR_NO_DRIVER");

  int n = 0;
  CHECK(fatpack_device_count(&n) == FATPACK_OK);
  CHECK(n == 2);
  fatpack_device_info info = FATPACK_DEVICE_INFO_INIT;
  CHECK(info.struct_size == sizeof(fatpack_device_info));
  CHECK(fatpack_get_device_info(1, &info) == FATPACK_OK);
  CHECK(info.struct_size == sizeof(fatpack_device_info));
  CHECK(info.ordinal == 1);
  CHECK(info.cc_major == 8);
  CHECK(info.cc_minor == 6);
  CHECK(std::string(info.max_ptx_isa) == "9.0");
  CHECK(fatpack_get_device_info(7, &info) == FATPACK_ERROR_INVALID_DEVICE);
  // Versioned struct: a struct_size below the first version is refused before anything is written.
  for (std::size_t small : {std::size_t{0}, offsetof(fatpack_device_info, name), sizeof(fatpack_device_info) - 1}) {
    fatpack_device_info t = FATPACK_DEVICE_INFO_INIT;
    t.struct_size = small;
    t.cc_major = -7;
    CHECK(fatpack_get_device_info(0, &t) == FATPACK_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(fatpack_last_error()).find("struct_size") != std::string::npos);
    CHECK(t.cc_major == -7);
  }
  CHECK(fatpack_get_device_info(0, nullptr) == FATPACK_ERROR_INVALID_ARGUMENT);
  // A newer caller's larger struct: the known fields are filled, the bytes after them left alone.
  struct newer {
    fatpack_device_info d;
    int added_later;
  } big{};
  big.d.struct_size = sizeof big;
  big.added_later = 4242;
  CHECK(fatpack_get_device_info(0, &big.d) == FATPACK_OK);
  CHECK(big.d.struct_size == sizeof big);
  CHECK(big.d.cc_major == 9);
  CHECK(std::string(big.d.name).size() > 0);
  CHECK(big.added_later == 4242);
  int v = 0;
  CHECK(fatpack_driver_version(&v) == FATPACK_OK);
  CHECK(v == 13000);
  void* fn = nullptr;
  CHECK(fatpack_driver_entry_point("cuLinkCreate", 12000, &fn) == FATPACK_OK);
  CHECK(fn != nullptr);

  auto cubin = read_file(artifact("vadd.sm_86.cubin"));
  CHECK(fatpack_add_image(cubin.data(), cubin.size(), "capi_img", nullptr) == FATPACK_OK);
  CHECK(fatpack_load_module("capi_img", nullptr, 1, &m) == FATPACK_OK);
  fatpack_module_release(m);
  CHECK(fatpack_warm_all(-1) == FATPACK_OK);
  CHECK(fatpack_warm_wait() == FATPACK_OK);

  CHECK(fatpack_c_smoke() == 0);
}

TEST_CASE("version: the headers, the C and C++ functions and the CMake project agree") {
  // FATPACK_PROJECT_VERSION_*: project(fatpack VERSION ...) of the top CMakeLists.txt (tests/runtime).
  CHECK(FATPACK_VERSION_MAJOR == FATPACK_PROJECT_VERSION_MAJOR);
  CHECK(FATPACK_VERSION_MINOR == FATPACK_PROJECT_VERSION_MINOR);
  CHECK(FATPACK_VERSION_PATCH == FATPACK_PROJECT_VERSION_PATCH);
  const int expected = FATPACK_PROJECT_VERSION_MAJOR * 10000 + FATPACK_PROJECT_VERSION_MINOR * 100 + FATPACK_PROJECT_VERSION_PATCH;
  CHECK(FATPACK_VERSION_NUMBER == expected);
  CHECK(fatpack_version() == expected);
  CHECK(fatpack::version() == expected);
  CHECK(std::string(FATPACK_VERSION_STRING) == FATPACK_PROJECT_VERSION);
  CHECK(std::string(fatpack_version_string()) == FATPACK_PROJECT_VERSION);
  CHECK(std::string(fatpack::version_string()) == FATPACK_PROJECT_VERSION);
}

TEST_CASE("verdict and cache mode names") {
  CHECK(std::string(fatpack::verdict_name(fatpack::verdict::chosen)) == "chosen");
  CHECK(std::string(fatpack::verdict_name(fatpack::verdict::usable)) == "usable");
  CHECK(std::string(fatpack::verdict_name(fatpack::verdict::rejected)) == "rejected");
  CHECK(std::string(fatpack::cache_mode_name(fatpack::cache_mode::read_write)) == "read-write");
  CHECK(std::string(fatpack::cache_mode_name(fatpack::cache_mode::read_only)) == "read-only");
  CHECK(std::string(fatpack::cache_mode_name(fatpack::cache_mode::memory_only)) == "memory-only");
  CHECK(std::string(fatpack::cache_mode_name(fatpack::cache_mode::disabled)) == "disabled");
  CHECK(std::string(fatpack_cache_mode_name(FATPACK_CACHE_MODE_READ_WRITE)) == "read-write");
  CHECK(std::string(fatpack_cache_mode_name(FATPACK_CACHE_MODE_READ_ONLY)) == "read-only");
  CHECK(std::string(fatpack_cache_mode_name(FATPACK_CACHE_MODE_MEMORY_ONLY)) == "memory-only");
  CHECK(std::string(fatpack_cache_mode_name(FATPACK_CACHE_MODE_DISABLED)) == "disabled");
  CHECK(std::string(fatpack_cache_mode_name(42)) == "unknown");
}

TEST_CASE("a compressed SASS entry whose decoded bytes miss raw_xxh3 never reaches the driver") {
  // A forged package: the stored bytes and their checksum are intact, raw_xxh3 is not (resealed, so
  // the tables checksum holds). `fatpack verify` rejects it; so must the SASS load path.
  namespace layout = core::layout;
  auto bytes = make_package("forgedraw", entries_of("forged_raw_vadd", {"vadd.sm_90.cubin"}), core::codec::lz4);
  const std::uint64_t table = layout::get64(&bytes[layout::h_entry_offset]);
  const std::size_t field = std::size_t(table) + layout::e_raw_xxh3;
  layout::put64(&bytes[field], layout::get64(&bytes[field]) ^ 1);
  const std::uint64_t end = layout::get64(&bytes[layout::h_string_offset]) + layout::get64(&bytes[layout::h_string_size]);
  layout::put64(&bytes[layout::h_tables_xxh3], 0);
  layout::put64(&bytes[layout::h_tables_xxh3], core::xxh3(core::byte_span(bytes.data(), std::size_t(end))));
  auto pv = core::package_view::parse(core::byte_span(bytes.data(), bytes.size()), "forged");
  REQUIRE(pv);
  CHECK_FALSE(pv->verify());
  REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "forgedraw").ok());
  fatpack::load_options o;
  o.device = 0;
  auto m = fatpack::load_module("forged_raw_vadd", o);
  REQUIRE_FALSE(m);
  CHECK(std::string(m.error().what()).find("raw data checksum mismatch") != std::string::npos);
}

// Separate compilation (nvcc -rdc=true; docs/format.md §4.1). rdc_kernel.cu's kernel calls
// rdc_scale from rdc_device.cu: their relocatable PTX is a link group the JIT links with cuLink, and
// the fake driver's cuLink refuses an extern no input defines, as nvlink does.
namespace {

std::vector<core::entry_input> rdc_group(const std::string& module, const std::string& device_tag = "") {
  auto parts = entries_of(module, {"rdc_kernel.compute_90.rdc.ptx",
                                   "rdc_device.compute_90.rdc.ptx" + (device_tag.empty() ? "" : "#" + device_tag)});
  for (std::size_t k = 0; k < parts.size(); ++k) {
    parts[k].link_part = static_cast<std::uint16_t>(k);
    parts[k].link_parts = 2;
  }
  return parts;
}

}  // namespace

TEST_CASE("separate compilation: a link group of relocatable PTX is JIT-linked as one module") {
  auto bytes = make_package("rdcpkg", rdc_group("rdc_mod"));
  REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "rdcpkg").ok());
  const int n0 = jit_count();
  auto m = load("rdc_mod", 0);
  CHECK(m.report().jit);
  CHECK(m.report().target == "compute_90 (PTX ISA 9.0) [2 linked parts]");
  CHECK(m.report().candidates.size() == 1);  // the group is one candidate
  CHECK(m.function("rdc_saxpy").has_value());
  CHECK(jit_count() == n0 + 1);  // one link of both parts

  // One part alone is relocatable PTX with an unresolved call: the JIT refuses it with the
  // linker's log, and the load fails naming the entry (never a module without rdc_scale).
  auto alone = entries_of("rdc_alone", {"rdc_kernel.compute_90.rdc.ptx"});
  auto b2 = make_package("rdcalone", alone);
  REQUIRE(fatpack::add_package_memory(b2.data(), b2.size(), "rdcalone").ok());
  auto bad = fatpack::load_module("rdc_alone");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == fatpack::errc::jit_failed);
  CHECK(bad.error().log.find("Undefined reference to '_Z9rdc_scalef'") != std::string::npos);
}

TEST_CASE("separate compilation: the JIT key covers every part of a link group") {
  // Same first part, different second part: two compiles. A key of the first part alone would
  // hand the second package the first one's SASS.
  auto a = make_package("rdckey_a", rdc_group("rdckey_a", "second part a"));
  auto b = make_package("rdckey_b", rdc_group("rdckey_b", "second part b"));
  REQUIRE(fatpack::add_package_memory(a.data(), a.size(), "a").ok());
  REQUIRE(fatpack::add_package_memory(b.data(), b.size(), "b").ok());
  const int n0 = jit_count();
  auto ma = load("rdckey_a", 0);
  auto mb = load("rdckey_b", 0);
  CHECK_FALSE(mb.report().jit_reused);
  CHECK(jit_count() == n0 + 2);
}

TEST_CASE("separate compilation: a relocatable cubin is refused at load and the next candidate loads") {
  // What pack and verify refuse, in a package made another way: the runtime must not hand it to the
  // driver (which loads it and then finds no kernel), but fall to the link group.
  core::entry_input reloc;
  reloc.target = {core::entry_kind::sass, 90, core::arch_variant::plain};
  reloc.module_name = "rdc_reloc";
  reloc.kernels = {"rdc_saxpy"};
  reloc.raw = read_file(artifact("rdc_kernel.sm_90.rdc.cubin"));
  reloc.origin = "rdc_kernel.sm_90.rdc.cubin";
  auto entries = rdc_group("rdc_reloc");
  entries.insert(entries.begin(), reloc);
  auto bytes = make_package("rdcreloc", entries);
  REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "rdcreloc").ok());
  auto m = load("rdc_reloc", 0);
  const auto& r = m.report();
  REQUIRE(r.attempts.size() == 2);
  CHECK(r.attempts[0].target == "sm_90");
  CHECK_FALSE(r.attempts[0].ok);
  CHECK(r.attempts[0].message.find("relocatable cubin") != std::string::npos);
  CHECK(r.attempts[0].message.find("_Z9rdc_scalef") != std::string::npos);
  CHECK(r.attempts[1].ok);
  CHECK(r.jit);
  CHECK(m.function("rdc_saxpy").has_value());
  // A bare relocatable cubin handed in by the application is refused when it is added.
  auto added = fatpack::add_image(reloc.raw.data(), reloc.raw.size(), "rdc_bare");
  REQUIRE_FALSE(added.ok());
  CHECK(added.error().message.find("relocatable cubin") != std::string::npos);
  CHECK(added.error().message.find("_Z9rdc_scalef") != std::string::npos);
}

// Kernels by C++ name (docs/runtime.md "Kernels by name"): real nvcc output of tests/kernels/names.cu,
// SASS and PTX (through the fake JIT), as a module, a library and through the C API. The fake driver
// knows only the symbols (mangled names), as the real one does, so every success below means the
// resolved symbol reached cuModuleGetFunction / cuLibraryGetKernel.
namespace {
const std::vector<std::string> k_names_entries = {"names.sm_90.cubin", "names.compute_90.ptx"};
const char* const k_affine_f = "_ZN5mylib6affineIfLi256EEEvPKT_PS1_i";
}  // namespace

TEST_CASE("kernels by name: mangled, demangled with and without parameters, spelled differently") {
  add("names_pkg", "names", k_names_entries);
  for (auto pol : {fatpack::policy::prefer_sass, fatpack::policy::force_ptx}) {
    CAPTURE(static_cast<int>(pol));
    auto m = load("names", 0, pol);
    CHECK(m.report().jit == (pol == fatpack::policy::force_ptx));
    auto by_symbol = m.function(k_affine_f);
    REQUIRE_MESSAGE(by_symbol.has_value(), by_symbol.error().what());
    for (const char* q : {"mylib::affine<float, 256>", "mylib::affine<float,256>", "void mylib::affine<float, 256>(float const*, float*, int)",
                          "mylib::affine<float, 256>(const float*, float*, int)",
                          "  mylib::affine < float , 256 > ( const float * in , float * out , const int n ) ",
                          "mylib::affine(const float*, float*, int)"}) {
      CAPTURE(q);
      auto f = m.function(q);
      REQUIRE_MESSAGE(f.has_value(), f.error().what());
      CHECK(*f == *by_symbol);
    }
    auto d = m.function("mylib::scale(double*, double)");
    REQUIRE(d.has_value());
    CHECK(*d == m.function("_ZN5mylib5scaleEPdd").value());
    CHECK(*d != m.function("mylib::scale(float*, float)").value());
    CHECK(m.function("plain_c").has_value());
    CHECK(m.function("scale_c").has_value());
    CHECK(m.function("mylib::fill(volatile int*, const int&)").has_value());
    CHECK(m.function("mylib::nested<mylib::vec<mylib::vec<float>>>").has_value());
    CHECK(m.function("(anonymous namespace)::hidden").has_value());  // a local symbol in the cubin
    CHECK(m.function("apply").has_value());                           // templated on a lambda's type
  }
}

TEST_CASE("kernels by name: ambiguous, not found and hostile names are errors naming the module") {
  add("names_err", "names_e", k_names_entries);
  auto m = load("names_e", 0);
  auto amb = m.function("mylib::scale");
  REQUIRE(!amb.has_value());
  CHECK(amb.error().code == fatpack::errc::ambiguous);
  const std::string a = amb.error().message;
  CHECK(a.find("kernel 'mylib::scale' in module 'names_e' (package 'names_err', sm_90) on device 0") == 0);
  CHECK(a.find(": ambiguous: 2 kernels have that name: ") != std::string::npos);
  CHECK(a.find("mylib::scale(float*, float) [_ZN5mylib5scaleEPff]") != std::string::npos);
  CHECK(a.find("mylib::scale(double*, double) [_ZN5mylib5scaleEPdd]") != std::string::npos);
  CHECK(a.find("; ask for one with its parameter list or by its mangled name") != std::string::npos);
  CHECK(a.find("driver") != std::string::npos);
  auto two = m.function("mylib::affine");
  REQUIRE(!two.has_value());
  CHECK(two.error().code == fatpack::errc::ambiguous);
  CHECK(two.error().message.find("mylib::affine<double, 128>(double const*, double*, int) [_ZN5mylib6affineIdLi128EEEvPKT_PS1_i]") !=
        std::string::npos);

  auto none = m.function("mylib::affine<float, 512>");
  REQUIRE(!none.has_value());
  CHECK(none.error().code == fatpack::errc::not_found);
  CHECK(none.error().cuda_status == 500);  // CUDA_ERROR_NOT_FOUND, as the driver says for an unknown name
  const std::string n = none.error().message;
  CHECK(n.find("kernel 'mylib::affine<float, 512>' in module 'names_e'") == 0);
  CHECK(n.find("the module has no kernel of that name; it has: ") != std::string::npos);
  CHECK(n.find("mylib::affine<float, 256>(float const*, float*, int)") != std::string::npos);
  CHECK(n.find("plain_c") != std::string::npos);
  CHECK(n.find(k_affine_f) == std::string::npos);  // demangled only
  CHECK(m.function("mylib::scale(int*, int)").error().code == fatpack::errc::not_found);

  CHECK(m.function("").error().code == fatpack::errc::invalid_argument);
  const std::string huge(100000, '<');
  auto h = m.function(huge);
  CHECK(h.error().code == fatpack::errc::invalid_argument);
  CHECK(h.error().message.size() < 1000);  // the name is cut in the message
  CHECK(h.error().message.find("100000 bytes") != std::string::npos);
  const std::string garbage("\x01\xff<<(::>)\0const", 14);
  auto g = m.function(garbage);
  CHECK(g.error().code == fatpack::errc::not_found);
  CHECK(g.error().message.find('\x01') == std::string::npos);
}

TEST_CASE("kernels by name: libraries and the C API") {
  add("names_lib", "names_l", k_names_entries);
  auto lib = fatpack::load_library("names_l");
  REQUIRE_MESSAGE(lib.has_value(), lib.error().what());
  auto k = lib->kernel("mylib::affine<float, 256>");
  REQUIRE_MESSAGE(k.has_value(), k.error().what());
  CHECK(*k == lib->kernel(k_affine_f).value());
  CHECK(lib->kernel("mylib::scale").error().code == fatpack::errc::ambiguous);
  CHECK(lib->kernel("mylib::nope").error().code == fatpack::errc::not_found);
  auto f = lib->function("mylib::scale(float*, float)");
  CHECK_MESSAGE(f.has_value(), (f ? "" : f.error().what()));
  CHECK(lib->function("mylib::scale").error().code == fatpack::errc::ambiguous);

  fatpack_module* cm = nullptr;
  REQUIRE(fatpack_load_module("names_l", "names_lib", 0, &cm) == FATPACK_OK);
  struct CUfunc_st* cf = nullptr;
  CHECK(fatpack_module_function(cm, "mylib::scale(float*, float)", &cf) == FATPACK_OK);
  CHECK(cf != nullptr);
  CHECK(fatpack_module_function(cm, "mylib::scale", &cf) == FATPACK_ERROR_AMBIGUOUS);
  CHECK(std::string(fatpack_last_error()).find("[_ZN5mylib5scaleEPdd]") != std::string::npos);
  CHECK(fatpack_module_function(cm, "mylib::scales", &cf) == FATPACK_ERROR_NOT_FOUND);
  CHECK(std::string(fatpack_last_error()).find("mylib::fill(int volatile*, int const&)") != std::string::npos);
  fatpack_module_release(cm);
}

TEST_CASE("kernels by name: a symbol missing from the entry's kernel list is still asked of the driver") {
  auto entries = entries_of("names_short", {"names.sm_90.cubin"});
  REQUIRE(entries.size() == 1);
  auto& ks = entries[0].kernels;
  const auto gone = std::find(ks.begin(), ks.end(), "plain_c");
  REQUIRE(gone != ks.end());
  ks.erase(gone);  // the package's list misses a kernel the image has
  auto bytes = make_package("names_short_pkg", entries);
  REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "names_short_pkg").ok());
  auto m = load("names_short", 0);
  auto f = m.function("plain_c");
  CHECK_MESSAGE(f.has_value(), (f ? "" : f.error().what()));
  CHECK(m.function("mylib::scale(float*, float)").has_value());
  auto none = m.function("not_there");
  REQUIRE(!none.has_value());
  CHECK(none.error().code == fatpack::errc::not_found);
  CHECK(none.error().message.find("the module has no kernel of that name; it has: ") != std::string::npos);
  // A NUL byte is not cut short into another kernel's name ("plain_c").
  auto nul = m.function(std::string("plain_c\0x", 9));
  REQUIRE(!nul.has_value());
  CHECK(nul.error().code == fatpack::errc::not_found);
  auto lib = fatpack::load_library("names_short");
  REQUIRE(lib.has_value());
  CHECK(lib->kernel("plain_c").has_value());
  CHECK(lib->kernel("not_there").error().code == fatpack::errc::not_found);
}

TEST_CASE("kernels by name: threads looking up by C++ name at once share one demangled list") {
  add("names_thr", "names_t", k_names_entries);
  auto m = load("names_t", 0);
  auto lib = fatpack::load_library("names_t");
  REQUIRE(lib.has_value());
  const auto want = m.function(k_affine_f).value();
  const auto want_k = lib->kernel(k_affine_f).value();
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        // Several spellings of one name, from every thread at once.
        const std::string q = (i + t) % 2 ? "mylib::affine<float, 256>" : "mylib::affine<float," + std::string(i % 7, ' ') + "256>";
        auto f = m.function(q);
        auto k = lib->kernel(q);
        if (!f || *f != want || !k || *k != want_k) ++wrong;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("a log callback that calls fatpack again on the path that warned does not deadlock") {
  // The warnings said once per process (an unknown FATPACK_JIT_PIECES, FATPACK_JIT_PIECE_GROUPS or
  // FATPACK_JIT_BACKEND, an nvJitLink that does not load) were emitted inside std::call_once: a log
  // callback that loaded a module again re-entered the call_once running on its own thread.
  add("reenterpkg", "reenter_vadd", {"vadd.compute_80.ptx#reenter"});
  scoped_env pieces("FATPACK_JIT_PIECES", "no-such-policy");
  const fatpack::log_level level = fatpack::get_log_level();
  fatpack::set_log_level(fatpack::log_level::warn);
  std::atomic<int> depth{0}, lines{0};
  fatpack::set_log_callback([&](fatpack::log_level, std::string_view line) {
    if (line.find("FATPACK_JIT_PIECES") == std::string_view::npos) return;
    ++lines;
    if (depth++ == 0) (void)fatpack::load_module("reenter_vadd");  // the path that is warning, again
  });
  auto loaded = std::async(std::launch::async, [] { return fatpack::load_module("reenter_vadd").has_value(); });
  if (loaded.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    std::fprintf(stderr, "runtime_test: a log callback re-entering fatpack deadlocked\n");
    std::_Exit(1);
  }
  CHECK(loaded.get());
  CHECK(lines == 1);
  fatpack::set_log_callback(nullptr);
  fatpack::set_log_level(level);
}
