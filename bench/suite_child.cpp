// fatpack_suite, the child side: one fresh process times one case and prints "RESULT <ms> <jits>".
// The clock starts after the primary context exists and stops when every kernel asked for can be
// launched (cuModuleGetFunction / fatpack's function() succeeded); input files are read before it
// (fatpack: add_package_file reads and validates the package, as an embedded one is registered
// before main).
//
//   driver  (--image FILE | --ptx-from PKG) --names PKG [--kernels K] [--split0] [--all-modules]
//           cuModuleLoadDataEx of the image (or of each module's PTX taken out of PKG), then
//           cuModuleGetFunction of the first K kernels (0: all). --split0: CU_JIT_SPLIT_COMPILE=0 (the
//           JIT's optimizer on all CPUs, NVIDIA's best configuration; cuda.h 13.0: option 34).
//   fatpack --pkg PKG [--kernels K] [--all-modules]
//           fatpack::load_module + function() of the first K kernels; --all-modules: warm() first,
//           then every module (as fatpack_coldstart_bench). jits: fatpack::cache_stats().jits.
//   speed   --path sass|driver|driver-split0|fatpack (--image FILE | --pkg PKG) --names PKG --dump FILE
//           loads as above (untimed), then times every kernel with events (median of 10 launches)
//           and writes "<kernel> <ms> <count> <complete> <block> <limit>" and the output floats per kernel to FILE.
#include "suite.hpp"

#include "fatpack/fatpack.hpp"

#include "fatpack/core/package.hpp"

#include <cuda.h>  // types only: the driver is reached through fatpack::driver_entry_point

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace core = fatpack::core;

namespace suite {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fatpack_suite child: %s\n", what.c_str());
  std::exit(1);
}

template <class Fn>
Fn entry(const char* name) {
  auto p = fatpack::driver_entry_point(name);
  if (!p) die(p.error().what());
  return reinterpret_cast<Fn>(*p);
}

void check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) die(what + " failed: CUresult " + std::to_string(int(r)));
}

void take_context() {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  check(entry<CUresult (*)(CUdevice*, int)>("cuDeviceGet")(&dev, 0), "cuDeviceGet");
  check(entry<CUresult (*)(CUcontext*, CUdevice)>("cuDevicePrimaryCtxRetain")(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(entry<CUresult (*)(CUcontext)>("cuCtxSetCurrent")(ctx), "cuCtxSetCurrent");
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die("cannot read " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct module_image {
  std::string name;
  std::vector<std::uint8_t> bytes;  // PTX is NUL-terminated
  std::vector<std::string> kernels;
};

// Every module of a package: its kernels (from its first entry) and, with `ptx`, its PTX.
std::vector<module_image> modules_of(const std::string& pkg, bool ptx) {
  const auto bytes = read_file(pkg);
  auto pv = core::package_view::parse(core::byte_span(bytes), pkg);
  if (!pv) die(pv.error().message);
  std::vector<module_image> out;
  for (const auto& e : pv->entries()) {
    const std::string mod(e.module_name);
    auto it = std::find_if(out.begin(), out.end(), [&](const module_image& m) { return m.name == mod; });
    if (it == out.end()) {
      out.push_back({mod, {}, {}});
      it = out.end() - 1;
      for (auto k : e.kernels) it->kernels.emplace_back(k);
    }
    if (ptx && e.target.kind == core::entry_kind::ptx && it->bytes.empty()) {
      auto raw = pv->decompress(e.index);
      if (!raw) die(raw.error().message);
      it->bytes = std::move(*raw);
      it->bytes.push_back(0);
    }
  }
  if (out.empty()) die(pkg + " has no modules");
  return out;
}

struct options {
  std::string mode, image, ptx_from, names, pkg, path, dump;
  std::size_t kernels = 0;
  bool split0 = false, all_modules = false;
};

options parse(const std::vector<std::string>& a) {
  options o;
  if (a.empty()) die("no child mode");
  o.mode = a[0];
  for (std::size_t i = 1; i < a.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= a.size()) die(a[i] + " needs a value");
      return a[++i];
    };
    if (a[i] == "--image") o.image = value();
    else if (a[i] == "--ptx-from") o.ptx_from = value();
    else if (a[i] == "--names") o.names = value();
    else if (a[i] == "--pkg") o.pkg = value();
    else if (a[i] == "--path") o.path = value();
    else if (a[i] == "--dump") o.dump = value();
    else if (a[i] == "--kernels") o.kernels = std::strtoul(value().c_str(), nullptr, 10);
    else if (a[i] == "--split0") o.split0 = true;
    else if (a[i] == "--all-modules") o.all_modules = true;
    else die("unknown child argument " + a[i]);
  }
  return o;
}

std::vector<std::string> first(const std::vector<std::string>& v, std::size_t k) {
  return k == 0 || k >= v.size() ? v : std::vector<std::string>(v.begin(), v.begin() + static_cast<long>(k));
}

// The driver's side: module images loaded one after the other, kernels looked up.
std::vector<CUmodule> driver_load(const std::vector<module_image>& mods, const options& o,
                                  std::vector<std::vector<CUfunction>>* fns) {
  auto load = entry<CUresult (*)(CUmodule*, const void*, unsigned, CUjit_option*, void**)>("cuModuleLoadDataEx");
  auto getfn = entry<CUresult (*)(CUfunction*, CUmodule, const char*)>("cuModuleGetFunction");
  std::vector<CUmodule> out;
  for (const auto& m : mods) {
    CUjit_option keys[1] = {CU_JIT_SPLIT_COMPILE};
    void* vals[1] = {reinterpret_cast<void*>(std::uintptr_t{0})};
    CUmodule mod = nullptr;
    check(load(&mod, m.bytes.data(), o.split0 ? 1u : 0u, o.split0 ? keys : nullptr, o.split0 ? vals : nullptr),
          "cuModuleLoadDataEx(" + m.name + ")");
    std::vector<CUfunction> f;
    for (const auto& k : first(m.kernels, o.kernels)) {
      CUfunction fn = nullptr;
      check(getfn(&fn, mod, k.c_str()), "cuModuleGetFunction(" + k + ")");
      f.push_back(fn);
    }
    if (fns) fns->push_back(std::move(f));
    out.push_back(mod);
  }
  return out;
}

std::vector<module_image> driver_inputs(const options& o) {
  if (!o.ptx_from.empty()) {
    auto mods = modules_of(o.ptx_from, true);
    if (!o.all_modules) mods.resize(1);
    return mods;
  }
  if (o.image.empty() || o.names.empty()) die("driver needs --image FILE --names PKG or --ptx-from PKG");
  auto mods = modules_of(o.names, false);
  mods.resize(1);
  mods[0].bytes = read_file(o.image);
  mods[0].bytes.push_back(0);
  return mods;
}

// The fatpack side: load_module (after warm() for all modules) and function() of each kernel.
std::vector<fatpack::module> fatpack_load(const std::vector<module_image>& mods, const options& o,
                                          std::vector<std::vector<CUfunction>>* fns) {
  fatpack::warm_handle w;
  if (o.all_modules) {
    fatpack::warm_options wo;
    wo.device = 0;
    w = fatpack::warm(wo);
  }
  std::vector<fatpack::module> keep;
  for (const auto& m : mods) {
    fatpack::load_options lo;
    lo.device = 0;
    auto mod = fatpack::load_module(m.name, lo);
    if (!mod) die(mod.error().what());
    std::vector<CUfunction> f;
    for (const auto& k : first(m.kernels, o.kernels)) {
      auto fn = mod->function(k);
      if (!fn) die(fn.error().what());
      f.push_back(*fn);
    }
    if (fns) fns->push_back(std::move(f));
    keep.push_back(std::move(*mod));
  }
  if (o.all_modules)
    if (auto s = w.wait(); !s) die(s.error().what());
  return keep;
}

std::vector<module_image> fatpack_inputs(const options& o) {
  if (o.pkg.empty()) die("fatpack needs --pkg PKG");
  if (auto s = fatpack::add_package_file(o.pkg); !s) die(s.error().what());
  auto mods = modules_of(o.pkg, false);
  if (!o.all_modules) mods.resize(1);
  return mods;
}

void print_result(double ms) {
  const auto st = fatpack::cache_stats();
  std::printf("RESULT %.3f %lld\n", ms, static_cast<long long>(st.jits));
}

// Kernel speed: gen_kernels.py's kernels, (float* y, const float* a, const float* b, int n).
int speed(const options& o) {
  std::vector<module_image> mods;
  std::vector<std::vector<CUfunction>> fns;
  std::vector<fatpack::module> keep;
  if (o.path == "fatpack") {
    mods = fatpack_inputs(o);
    if (auto s = fatpack::init(); !s) die(s.error().what());
    take_context();
    keep = fatpack_load(mods, o, &fns);
  } else {
    options d = o;
    d.split0 = o.path == "driver-split0";
    if (o.path == "sass") d.image = o.image;
    else d.ptx_from = o.pkg;
    mods = driver_inputs(d);
    if (auto s = fatpack::init(); !s) die(s.error().what());
    take_context();
    driver_load(mods, d, &fns);
  }
  using alloc_fn = CUresult (*)(CUdeviceptr*, size_t);
  auto mem_alloc = entry<alloc_fn>("cuMemAlloc");
  auto htod = entry<CUresult (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD");
  auto dtoh = entry<CUresult (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH");
  auto launch = entry<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void**, void**)>("cuLaunchKernel");
  auto ev_create = entry<CUresult (*)(CUevent*, unsigned)>("cuEventCreate");
  auto ev_record = entry<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  auto ev_sync = entry<CUresult (*)(CUevent)>("cuEventSynchronize");
  auto ev_elapsed = entry<CUresult (*)(float*, CUevent, CUevent)>("cuEventElapsedTime");
  auto func_attr = entry<CUresult (*)(int*, CUfunction_attribute, CUfunction)>("cuFuncGetAttribute");
  // One wave of blocks; a block holds a kernel's whole tile (tile x tile threads: gen_kernels.py gives
  // kernel k<i> tile 8 * (1 + i % 4)) so that every shared-memory element it reads was written. Where
  // the compiled code cannot run that many threads, the block is smaller and the dump says so (its
  // results read unwritten shared memory and are not compared).
  const int n = 1024, grid = 132, max_block = 1024;
  const std::size_t in_count = std::size_t(n) * 32, out_cap = std::size_t(grid) * max_block;
  std::vector<float> a(in_count), b(in_count), y(out_cap);
  for (std::size_t i = 0; i < in_count; ++i) {
    a[i] = float((i * 7919) % 1000) / 1000.0f - 0.5f;
    b[i] = float((i * 104729) % 1000) / 1000.0f - 0.5f;
  }
  CUdeviceptr da = 0, db = 0, dy = 0;
  check(mem_alloc(&da, in_count * 4), "cuMemAlloc");
  check(mem_alloc(&db, in_count * 4), "cuMemAlloc");
  check(mem_alloc(&dy, out_cap * 4), "cuMemAlloc");
  check(htod(da, a.data(), in_count * 4), "cuMemcpyHtoD");
  check(htod(db, b.data(), in_count * 4), "cuMemcpyHtoD");
  CUevent e0 = nullptr, e1 = nullptr;
  check(ev_create(&e0, 0), "cuEventCreate");
  check(ev_create(&e1, 0), "cuEventCreate");
  std::FILE* out = std::fopen(o.dump.c_str(), "wb");
  if (!out) die("cannot write " + o.dump);
  for (std::size_t m = 0; m < mods.size(); ++m) {
    const auto names = first(mods[m].kernels, o.kernels);
    for (std::size_t k = 0; k < names.size(); ++k) {
      const int index = names[k].size() > 1 && names[k][0] == 'k' ? std::atoi(names[k].c_str() + 1) : 3;
      const int tile = 8 * (1 + index % 4);
      int limit = max_block;
      check(func_attr(&limit, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fns[m][k]), "cuFuncGetAttribute");
      const int block = std::min(tile * tile, limit);
      const std::size_t out_count = std::size_t(grid) * std::size_t(block);
      int nn = n;
      void* args[] = {&dy, &da, &db, &nn};
      std::vector<double> times;
      for (int r = 0; r < 12; ++r) {
        check(ev_record(e0, nullptr), "cuEventRecord");
        check(launch(fns[m][k], grid, 1, 1, unsigned(block), 1, 1, 0, nullptr, args, nullptr),
              "cuLaunchKernel(" + names[k] + ")");
        check(ev_record(e1, nullptr), "cuEventRecord");
        check(ev_sync(e1), "cuEventSynchronize");
        float ms = 0;
        check(ev_elapsed(&ms, e0, e1), "cuEventElapsedTime");
        if (r >= 2) times.push_back(ms);  // two warm-up launches
      }
      std::sort(times.begin(), times.end());
      check(dtoh(y.data(), dy, out_count * 4), "cuMemcpyDtoH");
      std::fprintf(out, "%s %.6f %zu %d %d %d\n", names[k].c_str(), times[times.size() / 2], out_count,
                   block == tile * tile ? 1 : 0, block, limit);
      std::fwrite(y.data(), 4, out_count, out);
      std::fputc('\n', out);
    }
  }
  std::fclose(out);
  std::printf("RESULT 0 %lld\n", static_cast<long long>(fatpack::cache_stats().jits));
  return 0;
}

}  // namespace

int child_main(const std::vector<std::string>& args) {
  const options o = parse(args);
  if (o.mode == "speed") return speed(o);
  if (o.mode == "driver") {
    const auto mods = driver_inputs(o);
    if (auto s = fatpack::init(); !s) die(s.error().what());
    take_context();
    const double t0 = now_ms();
    driver_load(mods, o, nullptr);
    const double ms = now_ms() - t0;
    std::printf("RESULT %.3f -1\n", ms);
    return 0;
  }
  if (o.mode == "fatpack") {
    const auto mods = fatpack_inputs(o);
    if (auto s = fatpack::init(); !s) die(s.error().what());
    take_context();
    const double t0 = now_ms();
    auto keep = fatpack_load(mods, o, nullptr);
    const double ms = now_ms() - t0;
    print_result(ms);
    return 0;
  }
  die("unknown child mode " + o.mode);
}

}  // namespace suite
