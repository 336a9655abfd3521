// Cold start of a package of many PTX-only modules on a GPU that has no SASS for them (docs/design.md §5:
// fatpack <= 1/8 of the driver's time on a 16-core host, and only what is used is compiled before
// first use). Three cases, each in a fresh child process (so nothing one JIT-ed helps another), all
// with CUDA_CACHE_DISABLE=1 (the driver's cache would answer cuLink too) and an empty fatpack cache:
//
//   driver  : cuModuleLoadData(PTX) of every module, one after the other (the driver's own JIT), then
//             cuModuleGetFunction of every kernel
//   fatpack : fatpack::warm() (every module queued on the JIT pool), then load_module + function() of
//             every kernel of every module
//   first   : fatpack::load_module of the first module alone (what a program that uses one module
//             waits for: nothing else is compiled)
//
//   fatpack_coldstart_bench PACKAGE.fpk [--jit-threads N]
//   fatpack_coldstart_bench PACKAGE.fpk --processes N
//
// --processes N: N processes start together, first with the driver (cuModuleLoadData(PTX), sharing
// one fresh driver cache, CUDA_CACHE_PATH), then with fatpack (sharing one fresh fatpack cache; the
// driver's cache off). Reports the wall time of each group, each process's time, and for fatpack the
// number of JITs all processes ran together (docs/design.md §5: exactly one per module; the driver's own
// cache lets every process JIT).
//
// The primary context is created before the clock starts in every case (100-300 ms that is neither
// fatpack's nor the JIT's). Make the input with bench/make_coldstart_inputs.sh.
#include "fatpack/fatpack.hpp"

#include "fatpack/core/package.hpp"

#include <cuda.h>  // types only: the driver is reached through fatpack::driver_entry_point

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

namespace core = fatpack::core;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fatpack_coldstart_bench: %s\n", what.c_str());
  std::exit(1);
}

template <class Fn>
Fn entry(const char* name) {
  auto p = fatpack::driver_entry_point(name);
  if (!p) die(p.error().what());
  return reinterpret_cast<Fn>(*p);
}

// Takes device 0's primary context and makes it current, outside the timed part.
CUcontext take_context() {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (entry<decltype(&cuDeviceGet)>("cuDeviceGet")(&dev, 0) != CUDA_SUCCESS ||
      entry<decltype(&cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain")(&ctx, dev) != CUDA_SUCCESS ||
      entry<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent")(ctx) != CUDA_SUCCESS)
    die("cannot take device 0's primary context");
  return ctx;
}

int run_driver(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  auto pv = core::package_view::parse(core::byte_span(bytes), path);
  if (!pv) die(pv.error().message);
  struct module_ptx {
    std::vector<std::uint8_t> ptx;
    std::vector<std::string> kernels;
  };
  std::vector<module_ptx> mods;
  for (const auto& e : pv->entries()) {
    if (e.target.kind != core::entry_kind::ptx) continue;
    auto raw = pv->decompress(e.index);
    if (!raw) die(raw.error().message);
    module_ptx m;
    m.ptx = std::move(*raw);
    m.ptx.push_back(0);
    for (auto k : e.kernels) m.kernels.emplace_back(k);
    mods.push_back(std::move(m));
  }
  take_context();
  auto load = entry<decltype(&cuModuleLoadData)>("cuModuleLoadData");
  auto getfn = entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
  const double t0 = now_ms();
  for (const auto& m : mods) {
    CUmodule mod = nullptr;
    if (CUresult r = load(&mod, m.ptx.data()); r != CUDA_SUCCESS) die("cuModuleLoadData(PTX) failed: " + std::to_string(r));
    for (const auto& k : m.kernels) {
      CUfunction fn;
      if (getfn(&fn, mod, k.c_str()) != CUDA_SUCCESS) die("cuModuleGetFunction(" + k + ") failed");
    }
  }
  std::printf("RESULT %.1f %zu -1\n", now_ms() - t0, mods.size());
  return 0;
}

std::vector<std::string> module_names() {
  auto pk = fatpack::packages();
  if (!pk) die(pk.error().what());
  std::vector<std::string> names;
  for (const auto& p : *pk)
    for (const auto& m : p.modules) names.push_back(m);
  return names;
}

void load_and_touch(const std::string& name, std::vector<fatpack::module>& keep) {
  fatpack::load_options lo;
  lo.device = 0;
  auto m = fatpack::load_module(name, lo);
  if (!m) die(m.error().what());
  if (!m->report().jit) die("module " + name + " did not go through the JIT: the input must hold PTX only");
  for (const auto& k : m->kernels())
    if (!m->function(k)) die("function " + k + " of " + name);
  keep.push_back(std::move(*m));
}

int run_fatpack(const std::string& path, bool first_only) {
  if (auto s = fatpack::add_package_file(path); !s) die(s.error().what());
  if (auto s = fatpack::init(); !s) die(s.error().what());
  take_context();
  const auto names = module_names();
  std::vector<fatpack::module> keep;
  const double t0 = now_ms();
  if (first_only) {
    load_and_touch(names.front(), keep);
  } else {
    fatpack::warm_options wo;
    wo.device = 0;
    auto w = fatpack::warm(wo);
    for (const auto& n : names) load_and_touch(n, keep);
    if (auto s = w.wait(); !s) die(s.error().what());
  }
  std::printf("RESULT %.1f %zu %llu\n", now_ms() - t0, first_only ? std::size_t(1) : names.size(),
              static_cast<unsigned long long>(fatpack::cache_stats().jits));
  return 0;
}

struct child_result {
  double ms = -1;
  std::size_t modules = 0;
  long long jits = -1;  // compiles the child ran (fatpack); -1: not observable (the driver)
};

std::string make_temp_dir() {
  char dir[] = "/tmp/fatpack-coldstart-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp failed");
  return dir;
}

// Starts this program in `mode` as a child; `env` goes before the command.
FILE* start_child(const char* self, const std::string& mode, const std::string& pkg, const std::string& env) {
  const std::string cmd = env + " '" + self + "' --mode " + mode + " '" + pkg + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) die("popen failed");
  return p;
}

child_result finish_child(FILE* p, const std::string& mode) {
  char line[512];
  child_result r;
  while (std::fgets(line, sizeof line, p)) {
    if (std::strncmp(line, "RESULT ", 7) == 0) {
      char* end = nullptr;
      r.ms = std::strtod(line + 7, &end);
      r.modules = std::strtoul(end, &end, 10);
      r.jits = std::strtoll(end, &end, 10);
    } else {
      std::fputs(line, stdout);
    }
  }
  if (pclose(p) != 0 || r.ms < 0) die("case '" + mode + "' failed");
  return r;
}

// One child in `mode` with a fresh fatpack cache and the driver's cache off.
child_result child(const char* self, const std::string& mode, const std::string& pkg, const std::string& extra_env) {
  const std::string dir = make_temp_dir();
  child_result r = finish_child(
      start_child(self, mode, pkg, "CUDA_CACHE_DISABLE=1 FATPACK_CACHE_PATH=" + dir + " " + extra_env), mode);
  std::system(("rm -rf '" + dir + "'").c_str());
  return r;
}

// `n` children in `mode` started together with `env`; returns the wall time, fills `each`.
double together(const char* self, const std::string& mode, const std::string& pkg, const std::string& env, int n,
                std::vector<child_result>& each) {
  const double t0 = now_ms();
  std::vector<FILE*> ps;
  for (int i = 0; i < n; ++i) ps.push_back(start_child(self, mode, pkg, env));
  for (FILE* p : ps) each.push_back(finish_child(p, mode));
  return now_ms() - t0;
}

int run_processes(const char* self, const std::string& pkg, int n) {
  const std::string driver_cache = make_temp_dir(), fatpack_cache = make_temp_dir();
  std::vector<child_result> d, f;
  const double dw = together(self, "driver", pkg, "CUDA_CACHE_PATH=" + driver_cache, n, d);
  const double fw = together(self, "fatpack", pkg, "CUDA_CACHE_DISABLE=1 FATPACK_CACHE_PATH=" + fatpack_cache, n, f);
  std::system(("rm -rf '" + driver_cache + "' '" + fatpack_cache + "'").c_str());
  auto list = [](const std::vector<child_result>& v) {
    std::string s;
    for (const auto& r : v) s += (s.empty() ? "" : ", ") + std::to_string(static_cast<long>(r.ms));
    return s;
  };
  long long jits = 0;
  for (const auto& r : f) jits += r.jits;
  std::printf("%d processes started together, %zu module(s) each\n", n, f.empty() ? 0 : f.front().modules);
  std::printf("driver (shared fresh CUDA_CACHE_PATH):   wall %8.1f ms; per process ms: %s\n", dw, list(d).c_str());
  std::printf("fatpack (shared fresh fatpack cache):    wall %8.1f ms; per process ms: %s\n", fw, list(f).c_str());
  std::printf("fatpack JITs in all %d processes: %lld (modules: %zu)\n", n, jits, f.empty() ? 0 : f.front().modules);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, pkg, threads;
  int processes = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (a == "--jit-threads" && i + 1 < argc) threads = argv[++i];
    else if (a == "--processes" && i + 1 < argc) processes = std::atoi(argv[++i]);
    else pkg = a;
  }
  if (pkg.empty()) {
    std::fprintf(stderr, "usage: fatpack_coldstart_bench PACKAGE.fpk [--jit-threads N | --processes N]\n");
    return 2;
  }
  if (mode == "driver") return run_driver(pkg);
  if (mode == "fatpack") return run_fatpack(pkg, false);
  if (mode == "first") return run_fatpack(pkg, true);

  if (auto s = fatpack::init(); !s) {
    std::printf("SKIPPED: no CUDA driver/GPU (%s)\n", s.error().message.c_str());
    return 77;
  }
  if (processes > 0) return run_processes(argv[0], pkg, processes);
  const auto dev = fatpack::device(0).value();
  const std::string env = threads.empty() ? "" : "FATPACK_JIT_THREADS=" + threads;
  const child_result dr = child(argv[0], "driver", pkg, env);
  const child_result fr = child(argv[0], "fatpack", pkg, env);
  const child_result first = child(argv[0], "first", pkg, env);
  const double d = dr.ms, f = fr.ms, one = first.ms;
  const std::size_t n_driver = dr.modules, n_fatpack = fr.modules;
  std::printf("device: %s (CC %d.%d), %ld host threads, JIT threads %s\n", dev.name.c_str(), dev.cc_major, dev.cc_minor,
              sysconf(_SC_NPROCESSORS_ONLN), threads.empty() ? "default (hardware threads)" : threads.c_str());
  std::printf("driver, cuModuleLoadData(PTX) module after module (%zu modules): %10.1f ms\n", n_driver, d);
  std::printf("fatpack, warm() + load every module (%zu modules):              %10.1f ms = 1/%.1f of the driver\n",
              n_fatpack, f, d / f);
  std::printf("fatpack, load only the first module:                           %10.1f ms (the others are not compiled)\n",
              one);
  return 0;
}
