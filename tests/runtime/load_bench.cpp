// fatpack_runtime_load_bench: the time to load one cubin through fatpack vs plain cuModuleLoadData of the
// same cubin, measured in one run, interleaved, medians of N runs each (default 30); plus the extra
// peak host memory one fatpack load takes (issue 3: <= the chosen entry's raw size + 1 MiB): the
// peak of operator-new bytes during the load, and, where Linux lets the resident high-water mark be
// reset, the RSS high-water mark of a fatpack load against that of a plain load.
//
//   fatpack_runtime_load_bench [CUBIN] [RUNS]     (default CUBIN: the build's vadd.sm_<device CC>.cubin)
//
// What is timed:
//   plain   : cuModuleLoadData(bytes already in memory) + cuModuleGetFunction for every kernel
//   fatpack : fatpack::load_module (selection, decompression of the one entry, cuModuleLoadDataEx)
//             + function() for every kernel; the package is in memory (as an embedded one is)
// Each iteration unloads what it loaded (cuModuleUnload / dropping the last handle), so every
// fatpack load is a full load. Exits 77 (skipped) without a GPU.
#include "fatpack/fatpack.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/core/package_writer.hpp"

#include <cuda.h>  // types only

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include <sys/resource.h>

namespace core = fatpack::core;

// ---- heap accounting: every operator new in the process (fatpack allocates through it) -------------
namespace {
std::atomic<long long> g_live{0}, g_peak{0};
void note_alloc(void* p) {
  if (!p) return;
  long long now = g_live.fetch_add(static_cast<long long>(malloc_usable_size(p))) + static_cast<long long>(malloc_usable_size(p));
  long long peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void note_free(void* p) {
  if (p) g_live.fetch_sub(static_cast<long long>(malloc_usable_size(p)));
}
}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  void* p = std::malloc(n ? n : 1);
  note_alloc(p);
  return p;
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Resident-set high-water mark: reset it (Linux >= 4.0: "5" > /proc/self/clear_refs), then read
// VmHWM after the load. Covers what operator new does not see (mmap-ed scratch buffers, the
// driver's own allocations). Returns false where the reset is not supported.
bool reset_hwm() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = std::fputs("5", f) >= 0;
  ok = std::fclose(f) == 0 && ok;
  return ok;
}
long read_status_kib(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  std::size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0) v = std::atol(line + n);
  std::fclose(f);
  return v;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (auto s = fatpack::init(); !s) {
    std::printf("SKIPPED: no CUDA driver/GPU (%s)\n", s.error().message.c_str());
    return 77;
  }
  auto dev = fatpack::device(0).value();
  std::string cubin_path = argc > 1 ? argv[1]
                                    : std::string(FATPACK_TEST_ARTIFACTS) + "/vadd.sm_" + std::to_string(dev.arch) + ".cubin";
  int runs = argc > 2 ? std::atoi(argv[2]) : 30;
  if (runs < 20) runs = 20;
  std::ifstream f(cubin_path, std::ios::binary);
  std::vector<std::uint8_t> cubin((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (cubin.empty()) {
    std::printf("cannot read %s\n", cubin_path.c_str());
    return 1;
  }
  auto imported = core::import_input(core::byte_span(cubin), cubin_path, "bench");
  if (!imported) {
    std::printf("import: %s\n", imported.error().message.c_str());
    return 1;
  }
  std::vector<std::string> kernels = imported->front().kernels;
  struct variant {
    const char* name = "";
    core::codec codec = core::codec::none;
    std::vector<std::uint8_t> package;
    std::vector<double> ms;
    std::vector<double> decompress_ms, driver_ms, rest_ms;  // the load report's phases
    long long extra_peak = 0;
    long rss_peak_kib = 0;  // max over runs of VmHWM - VmRSS before the load
  };
  std::vector<variant> vs(3);
  vs[0].name = "lz4", vs[0].codec = core::codec::lz4;
  vs[1].name = "zstd", vs[1].codec = core::codec::zstd;
  vs[2].name = "none", vs[2].codec = core::codec::none;
  for (auto& v : vs) {
    auto entries = imported.value();
    entries.front().module_name = std::string("bench_") + v.name;
    core::pack_options o;
    o.codec = v.codec;
    auto pkg = core::write_package(std::string("bench_") + v.name, entries, o);
    if (!pkg) {
      std::printf("write_package: %s\n", pkg.error().message.c_str());
      return 1;
    }
    v.package = std::move(pkg.value());
    // Borrowed: the package is read in place, as an embedded package is.
    if (!fatpack::add_package_memory(v.package.data(), v.package.size(), v.name, fatpack::ownership::borrow)) return 1;
  }

  using load_fn = decltype(&::cuModuleLoadData);
  using unload_fn = decltype(&::cuModuleUnload);
  using getfn_fn = decltype(&::cuModuleGetFunction);
  using push_fn = decltype(&::cuCtxPushCurrent);
  using pop_fn = decltype(&::cuCtxPopCurrent);
  auto ep = [](const char* n) { return fatpack::driver_entry_point(n).value(); };
  auto cu_load = reinterpret_cast<load_fn>(ep("cuModuleLoadData"));
  auto cu_unload = reinterpret_cast<unload_fn>(ep("cuModuleUnload"));
  auto cu_getfn = reinterpret_cast<getfn_fn>(ep("cuModuleGetFunction"));
  auto cu_push = reinterpret_cast<push_fn>(ep("cuCtxPushCurrent"));
  auto cu_pop = reinterpret_cast<pop_fn>(ep("cuCtxPopCurrent"));

  // Hold a module of another package so the primary context is at hand for the plain loads (creating
  // the context is not part of either load; fatpack keeps it for the process anyway).
  auto anchor_entries = imported.value();
  anchor_entries.front().module_name = "bench_anchor";
  auto anchor_pkg = core::write_package("bench_anchor", anchor_entries, core::pack_options{});
  if (!anchor_pkg || !fatpack::add_package_memory(anchor_pkg->data(), anchor_pkg->size(), "anchor")) return 1;
  fatpack::load_options lo;
  lo.device = 0;
  auto anchor = fatpack::load_module("bench_anchor", lo).value();
  CUcontext ctx = reinterpret_cast<CUcontext>(anchor.context());

  std::vector<double> plain_ms;
  long plain_rss_peak_kib = 0;
  const bool hwm = reset_hwm();
  auto plain_once = [&] {
    cu_push(ctx);
    long rss0 = hwm && reset_hwm() ? read_status_kib("VmRSS:") : -1;
    double t0 = now_ms();
    CUmodule m = nullptr;
    if (cu_load(&m, cubin.data()) != CUDA_SUCCESS) {
      std::printf("cuModuleLoadData failed\n");
      std::exit(1);
    }
    for (const auto& k : kernels) {
      CUfunction fn;
      cu_getfn(&fn, m, k.c_str());
    }
    double t1 = now_ms();
    if (rss0 >= 0) plain_rss_peak_kib = std::max(plain_rss_peak_kib, read_status_kib("VmHWM:") - rss0);
    cu_unload(m);
    CUcontext c;
    cu_pop(&c);
    return t1 - t0;
  };
  auto fatpack_once = [&](variant& v) {
    long long live0 = g_live.load();
    g_peak.store(live0);
    long rss0 = hwm && reset_hwm() ? read_status_kib("VmRSS:") : -1;
    double t0 = now_ms();
    auto m = fatpack::load_module(std::string("bench_") + v.name, lo);
    if (!m) {
      std::printf("load: %s\n", m.error().what());
      std::exit(1);
    }
    for (const auto& k : kernels) (void)m->function(k);
    double t1 = now_ms();
    const auto& rep = m->report();
    v.decompress_ms.push_back(rep.decompress_ms);
    v.driver_ms.push_back(rep.load_ms);
    v.rest_ms.push_back((t1 - t0) - rep.decompress_ms - rep.load_ms);
    v.extra_peak = std::max(v.extra_peak, g_peak.load() - live0);
    if (rss0 >= 0) v.rss_peak_kib = std::max(v.rss_peak_kib, read_status_kib("VmHWM:") - rss0);
    return t1 - t0;
  };
  // Warm-up (first calls pay lazy initialisation on both sides).
  for (int i = 0; i < 3; ++i) {
    plain_once();
    for (auto& v : vs) fatpack_once(v);
  }
  for (auto& v : vs) {
    v.extra_peak = v.rss_peak_kib = 0;
    v.decompress_ms.clear();
    v.driver_ms.clear();
    v.rest_ms.clear();
  }
  plain_rss_peak_kib = 0;
  for (int i = 0; i < runs; ++i) {
    plain_ms.push_back(plain_once());
    for (auto& v : vs) v.ms.push_back(fatpack_once(v));
  }
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double plain = median(plain_ms);
  std::printf("device: %s (CC %d.%d), driver CUDA %d.%d\n", dev.name.c_str(), dev.cc_major, dev.cc_minor,
              dev.driver_version / 1000, dev.driver_version % 1000 / 10);
  std::printf("cubin: %s (%zu bytes, %zu kernels), %d runs each, interleaved\n", cubin_path.c_str(), cubin.size(),
              kernels.size(), runs);
  std::printf("plain cuModuleLoadData      : median %.4f ms (min %.4f, max %.4f)\n", plain,
              *std::min_element(plain_ms.begin(), plain_ms.end()), *std::max_element(plain_ms.begin(), plain_ms.end()));
  for (auto& v : vs) {
    double med = median(v.ms);
    std::printf("fatpack load (%-4s, %7zu B): median %.4f ms (min %.4f, max %.4f) = %.2fx plain; extra peak heap per "
                "load %lld B",
                v.name, v.package.size(), med, *std::min_element(v.ms.begin(), v.ms.end()),
                *std::max_element(v.ms.begin(), v.ms.end()), med / plain, v.extra_peak);
    if (hwm)
      std::printf(", RSS high-water per load %ld KiB (plain: %ld KiB; extra %ld KiB)", v.rss_peak_kib,
                  plain_rss_peak_kib, v.rss_peak_kib - plain_rss_peak_kib);
    std::printf("; budget: entry raw size %zu B + 1 MiB = %zu KiB\n", cubin.size(), (cubin.size() + (1u << 20)) / 1024);
    std::printf("    phases (medians): decompress + checksum %.4f ms, cuModuleLoadDataEx %.4f ms, the rest (lookup, "
                "selection, context, %zu x function()) %.4f ms\n",
                median(v.decompress_ms), median(v.driver_ms), kernels.size(), median(v.rest_ms));
  }
  std::printf("max RSS of the process: %ld KiB\n", ru.ru_maxrss);
  return 0;
}
