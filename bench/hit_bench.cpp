// Cache hits in fresh processes (issues 13 and 14, docs/benchmarks.md "Hits in fresh processes"):
// what a program pays, from "the context exists" to "the kernel can be launched", when the code it
// needs is already on disk, against cuModuleLoadData of the raw cubin. Every run of every case is a
// fresh child process; the cases are interleaved run by run (a load change hits them all alike).
//
//   fatpack_hit_bench INPUT_DIR [--runs N] [--work DIR]
//
// INPUT_DIR comes from bench/make_hit_inputs.sh (mid.cu, mid.sm_XY.cubin, sass-lz4.fpk,
// sass-zstd.fpk, sass-none.fpk, ptx.fpk). Cases (N runs each, default 15):
//   raw cubin        cuModuleLoadData of the cubin (read into memory before the clock) + cuModuleGetFunction
//   SASS lz4 / zstd  load_module of a package's SASS entry (the package file is added before the clock;
//                    selection and decompression count) + function()
//   JIT cache hit    load_module of a PTX-only package whose SASS is in the fatpack cache (a priming
//                    process JIT-ed it) + function()
//   compile hit      fatpack::compile of mid.cu whose SASS is in the fatpack cache (a priming process
//                    ran NVRTC) + kernel(); a hit never loads NVRTC
// and floors, what the raw cubin costs when the clock also holds one step a cache or package must do:
//   raw + read       the cubin read from its file inside the clock (open, fstat, read into a fresh buffer)
//   raw + LZ4        the cubin LZ4-decoded (one block, compressed before the clock) into a fresh buffer
//   raw + XXH3       XXH3-64 of the cubin before the load (what checking a stored cubin costs)
//   raw library      cuLibraryLoadData of the cubin in memory (the image preserved, as a cache hit
//                    loads it) + cuLibraryGetKernel + cuKernelGetFunction: what fatpack::compile's
//                    library costs the driver, against the raw module
//   check floor      the cubin file mapped read-only, fatpack's XXH3 of every byte (AVX2 where the
//                    CPU has it), then the raw library: the least any cache that checks what it reads
//                    and hands out a library pays, with no key made and nothing looked up
// Package and JIT cases also print their load report's phases (medians in a second table): where the
// time goes between the clock's start and "launchable".
// With the fake driver (FATPACK_LIBCUDA=tests/fakecuda, FAKECUDA_DEVICES=90) module loads cost nearly
// nothing, so the figures are fatpack's own overhead; with the real driver they are the ratios.
// The driver's own cache is off in every child (CUDA_CACHE_DISABLE=1). Each row: the median wall time,
// its min and max, its ratio to the raw cubin; and the median CPU time of the process (all threads)
// over the same span, steadier on a loaded machine.
#include "fatpack/compile.hpp"
#include "fatpack/core/codec.hpp"  // core::xxh3, the hash the cache checks with
#include "fatpack/fatpack.hpp"

#include <cuda.h>  // types only: the driver is reached through fatpack::driver_entry_point
#include <lz4.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (every thread): steadier than wall time on a loaded machine, where a
// child may wait for a core; and it counts what decode threads cost.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fatpack_hit_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

template <class Fn>
Fn entry(const char* name) {
  auto p = fatpack::driver_entry_point(name);
  if (!p) die(p.error().what());
  return reinterpret_cast<Fn>(*p);
}

void take_context() {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (entry<decltype(&cuDeviceGet)>("cuDeviceGet")(&dev, 0) != CUDA_SUCCESS ||
      entry<decltype(&cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain")(&ctx, dev) != CUDA_SUCCESS ||
      entry<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent")(ctx) != CUDA_SUCCESS)
    die("cannot take device 0's primary context");
}

// Threads of this process (a hit should start none: no JIT service, no decode pool).
int thread_count() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// One child: prints "RESULT <ms> <path taken>" (and the thread count after the hit on stderr).
int child(const std::string& what, const std::string& in, const std::string& arch) {
  const std::string kernel = "k0";
  if (what == "raw") {
    const std::string cubin = slurp(in + "/mid.sm_" + arch + ".cubin");
    auto load = entry<decltype(&cuModuleLoadData)>("cuModuleLoadData");
    auto getfn = entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
    take_context();
    const double c0 = cpu_ms(), t = now_ms();
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    if (load(&m, cubin.data()) != CUDA_SUCCESS || getfn(&f, m, kernel.c_str()) != CUDA_SUCCESS)
      die("cuModuleLoadData/cuModuleGetFunction of the raw cubin failed");
    const double ms = now_ms() - t;
    std::printf("RESULT %.4f %.4f raw\n", ms, cpu_ms() - c0);
    return 0;
  }
  if (what == "raw-read" || what == "raw-lz4" || what == "raw-xxh3") {
    const std::string file = in + "/mid.sm_" + arch + ".cubin";
    const std::string cubin = slurp(file);
    std::string packed;
    if (what == "raw-lz4") {
      packed.resize(static_cast<std::size_t>(LZ4_compressBound(int(cubin.size()))));
      const int n = LZ4_compress_default(cubin.data(), packed.data(), int(cubin.size()), int(packed.size()));
      if (n <= 0) die("LZ4_compress_default failed");
      packed.resize(static_cast<std::size_t>(n));
    }
    auto load = entry<decltype(&cuModuleLoadData)>("cuModuleLoadData");
    auto getfn = entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
    take_context();
    const double c0 = cpu_ms(), t = now_ms();
    std::vector<char> bytes;
    const void* image = cubin.data();
    if (what == "raw-read") {
      std::FILE* f = std::fopen(file.c_str(), "rb");
      if (!f) die("cannot open " + file);
      std::fseek(f, 0, SEEK_END);
      bytes.resize(static_cast<std::size_t>(std::ftell(f)));
      std::fseek(f, 0, SEEK_SET);
      if (std::fread(bytes.data(), 1, bytes.size(), f) != bytes.size()) die("short read of " + file);
      std::fclose(f);
      image = bytes.data();
    } else if (what == "raw-lz4") {
      bytes.resize(cubin.size());
      if (LZ4_decompress_safe(packed.data(), bytes.data(), int(packed.size()), int(bytes.size())) != int(cubin.size()))
        die("LZ4_decompress_safe failed");
      image = bytes.data();
    } else if (XXH3_64bits(cubin.data(), cubin.size()) == 0) {
      die("XXH3 of the cubin is 0");  // keeps the hash from being optimized away
    }
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    if (load(&m, image) != CUDA_SUCCESS || getfn(&f, m, kernel.c_str()) != CUDA_SUCCESS)
      die("cuModuleLoadData/cuModuleGetFunction failed");
    const double ms = now_ms() - t;
    std::printf("RESULT %.4f %.4f raw\n", ms, cpu_ms() - c0);
    return 0;
  }
  if (what == "raw-library" || what == "floor") {
    const std::string file = in + "/mid.sm_" + arch + ".cubin";
    const std::string cubin = slurp(file);
    auto load = entry<decltype(&cuLibraryLoadData)>("cuLibraryLoadData");
    auto getk = entry<decltype(&cuLibraryGetKernel)>("cuLibraryGetKernel");
    auto getfn = entry<decltype(&cuKernelGetFunction)>("cuKernelGetFunction");
    take_context();
    const double c0 = cpu_ms(), t = now_ms();
    const void* image = cubin.data();
    if (what == "floor") {
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0) die("cannot open " + file);
      void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      ::close(fd);
      if (m == MAP_FAILED) die("cannot map " + file);
      const auto* bytes = static_cast<const std::uint8_t*>(m);
      if (fatpack::core::xxh3(fatpack::core::byte_span(bytes, static_cast<std::size_t>(st.st_size))) == 0)
        die("XXH3 of the cubin is 0");
      image = m;
    }
    CUlibrary lib = nullptr;
    CUkernel k = nullptr;
    CUfunction f = nullptr;
    CUlibraryOption keys[] = {CU_LIBRARY_BINARY_IS_PRESERVED};
    void* vals[] = {reinterpret_cast<void*>(std::uintptr_t{1})};
    if (load(&lib, image, nullptr, nullptr, 0, keys, vals, 1) != CUDA_SUCCESS ||
        getk(&k, lib, kernel.c_str()) != CUDA_SUCCESS || getfn(&f, k) != CUDA_SUCCESS)
      die("cuLibraryLoadData/cuLibraryGetKernel/cuKernelGetFunction failed");
    const double ms = now_ms() - t;
    std::printf("RESULT %.4f %.4f raw\n", ms, cpu_ms() - c0);
    return 0;
  }
  if (what == "compile") {
    fatpack::compile_request req;
    req.source = slurp(in + "/mid.cu");
    req.name = "mid.cu";
    take_context();
    const double c0 = cpu_ms(), t = now_ms();
    auto c = fatpack::compile(req);
    if (!c) die(c.error().what());
    if (!c->kernel(kernel)) die("compile: no kernel " + kernel);
    const double ms = now_ms() - t, cpu = cpu_ms() - c0;
    std::fprintf(stderr, "compile: %d threads after the hit\n", thread_count());
    std::printf("RESULT %.4f %.4f %s\n", ms, cpu, fatpack::compile_path_name(c->report.path));
    const auto& r = c->library.report();
    const auto& p = c->report;
    std::printf("PHASES other=%.4f locate=%.4f scan=%.4f lookup=%.4f register=%.4f load=%.4f compile=%.4f "
                "library.load=%.4f\n",
                ms - p.total_ms, p.locate_ms, p.scan_ms, p.lookup_ms, p.register_ms, p.load_ms, p.total_ms, r.load_ms);
    return 0;
  }
  // A package case: sass-lz4, sass-zstd, ptx.
  if (auto s = fatpack::add_package_file(in + "/" + what + ".fpk"); !s) die(s.error().what());
  take_context();
  const double c0 = cpu_ms(), t = now_ms();
  fatpack::load_options lo;
  lo.device = 0;
  auto m = fatpack::load_module("mid", lo);
  if (!m) die(m.error().what());
  const double t_loaded = now_ms();
  if (!m->function(kernel)) die("no function " + kernel);
  const double t_function = now_ms();
  const double ms = t_function - t, cpu = cpu_ms() - c0;
  std::fprintf(stderr, "%s: %d threads after the load\n", what.c_str(), thread_count());
  std::printf("RESULT %.4f %.4f %s\n", ms, cpu, m->report().jit ? "jit" : "sass");
  // The priming child waits for the module's other pieces, compiled on the pool: every timed child
  // then finds all of them cached and compiles nothing beside its clock (before, the priming child
  // left most pieces to the timed ones, whose pools compiled them during the timed hit).
  if (std::getenv("HIT_BENCH_PRIMING")) fatpack::wait_cache_refresh();
  const auto& r = m->report();
  // before: from the clock's start to load_module's own clock (first-call set-up: the driver table,
  // devices, the registry); function: the first function() (for pieces: the piece's hit and load).
  std::printf("PHASES before=%.4f select=%.4f context=%.4f decompress=%.4f jit=%.4f load=%.4f total=%.4f "
              "function=%.4f\n",
              (t_loaded - t) - r.total_ms, r.select_ms, r.context_ms, r.decompress_ms, r.jit_ms, r.load_ms, r.total_ms,
              t_function - t_loaded);
  return 0;
}

struct sample {
  double ms = 0, cpu = 0;
  std::string path;
  std::vector<std::pair<std::string, double>> phases;  // the child's PHASES line, in its order
};

// Runs one child; a child that fails ends the benchmark unless `may_fail` (then `ok` is false).
sample run_child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                 bool may_fail = false, bool* ok = nullptr) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
  }
  for (const auto& kv : env) envs.push_back(kv.first + "=" + kv.second);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) die("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data()) != 0) die("posix_spawn");
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  sample s;
  char path[64] = {0};
  const std::size_t p = text.find("RESULT ");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || p == std::string::npos ||
      std::sscanf(text.c_str() + p, "RESULT %lf %lf %63[^\n]", &s.ms, &s.cpu, path) != 3) {
    if (!may_fail) die("a child failed: " + args[2]);
    if (ok) *ok = false;
    return {};
  }
  if (ok) *ok = true;
  s.path = path;
  if (const std::size_t q = text.find("PHASES "); q != std::string::npos) {
    std::string line = text.substr(q + 7, text.find('\n', q) - q - 7);
    for (std::size_t a = 0; a < line.size();) {
      std::size_t b = line.find(' ', a);
      if (b == std::string::npos) b = line.size();
      const std::string item = line.substr(a, b - a);
      if (const std::size_t eq = item.find('='); eq != std::string::npos)
        s.phases.emplace_back(item.substr(0, eq), std::atof(item.c_str() + eq + 1));
      a = b + 1;
    }
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 5 && std::strcmp(argv[1], "--child") == 0) return child(argv[2], argv[3], argv[4]);
  if (argc < 2) {
    std::fprintf(stderr, "usage: fatpack_hit_bench INPUT_DIR [--runs N] [--work DIR]\n");
    return 2;
  }
  const std::string in = argv[1];
  int runs = 15;
  std::string work = "hit-bench-work";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--work") == 0) work = argv[i + 1];
  }
  auto dev = fatpack::device(0);
  if (!dev) die(dev.error().what());
  const std::string arch = std::to_string(dev->arch);
  std::printf("device 0: %s (CC %d.%d), driver %d; inputs %s; %d fresh processes per case; load average %s\n",
              dev->name.c_str(), dev->cc_major, dev->cc_minor, dev->driver_version, in.c_str(), runs, loadavg().c_str());
  if (std::system(("rm -rf '" + work + "' && mkdir -p '" + work + "'").c_str()) != 0) die("cannot make " + work);
  const std::map<std::string, std::string> env{{"CUDA_CACHE_DISABLE", "1"}, {"FATPACK_CACHE_PATH", work + "/cache"}};
  auto args = [&](const std::string& what) {
    return std::vector<std::string>{"/proc/self/exe", "--child", what, in, arch};
  };
  // The PTX package is loaded in pieces by default (docs/runtime.md, kernel-granular JIT): "ptx" is
  // the hit of k0's piece; "ptx-whole" the hit of the whole module (FATPACK_JIT_PIECES=off).
  auto whole_env = env;
  whole_env["FATPACK_JIT_PIECES"] = "off";
  // Priming: one JIT of the PTX package (in pieces and whole) and one NVRTC compile fill the cache.
  const double t_prime = now_ms();
  auto priming_env = env;
  priming_env["HIT_BENCH_PRIMING"] = "1";
  const sample pj = run_child(args("ptx"), priming_env);
  const sample pw = run_child(args("ptx"), whole_env);
  // No NVRTC on this machine (FATPACK_LIBNVRTC names one elsewhere): the compile case is left out.
  bool nvrtc_ok = false;
  const sample pc = run_child(args("compile"), env, true, &nvrtc_ok);
  std::printf("priming: JIT %.1f ms in pieces, %.1f ms whole (%s), compile %.1f ms (%s); %.1f s in all\n", pj.ms, pw.ms,
              pj.path.c_str(), pc.ms,
              nvrtc_ok ? pc.path.c_str() : "FAILED: no NVRTC? set FATPACK_LIBNVRTC; the compile case is left out",
              (now_ms() - t_prime) / 1000);
  struct kase {
    const char* what;
    const char* label;
    const char* expect;  // the path a hit must take, or nullptr
    bool whole = false;  // FATPACK_JIT_PIECES=off
    std::vector<double> ms, cpu;
    std::map<std::string, std::vector<double>> phases;
    std::vector<std::string> phase_order;
  };
  std::vector<kase> cases = {{"raw", "raw cubin cuModuleLoadData", nullptr},
                             {"raw-read", "raw + read the file", nullptr},
                             {"raw-lz4", "raw + LZ4 decode", nullptr},
                             {"raw-xxh3", "raw + XXH3", nullptr},
                             {"raw-library", "raw library (cuLibrary)", nullptr},
                             {"floor", "check floor: map+XXH3+library", nullptr},
                             {"sass-none", "fatpack SASS, none", "sass"},
                             {"sass-lz4", "fatpack SASS, lz4", "sass"},
                             {"sass-zstd", "fatpack SASS, zstd", "sass"},
                             {"ptx", "fatpack JIT hit, k0's piece", "jit"},
                             {"ptx", "fatpack JIT hit, whole", "jit", true},
                             {"compile", "fatpack::compile hit", "cache hit"}};
  if (!nvrtc_ok) cases.pop_back();
  for (int i = 0; i < runs; ++i)
    for (auto& c : cases) {
      const sample s = run_child(args(c.what), c.whole ? whole_env : env);
      if (c.expect && s.path != c.expect) die(std::string(c.what) + " took the path '" + s.path + "', not '" + c.expect + "'");
      c.ms.push_back(s.ms);
      c.cpu.push_back(s.cpu);
      for (const auto& ph : s.phases) {
        if (!c.phases.count(ph.first)) c.phase_order.push_back(ph.first);
        c.phases[ph.first].push_back(ph.second);
      }
    }
  const double raw = median(cases.front().ms);
  const double raw_cpu = median(cases.front().cpu);
  std::printf("%-30s %10s %8s %8s %8s %12s %8s\n", "case (context -> launchable)", "median ms", "min", "max", "x raw",
              "CPU ms (med)", "x raw");
  for (const auto& c : cases)
    std::printf("%-30s %10.3f %8.3f %8.3f %8.2f %12.3f %8.2f\n", c.label, median(c.ms),
                *std::min_element(c.ms.begin(), c.ms.end()), *std::max_element(c.ms.begin(), c.ms.end()),
                raw > 0 ? median(c.ms) / raw : 0.0, median(c.cpu), raw_cpu > 0 ? median(c.cpu) / raw_cpu : 0.0);
  std::printf("\nphases (median ms; load report fields, `before`: the clock's start to load_module's own clock):\n");
  for (const auto& c : cases) {
    if (c.phase_order.empty()) continue;
    std::printf("%-30s", c.label);
    for (const auto& n : c.phase_order) std::printf(" %s=%.3f", n.c_str(), median(c.phases.at(n)));
    std::printf("\n");
  }
  std::printf("load average after: %s\n", loadavg().c_str());
  return 0;
}
