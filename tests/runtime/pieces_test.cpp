// Kernel-granular JIT (runtime/src/load/pieces.hpp, docs/runtime.md "Kernel-granular JIT") against the
// fake driver: real nvcc PTX (tests/split/varied.cu: templates, printf, assert, shared and lone
// device variables, function pointers, virtual calls, textures, surfaces) loaded in pieces; a kernel
// loads only its own piece; globals are found in the piece that defines them; what stays whole and
// why; the port loads whole; a piece loaded while a stream is captured; cross-process: a later process
// reads only the pieces it uses, and a process may exit while pieces still compile.
#include "test_support.hpp"

#include "fatpack/fatpack.h"
#include "fatpack/fatpack.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <sstream>

#include <dlfcn.h>

using namespace fatpack_test;

namespace {

const bool g_env = [] {
  setenv("FATPACK_LIBCUDA", FAKECUDA_PATH, 1);
  setenv("FAKECUDA_DEVICES", "90", 1);
  setenv("FATPACK_CACHE_DISABLE", "1", 1);  // JITs are counted; the cross-process cases set their own cache
  for (const char* v : {"FATPACK_JIT_PIECES", "FATPACK_JIT_PIECE_GROUPS", "FATPACK_FORCE_PTX_JIT", "FATPACK_LOG",
                        "FAKECUDA_FAIL_JIT", "FAKECUDA_JIT_DELAY_MS", "FAKECUDA_CAPTURING", "FAKECUDA_MISSING"})
    unsetenv(v);
  return true;
}();

int fake_stat(const char* name) {
  void* h = dlopen(FAKECUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h != nullptr);
  auto f = reinterpret_cast<int (*)()>(dlsym(h, name));
  REQUIRE(static_cast<bool>(f));
  return f();
}
int jits() { return fake_stat("fakecuda_jit_count"); }
int live_modules() { return fake_stat("fakecuda_live_modules"); }

// varied.cu's PTX (nvcc -ptx -arch=sm_80) with a comment naming `tag` in its header, which every
// piece copies: other bytes in every piece and in the entry, so other keys (each case compiles afresh
// although the JIT service keeps results for the process, and the same entry's pieces share their
// keys by design).
std::vector<fatpack::core::entry_input> varied_entries(const std::string& tag,
                                                       const std::string& file = "split/varied.plain.sm_80.ptx") {
  auto bytes = read_file(artifact(file));
  const std::string c = "// " + tag + "\n";
  bytes.insert(bytes.begin(), c.begin(), c.end());
  auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), file, "varied");
  REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? std::string() : r.error().message));
  for (auto& e : r.value()) e.module_name = "varied";
  return std::move(r.value());
}

void add_varied(const std::string& name, const std::string& file = "split/varied.plain.sm_80.ptx") {
  auto bytes = make_package(name, varied_entries(name, file));
  auto s = fatpack::add_package_memory(bytes.data(), bytes.size(), name);
  REQUIRE_MESSAGE(s.ok(), s.error().what());
  REQUIRE(fatpack::init().ok());  // the driver (the fake) is loaded: its counters can be read
}

fatpack::module load(const std::string& package, std::optional<fatpack::jit_pieces> pieces = std::nullopt) {
  fatpack::load_options o;
  o.package = package;
  o.device = 0;
  o.pieces = pieces;
  auto m = fatpack::load_module("varied", o);
  REQUIRE_MESSAGE(m.has_value(), (m ? "" : m.error().what()));
  return std::move(m.value());
}

// The 12 pieces varied.cu splits into (docs/splitting.md; tests/split checks the split itself).
const std::vector<std::string> all_kernels = {
    "_Z5scaleIfEvPT_S0_", "_Z5scaleIdEvPT_S0_", "_Z7count_aPi", "_Z7count_bPi", "_Z5alonePi", "_Z4saysi",
    "_Z6checksPKi", "_Z7twice_kPf", "_Z9via_tablePfi", "_Z11via_pointerPfi", "_Z11make_squarePP5Shapef",
    "_Z9call_areaPKP5ShapePf", "_Z5ext_aPf", "_Z5ext_bPf", "_Z8tex_readyPf", "_Z10surf_writey"};
constexpr int pieces_of_varied = 12;

}  // namespace

TEST_CASE("on demand: the load compiles one piece; a kernel compiles and loads only its own piece") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::on_demand);
  add_varied("pv_demand");
  const int j0 = jits(), m0 = live_modules();
  auto m = load("pv_demand");
  const auto& r = m.report();
  INFO(r.trace());
  CHECK(r.loaded);
  CHECK(r.jit);
  CHECK(r.pieces.find("12 pieces (per kernel, the package's plan), compiled on demand") == 0);
  CHECK(r.trace().find("kernel-granular JIT: 12 pieces") != std::string::npos);
  CHECK(m.handle() == nullptr);  // no single CUmodule
  CHECK(m.kernels().size() == all_kernels.size());
  // The load compiled the smallest piece (the driver takes this PTX) and loaded nothing yet.
  CHECK(jits() == j0 + 1);
  CHECK(live_modules() == m0);

  // count_a and count_b share a __device__ variable: one piece, one compile, one module.
  REQUIRE(m.function("_Z7count_aPi").has_value());
  CHECK(jits() == j0 + 2);
  CHECK(live_modules() == m0 + 1);
  REQUIRE(m.function("_Z7count_bPi").has_value());
  CHECK(jits() == j0 + 2);
  CHECK(live_modules() == m0 + 1);
  // By C++ name too (kernel lookup resolves it to the symbol first).
  REQUIRE(m.function("alone").has_value());
  CHECK(jits() == j0 + 3);
  CHECK(live_modules() == m0 + 2);
  // The probe's piece was compiled at load: asking for its kernel loads it without another JIT.
  REQUIRE(m.function("_Z10surf_writey").has_value());
  CHECK(jits() == j0 + 3);
  CHECK(live_modules() == m0 + 3);

  // Globals: in the piece that defines them (counter_shared: count_a's, already loaded).
  std::uint32_t v = 41, back = 0;
  REQUIRE(m.set_global_bytes("counter_shared", &v, sizeof v).ok());
  REQUIRE(m.get_global_bytes("counter_shared", &back, sizeof back).ok());
  CHECK(back == 41);
  CHECK(live_modules() == m0 + 3);
  auto g = m.global("counter_alone");
  REQUIRE_MESSAGE(g.has_value(), (g ? "" : g.error().what()));
  CHECK(g->size == 4);
  CHECK(live_modules() == m0 + 3);  // alone's piece holds it
  // A name no piece defines is not found, and loads nothing.
  auto none = m.global("no_such_variable");
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code == fatpack::errc::not_found);
  auto nk = m.function("no_such_kernel");
  REQUIRE_FALSE(nk.has_value());
  CHECK(nk.error().code == fatpack::errc::not_found);
  CHECK(live_modules() == m0 + 3);

  // Every kernel resolves; 12 pieces, 12 compiles, 12 modules.
  for (const auto& k : all_kernels) CHECK_MESSAGE(m.function(k).has_value(), k);
  CHECK(jits() == j0 + pieces_of_varied);
  CHECK(live_modules() == m0 + pieces_of_varied);
  // The handle's last reference unloads every piece.
  m = fatpack::module();
  CHECK(live_modules() == m0);
}

TEST_CASE("background: every piece compiles on the pool; wait_cache_refresh waits for them") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::background);
  CHECK(fatpack::get_jit_pieces() == fatpack::jit_pieces::background);
  add_varied("pv_background");
  const int j0 = jits();
  auto m = load("pv_background");
  CHECK(m.report().pieces.find("12 pieces (per kernel, the package's plan), compiling in the background") == 0);
  fatpack::wait_cache_refresh();
  CHECK(jits() == j0 + pieces_of_varied);
  for (const auto& k : all_kernels) CHECK_MESSAGE(m.function(k).has_value(), k);
  CHECK(jits() == j0 + pieces_of_varied);  // nothing compiled twice
}

TEST_CASE("FATPACK_JIT_PIECE_GROUPS: at most N pieces balanced by size") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::on_demand);
  fatpack::wait_cache_refresh();  // no pool thread reads the environment while it changes
  setenv("FATPACK_JIT_PIECE_GROUPS", "3", 1);
  add_varied("pv_groups");
  auto m = load("pv_groups");
  unsetenv("FATPACK_JIT_PIECE_GROUPS");
  CHECK(m.report().pieces.find("3 pieces (at most 3 balanced by size, split at load)") == 0);
  for (const auto& k : all_kernels) CHECK_MESSAGE(m.function(k).has_value(), k);
}

TEST_CASE("what stays whole: relocatable PTX, pieces off, the one-line port; the report says why") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::background);
  add_varied("pv_rdc", "split/varied.rdc.sm_80.ptx");
  {
    fatpack::load_options o;
    o.package = "pv_rdc";
    o.device = 0;
    auto m = fatpack::load_module("varied", o);
    // varied.cu built with -rdc: its PTX defines every function it calls (its externs are the JIT's
    // system calls), so it links alone; the loader does not split it, and says why.
    REQUIRE_MESSAGE(m.has_value(), (m ? "" : m.error().what()));
    CHECK(m->report().pieces.find("not split: ") == 0);
    CHECK(m->report().pieces.find("relocatable") != std::string::npos);
    CHECK(m->handle() != nullptr);
  }
  add_varied("pv_off");
  auto whole = load("pv_off", fatpack::jit_pieces::off);
  CHECK(whole.report().pieces.empty());
  CHECK(whole.handle() != nullptr);
  for (const auto& k : all_kernels) CHECK_MESSAGE(whole.function(k).has_value(), k);
  // The same module with pieces is another load (another handle), not the whole one.
  auto split = load("pv_off");
  CHECK(split.handle() == nullptr);
  // The port (fatpackModuleLoadData) hands out a CUmodule: it loads whole.
  add_varied("pv_port");
  fatpack_module* cm = nullptr;
  REQUIRE(fatpack_load_module("varied", "pv_port", 0, &cm) == FATPACK_OK);
  CHECK(fatpack_module_handle(cm) == nullptr);  // the C API's load follows the process setting
  fatpack_module_release(cm);
  CHECK(fatpack_set_jit_pieces(FATPACK_JIT_PIECES_OFF) == FATPACK_OK);
  CHECK(fatpack::get_jit_pieces() == fatpack::jit_pieces::off);
  CHECK(fatpack_set_jit_pieces(7) != FATPACK_OK);
  CHECK(fatpack::get_jit_pieces() == fatpack::jit_pieces::off);
}

TEST_CASE("a driver that refuses the PTX refuses it at load, naming the piece; not remembered") {
  // On demand: no pool thread compiles (and reads the fake's environment) while the test changes it.
  fatpack::set_jit_pieces(fatpack::jit_pieces::on_demand);
  add_varied("pv_fail");
  fatpack::wait_cache_refresh();
  setenv("FAKECUDA_FAIL_JIT", "1", 1);
  fatpack::load_options o;
  o.package = "pv_fail";
  o.device = 0;
  auto bad = fatpack::load_module("varied", o);
  unsetenv("FAKECUDA_FAIL_JIT");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == fatpack::errc::jit_failed);
  CHECK(bad.error().message.find("varied piece 12 of 12 (kernel _Z10surf_writey)") != std::string::npos);
  CHECK(!bad.error().log.empty());  // the JIT's log
  auto good = fatpack::load_module("varied", o);
  REQUIRE_MESSAGE(good.has_value(), (good ? "" : good.error().what()));
  for (const auto& k : all_kernels) CHECK_MESSAGE(good->function(k).has_value(), k);
}

TEST_CASE("a kernel first asked for while a stream is captured: its piece loads with the capture mode relaxed") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::on_demand);
  add_varied("pv_capture");
  auto m = load("pv_capture");
  fatpack::wait_cache_refresh();
  setenv("FAKECUDA_CAPTURING", "1", 1);
  auto f = m.function("_Z5ext_aPf");
  unsetenv("FAKECUDA_CAPTURING");
  CHECK_MESSAGE(f.has_value(), (f ? "" : f.error().what()));
}

TEST_CASE("processes: a later process reads only the pieces it uses; exiting while pieces compile is clean") {
  const std::string dir = temp_dir() + "/pieces-cache";
  REQUIRE(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
  const std::string pkg = package_file("pv_proc", varied_entries("proc"));
  const std::string log = temp_dir() + "/pieces-jit.log";
  std::remove(log.c_str());
  auto env = [&](std::map<std::string, std::string> extra) {
    std::map<std::string, std::string> e{{"FATPACK_LIBCUDA", FAKECUDA_PATH}, {"FAKECUDA_DEVICES", "90"},
                                         {"FATPACK_CACHE_PATH", dir}, {"FAKECUDA_JIT_LOG", log}};
    for (auto& kv : extra) e[kv.first] = kv.second;
    return e;
  };
  auto lines = [&] {
    std::size_t n = 0;
    for (char c : read_file(log)) n += c == '\n';
    return n;
  };
  const std::vector<std::string> probe_path{PROBE_PATH, "--package", pkg};
  auto with = [&](std::vector<std::string> args) {
    std::vector<std::string> a = probe_path;
    a.insert(a.end(), args.begin(), args.end());
    return a;
  };
  // 1. Exit while the pool compiles: 12 pieces of 300 ms on 2 threads; the program uses one kernel
  // and exits. Queued pieces are dropped, running ones finished: fewer than the 12 are compiled.
  auto t0 = std::chrono::steady_clock::now();
  auto first = run_child(with({"--threads", "2", "load", "varied", "kernel", "_Z5alonePi"}),
                         env({{"FATPACK_JIT_PIECES", "background"}, {"FAKECUDA_JIT_DELAY_MS", "300"}}));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(first.out << first.err);
  CHECK(first.status == 0);
  CHECK(first.has("kernel _Z5alonePi ok"));
  MESSAGE("exit with pieces still queued after " << s << " s");  // not a timed assertion: the count below is
  const std::size_t compiled = lines();
  CHECK(compiled >= 2);  // the probe's piece and alone's
  CHECK(compiled < std::size_t(pieces_of_varied));
  // 1b. Exit while the pool compiles, in a process whose own pieces were all cache hits (the probe's
  // and alone's, cached by 1): nothing was compiled on the loading thread, so only enqueue() can
  // have registered the exit flush. The 2 running compiles must finish (and be published) before
  // the process tears down; without the flush exit() destroys the driver's statics under them
  // (fatpack_hit_bench's rare SIGSEGV in cuLinkAddData).
  auto hits = run_child(with({"--threads", "2", "load", "varied", "kernel", "_Z5alonePi", "sleep", "100"}),
                        env({{"FATPACK_JIT_PIECES", "background"}, {"FAKECUDA_JIT_DELAY_MS", "300"}}));
  INFO(hits.out << hits.err);
  CHECK(hits.status == 0);
  CHECK(hits.has("kernel _Z5alonePi ok"));
  const std::size_t after_hits = lines();
  CHECK(after_hits >= compiled + 2);  // the two running on the pool at exit were finished
  CHECK(after_hits < std::size_t(pieces_of_varied));  // the queued ones were dropped
  // 2. On demand, with the cache: a process asking for two kernels whose pieces are cached reads
  // them and compiles nothing.
  auto second = run_child(with({"load", "varied", "kernel", "_Z5alonePi", "cache-stats"}),
                          env({{"FATPACK_JIT_PIECES", "on_demand"}, {"FATPACK_LOG", "info"}}));
  INFO(second.out << second.err);
  CHECK(second.status == 0);
  CHECK(lines() == after_hits);
  CHECK(second.has(" jits=0 "));
  // The report says the load's piece came from the JIT cache (it said neither reused nor from the
  // cache for a module in pieces, the default).
  CHECK(second.has(" reused=1 "));
  CHECK(second.has(" from_cache=1"));
  CHECK(second.err_has("(JIT from PTX, SASS reused from the JIT cache)"));
  // 3. Background with the cache: every piece ends up cached; a later process compiles nothing.
  auto third = run_child(with({"load", "varied", "cache-wait"}), env({{"FATPACK_JIT_PIECES", "background"}}));
  CHECK(third.status == 0);
  CHECK(lines() == std::size_t(pieces_of_varied));
  std::vector<std::string> every = {"load", "varied"};
  for (const auto& k : all_kernels) {
    every.push_back("kernel");
    every.push_back(k);
  }
  every.push_back("cache-stats");
  auto fourth = run_child(with(every), env({{"FATPACK_JIT_PIECES", "background"}}));
  INFO(fourth.out << fourth.err);
  CHECK(fourth.status == 0);
  CHECK(lines() == std::size_t(pieces_of_varied));
  CHECK(fourth.has(" jits=0 "));
}

TEST_CASE("on demand starts no JIT pool thread: the load's piece and each kernel's compile on the asking thread") {
  // Before: the load queued its probe piece on the pool and waited for it, so on_demand started the
  // pool's threads ("JIT pool: N threads") though it compiles nothing in the background.
  const std::string pkg = package_file("pv_nopool", varied_entries("nopool"));
  auto r = run_child({PROBE_PATH, "--package", pkg, "load", "varied", "kernel", "_Z5alonePi", "cache-stats"},
                     {{"FATPACK_LIBCUDA", FAKECUDA_PATH}, {"FAKECUDA_DEVICES", "90"}, {"FATPACK_CACHE_DISABLE", "1"},
                      {"FATPACK_JIT_PIECES", "on_demand"}, {"FATPACK_LOG", "debug"}});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.has("kernel _Z5alonePi ok"));
  CHECK(r.has(" jits=2 "));  // the load's piece and alone's
  CHECK(r.err_has("12 pieces (per kernel, the package's plan), compiled on demand"));
  CHECK_FALSE(r.err_has("JIT pool: "));
  // The same load in background mode does start it (so the line above can fail).
  auto b = run_child({PROBE_PATH, "--package", pkg, "load", "varied"},
                     {{"FATPACK_LIBCUDA", FAKECUDA_PATH}, {"FAKECUDA_DEVICES", "90"}, {"FATPACK_CACHE_DISABLE", "1"},
                      {"FATPACK_JIT_PIECES", "background"}, {"FATPACK_LOG", "debug"}});
  CHECK(b.status == 0);
  CHECK(b.err_has("JIT pool: "));
}

TEST_CASE("background: load_module queues a module's pieces in the module's order") {
  // A program asking for kernels one after another in the order they are declared finds the first
  // ones compiling already. On one pool thread with a 50 ms fake JIT the compiles run in the order
  // queued; the loading thread compiles the smallest piece itself (or takes over the next one).
  const std::string pkg = package_file("pv_module_order", varied_entries("module-order"));
  const std::string log = temp_dir() + "/pieces-module-order.log";
  std::remove(log.c_str());
  auto r = run_child({PROBE_PATH, "--package", pkg, "--threads", "1", "load", "varied", "cache-wait"},
                     {{"FATPACK_LIBCUDA", FAKECUDA_PATH}, {"FAKECUDA_DEVICES", "90"}, {"FAKECUDA_JIT_LOG", log},
                      {"FAKECUDA_JIT_DELAY_MS", "50"}, {"FATPACK_JIT_PIECES", "background"}, {"FATPACK_CACHE_DISABLE", "1"}});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const auto bytes = read_file(log);
  const std::string text(bytes.begin(), bytes.end());
  INFO(text);
  std::vector<int> order;  // piece numbers in the order their compiles finished
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(" piece ");
    REQUIRE(at != std::string::npos);
    order.push_back(std::atoi(line.c_str() + at + 7));
  }
  REQUIRE(order.size() == pieces_of_varied);
  // The pool's compiles, without the two the loading thread may have run (the first two to finish):
  // ascending. Queued largest first, they ran in the order of their PTX sizes.
  std::vector<int> rest(order.begin() + 2, order.end());
  CHECK(std::is_sorted(rest.begin(), rest.end()));
}

TEST_CASE("warm() queues every module's pieces together, largest first") {
  // Two modules in one package: `varied` first, then `wide`, whose every piece is larger than any of
  // varied's (a 20 KB comment in the PTX header, which every piece copies). On one pool thread with
  // a 50 ms fake JIT, the compiles run in the order queued: wide's pieces must come first. Queued
  // module by module, varied's 12 ran first and one large piece of the last module could keep a
  // core busy after the others had nothing left.
  auto entries = varied_entries("order-varied");
  auto wide = varied_entries("order-wide " + std::string(20000, 'w'));
  for (auto& e : wide) e.module_name = "wide";
  REQUIRE(entries.at(0).plan.pieces.size() == pieces_of_varied);
  std::uint64_t largest_varied = 0, smallest_wide = ~0ull;
  for (const auto& p : entries.at(0).plan.pieces) largest_varied = std::max<std::uint64_t>(largest_varied, p.size);
  for (const auto& p : wide.at(0).plan.pieces) smallest_wide = std::min<std::uint64_t>(smallest_wide, p.size);
  REQUIRE(smallest_wide > largest_varied);
  entries.insert(entries.end(), wide.begin(), wide.end());
  const std::string pkg = package_file("pv_order", entries);
  const std::string log = temp_dir() + "/pieces-order.log";
  std::remove(log.c_str());
  auto r = run_child({PROBE_PATH, "--package", pkg, "--threads", "1", "--warm", "load", "varied"},
                     {{"FATPACK_LIBCUDA", FAKECUDA_PATH}, {"FAKECUDA_DEVICES", "90"}, {"FAKECUDA_JIT_LOG", log},
                      {"FAKECUDA_JIT_DELAY_MS", "50"}, {"FATPACK_JIT_PIECES", "background"}});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.has("warm jobs=24 ok"));
  std::vector<std::string> order;  // the module of each compile, in the order they finished
  const auto bytes = read_file(log);
  const std::string text(bytes.begin(), bytes.end());
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto piece = line.find(" piece ");
    REQUIRE(piece != std::string::npos);
    const auto start = line.rfind(' ', piece - 1);
    order.push_back(line.substr(start + 1, piece - start - 1));
  }
  INFO(text);
  REQUIRE(order.size() == 24);
  // The pool runs them in order; the thread in wait() may take over the next one not yet started,
  // so two neighbours may finish swapped: the first 11 are wide's all the same.
  for (std::size_t i = 0; i < 11; ++i) CHECK(order[i] == "wide");
}

TEST_CASE("a piece plan that does not match its PTX is an error naming the package, never compiled") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::on_demand);
  auto entries = varied_entries("pv_forged");
  REQUIRE(entries.at(0).plan.pieces.size() == pieces_of_varied);
  // Piece 3 (alone's) claims another hash: its text, made from the plan on the first miss, fails
  // the check. The reader cannot see this (it would have to decompress): the runtime checks it.
  entries[0].plan.pieces[3].xxh3 ^= 1;
  auto bytes = make_package("pv_forged", entries);
  REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "pv_forged").ok());
  auto m = load("pv_forged");
  const int j0 = jits();
  auto f = m.function("_Z5alonePi");
  REQUIRE_FALSE(f.has_value());
  CHECK(f.error().code == fatpack::errc::bad_package);
  CHECK(f.error().message.find("package 'pv_forged', module 'varied': piece 4 of the package's piece plan does not match its PTX") !=
        std::string::npos);
  CHECK(jits() == j0);
  CHECK(m.function("_Z7count_aPi").has_value());  // the other pieces are sound
}

TEST_CASE("a package whose PTX changed but whose plan stayed never gets the old pieces' SASS from a warm key") {
  fatpack::set_jit_pieces(fatpack::jit_pieces::on_demand);
  auto entries = varied_entries("pv_edit");
  REQUIRE(entries.at(0).plan.pieces.size() == pieces_of_varied);
  {
    auto bytes = make_package("pv_edit", entries);
    REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "pv_edit").ok());
    auto m = load("pv_edit");
    REQUIRE(m.function("_Z5alonePi").has_value());  // piece 3's SASS, kept for the process by its key
  }
  // The same package with one byte of alone's piece edited: the writer updates the checksums, the plan
  // (with piece 3's old hash) is kept. The piece's key must not find the SASS compiled above: its
  // text is rebuilt from the edited PTX and refused.
  const auto& range = entries[0].plan.pieces.at(3).ranges.back();
  REQUIRE(range.second > range.first + 2);
  std::uint8_t& byte = entries[0].raw.at(std::size_t(range.second - 2));
  byte = byte == ' ' ? '\t' : ' ';
  auto bytes = make_package("pv_edited", entries);
  REQUIRE(fatpack::add_package_memory(bytes.data(), bytes.size(), "pv_edited").ok());
  auto m = load("pv_edited");
  auto f = m.function("_Z5alonePi");
  REQUIRE_FALSE(f.has_value());
  CHECK(f.error().code == fatpack::errc::bad_package);
  CHECK(f.error().message.find("package 'pv_edited', module 'varied': piece 4 of the package's piece plan does not match its PTX") !=
        std::string::npos);
  CHECK(m.function("_Z7count_aPi").has_value());  // the other pieces are made from unchanged bytes
}
