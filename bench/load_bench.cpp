// GPU benchmark: what loading a package entry costs against loading the raw cubin, side by side in
// one process (docs/design.md §5: lz4 <= 1.1x, zstd <= 1.4x; nvcc's -compress-all fatbin measured 1.9x).
//   fatpack_load_bench --cubin RAW.cubin --fatbin NVCC_COMPRESSED.fatbin [--runs N] PACKAGE...
// Every case loads the module with cuModuleLoadData and touches every kernel with
// cuModuleGetFunction (lazy loading hides nothing), then unloads it. Cases are interleaved run by
// run; medians are printed. A package case includes parsing, selection for the device, decompression
// (all cores) and both checksums. The driver is dlopen-ed directly: this measures the format, not the
// runtime library.
#include "fatpack/core/package.hpp"
#include "fatpack/core/select.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

using namespace fatpack::core;

namespace {

struct driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuModuleUnload)(CUmodule);
};

std::vector<std::uint8_t> read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(1);
  }
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s failed: CUresult %d\n", what, int(r));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string cubin_path, fatbin_path;
  std::vector<std::string> packages;
  int runs = 25;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--cubin" && i + 1 < argc) cubin_path = argv[++i];
    else if (a == "--fatbin" && i + 1 < argc) fatbin_path = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::max(3, std::atoi(argv[++i]));
    else packages.push_back(a);
  }
  if (cubin_path.empty()) {
    std::fprintf(stderr, "usage: fatpack_load_bench --cubin RAW.cubin [--fatbin F] [--runs N] PACKAGE...\n");
    return 2;
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("SKIPPED: no CUDA driver (libcuda.so.1: %s)\n", dlerror());
    return 77;
  }
  driver d{};
#define FATPACK_BENCH_SYM(name) d.name = reinterpret_cast<decltype(d.name)>(dlsym(lib, #name))
  FATPACK_BENCH_SYM(cuInit);
  FATPACK_BENCH_SYM(cuDeviceGet);
  FATPACK_BENCH_SYM(cuDeviceGetAttribute);
  FATPACK_BENCH_SYM(cuDevicePrimaryCtxRetain);
  FATPACK_BENCH_SYM(cuCtxSetCurrent);
  FATPACK_BENCH_SYM(cuModuleLoadData);
  FATPACK_BENCH_SYM(cuModuleGetFunction);
  FATPACK_BENCH_SYM(cuModuleUnload);
  if (d.cuInit(0) != CUDA_SUCCESS) {
    std::printf("SKIPPED: cuInit failed (no GPU?)\n");
    return 77;
  }
  CUdevice dev;
  CUcontext ctx;
  check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  int major = 0, minor = 0;
  d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());

  const auto cubin = read(cubin_path);
  std::vector<std::string> kernels;
  std::vector<std::pair<std::string, std::function<void()>>> cases;

  // The kernel names come from the first package's chosen entry (the same module everywhere).
  std::vector<std::vector<std::uint8_t>> pkg_bytes;
  for (const auto& p : packages) pkg_bytes.push_back(read(p));

  auto load_and_touch = [&](const void* image) {
    CUmodule m;
    check(d.cuModuleLoadData(&m, image), "cuModuleLoadData");
    for (const auto& k : kernels) {
      CUfunction f;
      check(d.cuModuleGetFunction(&f, m, k.c_str()), "cuModuleGetFunction");
    }
    check(d.cuModuleUnload(m), "cuModuleUnload");
  };

  cases.push_back({"raw cubin (cuModuleLoadData)", [&] { load_and_touch(cubin.data()); }});
  std::vector<std::uint8_t> fatbin;
  if (!fatbin_path.empty()) {
    fatbin = read(fatbin_path);
    cases.push_back({"nvcc -compress-all fatbin", [&] { load_and_touch(fatbin.data()); }});
  }
  for (std::size_t i = 0; i < packages.size(); ++i) {
    const auto& bytes = pkg_bytes[i];
    {
      auto pv = package_view::parse(byte_span(bytes), packages[i]);
      if (!pv) {
        std::fprintf(stderr, "%s\n", pv.error().message.c_str());
        return 1;
      }
      if (kernels.empty())
        for (auto k : pv->entries().front().kernels) kernels.emplace_back(k);
    }
    const std::string label = "fatpack " + std::string(codec_name([&] {
                                auto pv = package_view::parse(byte_span(bytes), packages[i]);
                                return pv->entries().front().codec;
                              }())) + " (" + packages[i].substr(packages[i].find_last_of('/') + 1) + ")";
    cases.push_back({label, [&, i, major, minor] {
                       const auto& b = pkg_bytes[i];
                       auto pv = package_view::parse(byte_span(b), "bench");
                       std::vector<entry_desc> descs;
                       for (const auto& e : pv->entries()) descs.push_back({e.target, e.ptx_isa});
                       const selection sel = select(descs, {std::uint32_t(major * 10 + minor), false}, 13000);
                       const entry_info& e = pv->entries()[*sel.chosen];
                       std::vector<std::uint8_t> raw(std::size_t(e.raw_size));
                       if (!pv->decompress_into(e.index, raw.data(), cores)) std::exit(1);
                       load_and_touch(raw.data());
                     }});
  }
  std::vector<std::vector<double>> ms(cases.size());
  for (auto& c : cases) c.second();  // warm-up
  for (int r = 0; r < runs; ++r) {
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const auto t0 = std::chrono::steady_clock::now();
      cases[c].second();
      ms[c].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::printf("device CC %d.%d, %zu kernels touched per load, %d runs each (interleaved), %u host threads\n", major,
              minor, kernels.size(), runs, cores);
  const double base = median(ms[0]);
  for (std::size_t c = 0; c < cases.size(); ++c)
    std::printf("  %-46s median %8.3f ms  %5.2fx raw cubin\n", cases[c].first.c_str(), median(ms[c]),
                median(ms[c]) / base);
  return 0;
}
