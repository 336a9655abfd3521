// fatpack_context_test: which context a load goes into (issue 11 §1), against the fake driver
// (tests/fakecuda, ctest runtime_contexts*, label unit) and against a real GPU (runtime_contexts_gpu,
// label gpu; exit 77 = skipped without one). Each case runs on a fresh thread, which starts with no
// current context, and prints one line "ok <case>" or "FAIL ...".
//
//   docs      the launch snippet of docs/runtime.md §1, compiled from the document itself
//             (docs_launch_snippet.inc, extracted at configure time): load, the typed kernel and its
//             launch succeed on a thread that had no context
//   primary   no current context -> the device's primary context, which is current after the load
//   own       an application's own context (cuCtxCreate) current -> the module is loaded there, the
//             context is still current after, the kernel launches in it
//   two       two own contexts -> two modules; a function of one does not launch in the other; the
//             same context again -> the same module
//   destroyed the module's context destroyed while the handle lives: check() and function() are
//             errors naming package, module, device and driver; releasing the handle is no crash and
//             never hands the dead module to the driver (the fake counts such stale uses)
//   reused    a destroyed context's address reused by a new context (the fake always reuses it; a
//             real driver may) -> a new module, not the dead one
//   devices   every device (fake: FAKECUDA_DEVICES=90,80): its own context and its primary context
//             each get the device's best entry (sm_90 on CC 9.0, sm_80 on CC 8.0)
//   devices-mixed  sm_90 SASS + compute_80 PTX: CC 9.x loads the SASS, CC 8.x the JIT's SASS, each
//             in the application's context on that device
//   port      fatpackModuleLoadData (the one-line port of cuModuleLoadData) of a fatbin, PTX and
//             (CC 9.x) an sm_90 cubin, given without a size and freed right after the call, in the
//             application's context on each device; fatpackModuleUnload; bytes it cannot read are
//             CUDA_ERROR_INVALID_IMAGE with the reason (in the Ex form's error log buffer too)
//   port-library  fatpackLibraryLoadData (the port of cuLibraryLoadData) of a fatbin, PTX and (CC 9.x)
//             an sm_90 cubin, freed right after the call: the CUlibrary's kernel launches in a context
//             made before, one made after, and the primary context; the same bytes again share the
//             library; it is unloaded (cuLibraryUnload) with the last fatpackLibraryUnload; options
//             honoured, ignored and refused; errors; the entry chosen for the current context's device
//   library   load_library: one CUlibrary for the device, its CUkernel launched (in place of a
//             CUfunction, and through its function) in a context made before the load, one made after,
//             the primary context, and the first again after another was destroyed; the second device
//             gets its own library and entry
//   library-preserved  a library of an uncompressed SASS entry of a package the runtime owns is loaded
//             with CU_LIBRARY_BINARY_IS_PRESERVED (the driver need not copy it), an LZ4 one is not; the
//             fake reads a preserved image again when the library enters a context made after the load
//   typed     module::kernel<Args...>: the arguments checked against the kernel's parameters (typed.cu's
//             mix: a pointer, a char, a double, an int, a pointer), the launch in the module's context
//             from a thread where another context is current (which stays current); on the fake the
//             parameter bytes the driver read are compared with the arguments, on a GPU affine runs
//   typed-cost  the time of a typed launch and of cuLaunchKernel of the same function (printed)
//   typed-errors  a wrong count, a wrong size (an int where a pointer is) and a wrong offset (two ints
//             where a double is) are errors naming the argument, offsets, sizes, kernel, module,
//             package, device and driver
//   globals   set_global / get_global round trip of a __constant__ struct, global() address and size,
//             a host object of another size refused (naming the variable and both sizes), an
//             unknown name; the same through a library in two contexts; the C API
//   variant   per device: exact SASS, lower-minor SASS (sm_80 on CC 8.6: FAKECUDA_DEVICES=90,86), `a`
//             SASS (sm_90a on CC 9.0), PTX through the JIT (with its ISA); per kernel; the C API
//   no-param-info (--no-param-info, with FAKECUDA_MISSING=cuFuncGetParamInfo,cuKernelGetParamInfo) a
//             driver older than CUDA 12.4: the package's PTX .param list is the check (module and
//             library); a SASS-only package: typed kernels are made unchecked, say so, and so do
//             their launch errors
//   no-id     (--no-ctx-id, with FAKECUDA_MISSING=cuCtxGetId,cuLibraryLoadData) a driver without
//             cuCtxGetId: primary contexts work and are shared; a load from an own context is refused
//             with a clear error; load_library and fatpackLibraryLoadData without cuLibraryLoadData
//             are clear errors
//
// On a real GPU the kernels run: vadd over 2^20 floats, checked against the CPU.
//
// Usage: fatpack_context_test [--no-ctx-id | --no-param-info] [ARTIFACTS_DIR]
#include "gpu_support.hpp"

#include "fatpack/fatpack.h"
#include "fatpack/core/package.hpp"

#include <cuda.h>  // types only: every call goes through fatpack::driver_entry_point

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace fatpack_gpu_test;

namespace {

bool g_fake = false;

// ---- driver calls (the driver fatpack loaded) ------------------------------------------------------

struct calls {
  // cuCtxCreate of the CUDA 13.0 ABI (_v4: creation parameters, flags, device). Asked for with the
  // 12.0 ABI, driver 580 gives an entry point that takes (context, 0, device) as something else
  // (CUDA_ERROR_INVALID_DEVICE on the H200), so this one is asked for with 13000.
  CUresult (*ctx_create_v4)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice) = nullptr;
  CUresult ctx_create(CUcontext* c, unsigned flags, CUdevice d) const { return ctx_create_v4(c, nullptr, flags, d); }
  decltype(&::cuCtxDestroy) ctx_destroy = nullptr;
  decltype(&::cuCtxGetCurrent) get_current = nullptr;
  decltype(&::cuCtxSetCurrent) set_current = nullptr;
  decltype(&::cuCtxPopCurrent) pop = nullptr;
  decltype(&::cuCtxSynchronize) sync = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) release = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuModuleGetFunction) get_function = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) htod = nullptr;
  decltype(&::cuMemcpyDtoH) dtoh = nullptr;
  decltype(&::cuLibraryGetKernel) library_kernel = nullptr;
};
calls cu;

template <class F>
void get(F& f, const char* name, int cuda_version = 12000) {
  auto p = fatpack::driver_entry_point(name, cuda_version);
  if (!p) {
    std::printf("FAIL: %s\n", p.error().what());
    std::exit(1);
  }
  f = reinterpret_cast<F>(p.value());
}

// The fake driver's counters (0 on a real driver).
int fake_stat(const char* name) {
  if (!g_fake) return 0;
  void* h = dlopen(fatpack::driver_library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<int (*)()>(dlsym(h, name)) : nullptr;
  return f ? f() : -1;
}
// The parameter bytes the fake driver read at the last launch (empty on a real driver).
std::vector<unsigned char> fake_last_params() {
  if (!g_fake) return {};
  void* h = dlopen(fatpack::driver_library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<int (*)(void*, int)>(dlsym(h, "fakecuda_last_launch_params")) : nullptr;
  if (!f) return {};
  std::vector<unsigned char> out(static_cast<std::size_t>(f(nullptr, 0)));
  f(out.data(), static_cast<int>(out.size()));
  return out;
}
template <class T>
T at(const std::vector<unsigned char>& bytes, std::size_t offset) {
  T v{};
  if (offset + sizeof(T) <= bytes.size()) std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}
int fake_modules_in(CUcontext c) {
  if (!g_fake) return 0;
  void* h = dlopen(fatpack::driver_library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<int (*)(void*)>(dlsym(h, "fakecuda_live_modules_in")) : nullptr;
  return f ? f(c) : -1;
}

CUcontext current() {
  CUcontext c = nullptr;
  (void)cu.get_current(&c);
  return c;
}

// ---- helpers ----------------------------------------------------------------------------------------

// Runs `fn` on a new thread (no current context) and prints "ok <name>" when it added no failure.
void run_case(const char* name, const std::function<void()>& fn) {
  const int before = g_failures;
  const int stale_before = fake_stat("fakecuda_stale_uses");
  std::thread t([&] {
    try {
      fn();
    } catch (const std::exception& e) {
      EXPECT(false, "exception: %s", e.what());
    }
  });
  t.join();
  EXPECT(fake_stat("fakecuda_stale_uses") == stale_before, "%s: a module of a destroyed context reached the driver",
         name);
  std::printf("%s %s\n", g_failures == before ? "ok" : "FAIL", name);
  std::fflush(stdout);
}

fatpack::module load(const char* module, int device = -1) {
  fatpack::load_options o;
  o.device = device;
  auto m = fatpack::load_module(module, o);
  EXPECT(m.has_value(), "load_module(%s): %s", module, m ? "" : m.error().what());
  return m ? std::move(m.value()) : fatpack::module();
}

// Launches vadd over n floats in the current context; on a real GPU checks c = a + b.
CUresult launch_vadd(const fatpack::module& m) {
  auto f = m.function("vadd");
  if (!f) {
    EXPECT(false, "function(vadd): %s", f.error().what());
    return CUDA_ERROR_NOT_FOUND;
  }
  const int n = g_fake ? 256 : 1 << 20;
  if (g_fake) {
    CUdeviceptr a = 0, b = 0, c = 0;
    int nn = n;
    void* args[] = {&a, &b, &c, &nn};
    return cu.launch(*f, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
  }
  std::vector<float> ha(n), hb(n), hc(n, -1.f);
  for (int i = 0; i < n; ++i) {
    ha[i] = static_cast<float>(i) * 0.5f;
    hb[i] = 3.f - static_cast<float>(i % 97);
  }
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  CUdeviceptr a = 0, b = 0, c = 0;
  CUresult r = cu.mem_alloc(&a, bytes);
  if (r == CUDA_SUCCESS) r = cu.mem_alloc(&b, bytes);
  if (r == CUDA_SUCCESS) r = cu.mem_alloc(&c, bytes);
  if (r == CUDA_SUCCESS) r = cu.htod(a, ha.data(), bytes);
  if (r == CUDA_SUCCESS) r = cu.htod(b, hb.data(), bytes);
  if (r != CUDA_SUCCESS) {
    EXPECT(false, "memory setup: CUresult %d", static_cast<int>(r));
    return r;
  }
  int nn = n;
  void* args[] = {&a, &b, &c, &nn};
  CUresult lr = cu.launch(*f, static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
  if (lr == CUDA_SUCCESS) {
    EXPECT(cu.sync() == CUDA_SUCCESS, "cuCtxSynchronize");
    EXPECT(cu.dtoh(hc.data(), c, bytes) == CUDA_SUCCESS, "cuMemcpyDtoH");
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += hc[i] != ha[i] + hb[i];
    EXPECT(wrong == 0, "vadd: %d of %d results wrong", wrong, n);
  }
  cu.mem_free(a);
  cu.mem_free(b);
  cu.mem_free(c);
  return lr;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The error of a handle whose context was destroyed.
void expect_destroyed_error(const fatpack::error& e, const char* package, const char* module) {
  EXPECT(e.code == fatpack::errc::cuda, "code %s", fatpack::errc_name(e.code));
  EXPECT(e.cuda_status == CUDA_ERROR_CONTEXT_IS_DESTROYED, "cuda_status %d", e.cuda_status);
  EXPECT(has(e.message, std::string("package '") + package + "'"), "no package in: %s", e.message.c_str());
  EXPECT(has(e.message, std::string("module '") + module + "'"), "no module in: %s", e.message.c_str());
  EXPECT(has(e.message, "device 0"), "no device in: %s", e.message.c_str());
  EXPECT(has(e.message, fatpack::driver_library()), "no driver in: %s", e.message.c_str());
  EXPECT(has(e.message, "destroyed"), "no cause in: %s", e.message.c_str());
}

// Runs fn(ordinal, info, context) for every device, in a context of its own (cuCtxCreate) made for it
// and destroyed after.
void per_device_own_context(int ndev, const std::function<void(int, const fatpack::device_info&, CUcontext)>& fn) {
  for (int d = 0; d < ndev; ++d) {
    const auto info = fatpack::device(d).value();
    CUdevice dev = 0;
    cu.device_get(&dev, d);
    CUcontext own = nullptr;
    EXPECT(cu.ctx_create(&own, 0, dev) == CUDA_SUCCESS, "cuCtxCreate on device %d", d);
    fn(d, info, own);
    cu.ctx_destroy(own);
  }
}

// The launch snippet of docs/runtime.md §1, verbatim (docs_launch_snippet.inc). Its undeclared names
// are given here.
int docs_snippet(CUresult& launched) {
  float *a = nullptr, *b = nullptr, *c = nullptr;
  int n = g_fake ? 256 : 0;  // on a GPU no thread touches the (null) pointers
  unsigned grid = 1;
  CUstream stream = nullptr;
#include "docs_launch_snippet.inc"
  launched = s ? CUDA_SUCCESS : static_cast<CUresult>(s.error().cuda_status ? s.error().cuda_status : CUDA_ERROR_UNKNOWN);
  if (!s) std::printf("  launch: %s\n", s.error().what());
  if (s) launched = cu.sync();  // the launch ran (on a GPU)
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool no_ctx_id = false, no_param_info = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--no-ctx-id")
      no_ctx_id = true;
    else if (std::string(argv[i]) == "--no-param-info")
      no_param_info = true;
    else
      g_artifacts = argv[i];
  }
  setenv("FATPACK_CACHE_DISABLE", "1", 1);
  if (auto s = fatpack::init(); !s) {
    std::printf("SKIPPED: no CUDA driver/GPU (%s)\n", s.error().message.c_str());
    return 77;
  }
  g_fake = fatpack::device(0).value().name.find("FakeCUDA") != std::string::npos;
  const int ndev = fatpack::device_count().value();
  std::printf("driver %s, %d device(s)%s\n", fatpack::driver_library().c_str(), ndev, g_fake ? " (fake)" : "");
  get(cu.ctx_create_v4, "cuCtxCreate", 13000);
  get(cu.ctx_destroy, "cuCtxDestroy");
  get(cu.get_current, "cuCtxGetCurrent");
  get(cu.set_current, "cuCtxSetCurrent");
  get(cu.pop, "cuCtxPopCurrent");
  get(cu.sync, "cuCtxSynchronize");
  get(cu.device_get, "cuDeviceGet");
  get(cu.retain, "cuDevicePrimaryCtxRetain");
  get(cu.release, "cuDevicePrimaryCtxRelease");
  get(cu.launch, "cuLaunchKernel");
  get(cu.get_function, "cuModuleGetFunction");
  if (!no_ctx_id) get(cu.library_kernel, "cuLibraryGetKernel");
  if (!g_fake) {
    get(cu.mem_alloc, "cuMemAlloc");
    get(cu.mem_free, "cuMemFree");
    get(cu.htod, "cuMemcpyHtoD");
    get(cu.dtoh, "cuMemcpyDtoH");
  }
  // vadd for docs/runtime.md's snippet; ctx_vadd for the rest. sm_80 and sm_90 SASS, compute_80 PTX.
  const std::vector<std::string> files = {"vadd.sm_80.cubin", "vadd.sm_90.cubin", "vadd.compute_80.ptx"};
  add_package("docs", files, "vadd");
  add_package("ctx", files, "ctx_vadd");
  add_package("mixed", {"vadd.sm_90.cubin", "vadd.compute_80.ptx"}, "ctx_mixed");
  // typed.cu (typed launches, globals, variants).
  add_package("typed", {"typed.sm_80.cubin", "typed.sm_90.cubin", "typed.compute_80.ptx"});
  add_package("typed_a", {"typed.sm_90a.cubin", "typed.compute_80.ptx"});
  add_package("typed_ptx", {"typed.compute_80.ptx"});
  add_package("typed_sass", {"typed.sm_90.cubin"});  // no PTX
  add_package("names", {"names.sm_90.cubin", "names.compute_90.ptx"});  // C++ kernel names

  if (no_param_info) {
    run_case("no-param-info: without cuFuncGetParamInfo the package's PTX .param list is the check", [] {
      auto m = load("typed");  // sm_90 SASS loaded; the package has compute_80 PTX of the module
      auto ok = m.kernel<const float*, char, double, int, float*>("mix");
      EXPECT(ok && ok->checked() && has(ok->check_note(), ".param list") && has(ok->check_note(), "cuFuncGetParamInfo"),
             "mix: %s", ok ? ok->check_note().c_str() : ok.error().what());
      auto wrong = m.kernel<const float*, char, double, int>("mix");
      EXPECT(!wrong && wrong.error().code == fatpack::errc::invalid_argument &&
                 has(wrong.error().message, "takes 5 parameters, 4 arguments were given") &&
                 has(wrong.error().message, "PTX"),
             "wrong count: %s", wrong ? "accepted" : wrong.error().what());
      if (!wrong) std::printf("  %s\n", wrong.error().message.c_str());
      auto lib = fatpack::load_library("typed");
      EXPECT(lib.has_value(), "load_library: %s", lib ? "" : lib.error().what());
      if (lib) {
        auto lk = lib->kernel<const float*, float*, int>("affine");
        EXPECT(!lk && has(lk.error().message, "takes 2 parameters"), "library: %s", lk ? "accepted" : lk.error().what());
      }
    });
    run_case("no-param-info: a kernel asked for by its C++ name is checked against its symbol's .entry", [] {
      auto m = load("names");
      auto ok = m.kernel<const float*, float*, int>("mylib::affine<float, 256>");
      EXPECT(ok && ok->checked() && has(ok->check_note(), ".entry '_ZN5mylib6affineIfLi256EEEvPKT_PS1_i'"),
             "affine: %s", ok ? ok->check_note().c_str() : ok.error().what());
      auto wrong = m.kernel<const float*, float*>("mylib::affine<float, 256>");
      EXPECT(!wrong && has(wrong.error().message, "takes 3 parameters, 2 arguments were given"), "wrong count: %s",
             wrong ? "accepted" : wrong.error().what());
    });
    run_case("no-param-info: a PTX entry that claims a huge raw size costs no exception, only the check", [] {
      // A package whose SASS loads and whose zstd PTX entry (never loaded) claims 1 GiB of raw text, as
      // much as its ~50 KB stored payload may claim (32768x). Reading the .param list allocated that
      // with std::vector: under an address-space limit the bad_alloc left kernel<...>().
      auto ptx = read_file("typed.compute_80.ptx");
      std::string pad = "\n//";
      std::uint64_t x = 88172645463325252ull;
      for (int i = 0; i < 100000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pad += "0123456789abcdef"[x & 15];
      }
      ptx.insert(ptx.end(), pad.begin(), pad.end());
      ptx.push_back('\n');
      std::vector<fatpack::core::entry_input> entries;
      for (const auto& [item, bytes] : {std::make_pair(std::string("typed.sm_90.cubin"), read_file("typed.sm_90.cubin")),
                                        std::make_pair(std::string("typed.compute_80.ptx"), ptx)}) {
        auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), item, "typed_huge");
        EXPECT(r.has_value(), "import %s: %s", item.c_str(), r ? "" : r.error().message.c_str());
        if (r) entries.insert(entries.end(), r->begin(), r->end());
      }
      fatpack::core::pack_options zstd;
      zstd.codec = fatpack::core::codec::zstd;
      auto pkg = fatpack::core::write_package("typed_huge", entries, zstd);
      EXPECT(pkg.has_value(), "write_package: %s", pkg ? "" : pkg.error().message.c_str());
      if (!pkg) return;
      std::vector<std::uint8_t>& b = *pkg;
      auto view = fatpack::core::package_view::parse(fatpack::core::byte_span(b), "typed_huge");
      EXPECT(view.has_value(), "parse: %s", view ? "" : view.error().message.c_str());
      if (!view) return;
      // docs/format.md §3-§4: header_size at 0x0C, entry_size 0x24, string table 0x28/0x30, tables
      // checksum 0x48; in an entry, raw_size at 0x20 and block_size at 0x38.
      auto get = [&](std::size_t at, int n) { std::uint64_t v = 0; std::memcpy(&v, b.data() + at, n); return v; };
      std::size_t ptx_index = 0;
      while (view->entries()[ptx_index].target.kind != fatpack::core::entry_kind::ptx) ++ptx_index;
      const std::uint64_t stored = view->entries()[ptx_index].stored_size;
      const std::uint64_t claim = std::min<std::uint64_t>((stored - 4) * 32768, std::uint64_t(1) << 30);
      EXPECT(claim == std::uint64_t(1) << 30, "the padded PTX stores only %llu bytes", (unsigned long long)stored);
      const std::size_t rec = get(0x0C, 4) + ptx_index * get(0x24, 4);
      const std::uint32_t block = 1u << 30;
      std::memcpy(b.data() + rec + 0x20, &claim, 8);
      std::memcpy(b.data() + rec + 0x38, &block, 4);
      std::vector<std::uint8_t> tables(b.begin(), b.begin() + std::ptrdiff_t(get(0x28, 8) + get(0x30, 8)));
      std::memset(tables.data() + 0x48, 0, 8);
      const std::uint64_t sum = fatpack::core::xxh3(fatpack::core::byte_span(tables));
      std::memcpy(b.data() + 0x48, &sum, 8);
      auto added = fatpack::add_package_memory(b.data(), b.size(), "typed_huge");
      EXPECT(added.ok(), "add_package_memory: %s", added ? "" : added.error().what());
      if (!added) return;
      static std::vector<std::uint8_t> keep;  // registered bytes stay
      keep = std::move(b);
      auto m = load("typed_huge");
      std::fflush(stdout);
      const pid_t pid = ::fork();
      if (pid == 0) {
        // At most 256 MiB more address space than now: a 1 GiB allocation fails.
        std::ifstream st("/proc/self/status");
        std::string line;
        unsigned long long vm_kb = 0;
        while (std::getline(st, line))
          if (line.rfind("VmSize:", 0) == 0) vm_kb = std::strtoull(line.c_str() + 7, nullptr, 10);
        const rlim_t cap = rlim_t(vm_kb) * 1024 + (rlim_t(256) << 20);
        const rlimit rl{cap, cap};
        if (vm_kb == 0 || ::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(3);
        try {
          auto k = m.kernel<const float*, char, double, int, float*>("mix");
          const bool ok = k && !k->checked() && has(k->check_note(), "out of host memory");
          if (!ok) std::printf("  child: %s\n", k ? k->check_note().c_str() : k.error().what());
          std::fflush(stdout);
          ::_exit(ok ? 0 : 1);
        } catch (const std::exception& e) {
          std::printf("  child: exception from kernel<...>(): %s\n", e.what());
          std::fflush(stdout);
          ::_exit(2);
        }
      }
      int status = 0;
      EXPECT(pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "child status %d (1: no note, 2: exception, 3: no limit set)", status);
    });
    run_case("no-param-info: no PTX in the package either: unchecked, and it says so", [] {
      auto m = load("typed_sass");
      auto k = m.kernel<const float*, char, double, int>("mix");  // one argument short: nothing can tell
      EXPECT(k.has_value(), "kernel<...>(mix): %s", k ? "" : k.error().what());
      if (k) {
        EXPECT(!k->checked(), "checked without cuFuncGetParamInfo");
        EXPECT(has(k->check_note(), "cuFuncGetParamInfo") && has(k->check_note(), "has no PTX") &&
                   has(k->check_note(), "could not be checked"),
               "note: %s", k->check_note().c_str());
        // A launch the driver refuses (a block of 2048 threads): its error carries the note.
        auto s = k->launch(1, 2048, 0, nullptr, nullptr, 'x', 1.0, 0);
        EXPECT(!s && has(s.error().message, "could not be checked") && has(s.error().message, "kernel 'mix'"),
               "launch error: %s", s ? "none" : s.error().what());
        if (!s) std::printf("  %s\n", s.error().message.c_str());
      }
      auto lib = fatpack::load_library("typed_sass");
      if (lib) {
        auto lk = lib->kernel<const float*, float*>("affine");
        EXPECT(lk && !lk->checked() && has(lk->check_note(), "cuKernelGetParamInfo"), "library: %s",
               lk ? lk->check_note().c_str() : lk.error().what());
      }
    });
    std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
    return g_failures ? 1 : 0;
  }

  if (no_ctx_id) {
    run_case("no-id: primary contexts work and are shared", [] {
      auto m1 = load("ctx_vadd");
      EXPECT(m1.primary_context(), "not the primary context");
      EXPECT(current() == m1.context(), "the primary context is not current after the load");
      EXPECT(launch_vadd(m1) == CUDA_SUCCESS, "launch");
      auto m2 = load("ctx_vadd");
      EXPECT(m1.handle() == m2.handle(), "the primary context's module is not shared");
    });
    run_case("no-id: an own context is refused with a clear error", [] {
      CUcontext c = nullptr;
      EXPECT(cu.ctx_create(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
      auto m = fatpack::load_module("ctx_vadd");
      EXPECT(!m, "loaded into an own context without cuCtxGetId");
      if (!m) {
        EXPECT(m.error().code == fatpack::errc::driver_symbol_missing, "code %s", fatpack::errc_name(m.error().code));
        EXPECT(has(m.error().message, "cuCtxGetId"), "message: %s", m.error().message.c_str());
        EXPECT(has(m.error().message, "ctx_vadd"), "message: %s", m.error().message.c_str());
      }
      EXPECT(current() == c, "the application's context is no longer current");
      cu.ctx_destroy(c);
    });
    run_case("no-library: a driver without cuLibraryLoadData gets a clear error from load_library", [] {
      auto lib = fatpack::load_library("ctx_vadd");
      EXPECT(!lib, "load_library without cuLibraryLoadData");
      if (!lib)
        EXPECT(lib.error().code == fatpack::errc::driver_symbol_missing && has(lib.error().message, "cuLibraryLoadData"),
               "%s", lib.error().what());
    });
    run_case("no-library: fatpackLibraryLoadData without cuLibraryLoadData is CUDA_ERROR_NOT_SUPPORTED", [] {
      std::vector<std::uint8_t> bytes = read_file("vadd.fatbin");
      CUlibrary lib = nullptr;
      CUresult r = fatpackLibraryLoadData(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      EXPECT(r == CUDA_ERROR_NOT_SUPPORTED && !lib, "CUresult %d", static_cast<int>(r));
      EXPECT(has(fatpack_last_error(), "cuLibraryLoadData") && has(fatpack_last_error(), "fatpackLibraryLoadData"), "%s",
             fatpack_last_error());
    });
    std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
    return g_failures ? 1 : 0;
  }

  run_case("docs: the launch snippet of docs/runtime.md runs as written", [] {
    EXPECT(current() == nullptr, "the thread starts with a context");
    CUresult launched = CUDA_ERROR_UNKNOWN;
    EXPECT(docs_snippet(launched) == 0, "the snippet returned early");
    EXPECT(launched == CUDA_SUCCESS, "the typed launch after load_module: CUresult %d", static_cast<int>(launched));
  });

  run_case("primary: no current context -> the device's primary context, current after the load", [] {
    EXPECT(current() == nullptr, "the thread starts with a context");
    auto m = load("ctx_vadd");
    EXPECT(m.primary_context(), "not the primary context");
    EXPECT(m.device() == 0, "device %d", m.device());
    EXPECT(current() != nullptr && current() == m.context(), "the module's primary context is not current");
    EXPECT(launch_vadd(m) == CUDA_SUCCESS, "launch in the primary context");
  });

  run_case("own: the application's cuCtxCreate context -> loaded there, still current after", [] {
    CUcontext c = nullptr;
    EXPECT(cu.ctx_create(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
    auto m = load("ctx_vadd");
    EXPECT(m.context() == c, "loaded into %p, not the current context %p", static_cast<void*>(m.context()),
           static_cast<void*>(c));
    EXPECT(!m.primary_context(), "reported as the primary context");
    EXPECT(current() == c, "the application's context is not current after the load");
    if (g_fake) EXPECT(fake_modules_in(c) == 1, "%d modules in the context", fake_modules_in(c));
    CUresult r = launch_vadd(m);
    EXPECT(r == CUDA_SUCCESS, "launch in the application's context: CUresult %d", static_cast<int>(r));
    EXPECT(m.check().ok(), "check(): %s", m.check() ? "" : m.check().error().what());
    m.reset();
    EXPECT(cu.ctx_destroy(c) == CUDA_SUCCESS, "cuCtxDestroy");
  });

  run_case("two: two contexts -> two modules; the same context again -> the same module", [] {
    CUcontext c1 = nullptr, c2 = nullptr;
    EXPECT(cu.ctx_create(&c1, 0, 0) == CUDA_SUCCESS, "cuCtxCreate 1");
    auto m1 = load("ctx_vadd");
    EXPECT(cu.ctx_create(&c2, 0, 0) == CUDA_SUCCESS, "cuCtxCreate 2");  // pushed: c2 current
    auto m2 = load("ctx_vadd");
    EXPECT(m1.context() == c1 && m2.context() == c2, "contexts %p %p", static_cast<void*>(m1.context()),
           static_cast<void*>(m2.context()));
    EXPECT(m1.handle() != m2.handle(), "one module for two contexts");
    EXPECT(launch_vadd(m2) == CUDA_SUCCESS, "launch of context 2's module in context 2");
    // A function of context 1's module does not launch in context 2 (the driver refuses it).
    CUdeviceptr p = 0;
    int n = 0;  // no thread touches the (null) pointers on a real GPU
    void* args[] = {&p, &p, &p, &n};
    CUresult wrong = cu.launch(m1.function("vadd").value(), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
    EXPECT(wrong != CUDA_SUCCESS, "context 1's function launched in context 2");
    CUcontext popped = nullptr;
    cu.pop(&popped);  // c1 current again
    auto m1b = load("ctx_vadd");
    EXPECT(m1b.handle() == m1.handle() && &m1b.report() == &m1.report(), "context 1 got a second module");
    EXPECT(launch_vadd(m1b) == CUDA_SUCCESS, "launch of context 1's module in context 1");
    m1.reset();
    m1b.reset();
    m2.reset();
    cu.ctx_destroy(c2);
    cu.ctx_destroy(c1);
  });

  run_case("destroyed: handles of a destroyed context report it; releasing them is no crash", [] {
    CUcontext c = nullptr;
    EXPECT(cu.ctx_create(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
    auto m = load("ctx_vadd");
    EXPECT(m.function("vadd").has_value(), "function before the destroy");
    EXPECT(cu.ctx_destroy(c) == CUDA_SUCCESS, "cuCtxDestroy");
    auto s = m.check();
    EXPECT(!s.ok(), "check() is ok after the context was destroyed");
    if (!s) {
      expect_destroyed_error(s.error(), "ctx", "ctx_vadd");
      std::printf("  check(): %s\n", s.error().what());
    }
    auto f = m.function("vadd");
    EXPECT(!f, "function() works after the context was destroyed");
    if (!f) expect_destroyed_error(f.error(), "ctx", "ctx_vadd");
    m.reset();  // nothing reaches the driver (run_case counts the fake's stale uses)
  });

  run_case("destroyed (C API): fatpack_module_check and fatpack_module_function report it", [] {
    CUcontext c = nullptr;
    EXPECT(cu.ctx_create(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
    fatpack_module* m = nullptr;
    EXPECT(fatpack_load_module("ctx_vadd", "ctx", -1, &m) == FATPACK_OK, "%s", fatpack_last_error());
    EXPECT(fatpack_module_context(m) == c, "not loaded into the current context");
    EXPECT(fatpack_module_check(m) == FATPACK_OK, "check before the destroy: %s", fatpack_last_error());
    EXPECT(cu.ctx_destroy(c) == CUDA_SUCCESS, "cuCtxDestroy");
    EXPECT(fatpack_module_check(m) == FATPACK_ERROR_CUDA, "check after the destroy");
    EXPECT(fatpack_last_cuda_status() == CUDA_ERROR_CONTEXT_IS_DESTROYED, "cuda status %d", fatpack_last_cuda_status());
    EXPECT(has(fatpack_last_error(), "ctx_vadd") && has(fatpack_last_error(), "destroyed"), "%s", fatpack_last_error());
    struct CUfunc_st* f = nullptr;
    EXPECT(fatpack_module_function(m, "vadd", &f) == FATPACK_ERROR_CUDA, "function after the destroy");
    fatpack_module_release(m);
  });

  run_case("reused: a new context at a destroyed context's address -> a new module", [] {
    CUcontext c1 = nullptr, c2 = nullptr;
    EXPECT(cu.ctx_create(&c1, 0, 0) == CUDA_SUCCESS, "cuCtxCreate 1");
    auto m1 = load("ctx_vadd");
    EXPECT(cu.ctx_destroy(c1) == CUDA_SUCCESS, "cuCtxDestroy");
    EXPECT(cu.ctx_create(&c2, 0, 0) == CUDA_SUCCESS, "cuCtxCreate 2");
    if (g_fake) EXPECT(c2 == c1, "the fake driver did not reuse the address");
    std::printf("  address %s\n", c2 == c1 ? "reused" : "not reused (real driver)");
    const int loads = fake_stat("fakecuda_module_loads");
    auto m2 = load("ctx_vadd");
    EXPECT(&m2.report() != &m1.report(), "the dead context's module was returned");
    if (g_fake) EXPECT(fake_stat("fakecuda_module_loads") == loads + 1, "no new module load");
    EXPECT(m2.context() == c2 && m2.check().ok(), "the new module is not in the new context");
    EXPECT(!m1.check().ok(), "the old handle does not see its context destroyed");
    EXPECT(launch_vadd(m2) == CUDA_SUCCESS, "launch in the new context");
    m1.reset();
    m2.reset();
    cu.ctx_destroy(c2);
  });

  run_case("devices: each device, own and primary context, gets its own best entry", [ndev] {
    auto want = [](const fatpack::device_info& info) {
      return std::string(info.arch >= 90 ? "sm_90" : info.arch >= 80 ? "sm_80" : "");
    };
    per_device_own_context(ndev, [&](int d, const fatpack::device_info& info, CUcontext own) {
      auto m = load("ctx_vadd");  // device -1: the current context's device
      EXPECT(m.device() == d && m.context() == own, "device %d: loaded on device %d", d, m.device());
      EXPECT(m.report().target == want(info) || (want(info).empty() && m.report().jit), "device %d (CC %d): got %s", d,
             static_cast<int>(info.arch), m.report().target.c_str());
      EXPECT(launch_vadd(m) == CUDA_SUCCESS, "device %d: launch in its own context", d);
      std::printf("  device %d (CC %d.%d): own context -> %s\n", d, info.cc_major, info.cc_minor,
                  m.report().target.c_str());
    });
    for (int d = 0; d < ndev; ++d) {
      const auto info = fatpack::device(d).value();
      CUdevice dev = 0;
      cu.device_get(&dev, d);
      CUcontext primary = nullptr;
      EXPECT(cu.retain(&primary, dev) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain %d", d);
      cu.set_current(primary);  // what cudaSetDevice(d) does
      {
        auto m = load("ctx_vadd");
        EXPECT(m.device() == d && m.context() == primary && m.primary_context(), "device %d: primary", d);
        EXPECT(m.report().target == want(info) || (want(info).empty() && m.report().jit), "device %d: got %s", d,
               m.report().target.c_str());
        EXPECT(launch_vadd(m) == CUDA_SUCCESS, "device %d: launch in its primary context", d);
        std::printf("  device %d (CC %d.%d): primary context -> %s\n", d, info.cc_major, info.cc_minor,
                    m.report().target.c_str());
      }
      cu.set_current(nullptr);
      cu.release(dev);
    }
  });

  run_case("devices-mixed: SASS for one device, the JIT for the other, each in its own context", [ndev] {
    // sm_90 SASS and compute_80 PTX: CC 9.x loads the SASS, CC 8.x JIT-compiles the PTX for itself.
    per_device_own_context(ndev, [&](int d, const fatpack::device_info& info, CUcontext own) {
      auto m = load("ctx_mixed");
      const bool sass = info.cc_major == 9;
      EXPECT(m.device() == d && m.context() == own, "device %d: loaded on device %d", d, m.device());
      EXPECT(m.report().jit == !sass, "device %d (CC %d): jit=%d, target %s", d, static_cast<int>(info.arch),
             m.report().jit, m.report().target.c_str());
      EXPECT(launch_vadd(m) == CUDA_SUCCESS, "device %d: launch", d);
      std::printf("  device %d (CC %d.%d): %s%s\n", d, info.cc_major, info.cc_minor, m.report().target.c_str(),
                  m.report().jit ? " through the JIT" : "");
    });
  });

  run_case("port: fatpackModuleLoadData of a cubin, PTX and a fatbin in the application's context", [ndev] {
    per_device_own_context(ndev, [&](int d, const fatpack::device_info& info, CUcontext own) {
      std::vector<std::string> images = {"vadd.fatbin", "vadd.compute_80.ptx"};
      if (info.cc_major == 9) images.push_back("vadd.sm_90.cubin");
      for (const auto& name : images) {
        std::vector<std::uint8_t> bytes = read_file(name);
        if (name.find(".ptx") != std::string::npos) bytes.push_back(0);  // PTX ends with its NUL
        bytes.resize(bytes.size() + 64, 0xAB);  // what follows the image is not read as part of it
        CUmodule mod = nullptr;
        CUresult r = fatpackModuleLoadData(&mod, bytes.data());  // the one changed line of a port
        EXPECT(r == CUDA_SUCCESS && mod, "device %d: %s: CUresult %d: %s", d, name.c_str(), static_cast<int>(r),
               fatpack_last_error());
        std::vector<std::uint8_t>().swap(bytes);  // the caller's bytes may go at once
        if (r != CUDA_SUCCESS) continue;
        CUfunction f = nullptr;
        EXPECT(cu.get_function(&f, mod, "vadd") == CUDA_SUCCESS, "device %d: %s: cuModuleGetFunction", d, name.c_str());
        if (f) {
          // A module of the current context: the launch finds it.
          CUdeviceptr p = 0;
          int n = 0;
          void* args[] = {&p, &p, &p, &n};
          if (g_fake)
            EXPECT(cu.launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS, "device %d: %s: launch",
                   d, name.c_str());
        }
        if (g_fake) EXPECT(fake_modules_in(own) == 1, "device %d: %s: %d modules in the context", d, name.c_str(),
                           fake_modules_in(own));
        EXPECT(fatpackModuleUnload(mod) == CUDA_SUCCESS, "device %d: %s: unload", d, name.c_str());
        EXPECT(static_cast<CUresult>(fatpackModuleUnload(mod)) == CUDA_ERROR_INVALID_HANDLE, "second unload");
        if (g_fake) EXPECT(fake_modules_in(own) == 0, "device %d: %s: not unloaded", d, name.c_str());
        std::printf("  device %d (CC %d.%d): %s ok\n", d, info.cc_major, info.cc_minor, name.c_str());
      }
      EXPECT(current() == own, "the application's context is no longer current");
    });
  });

  run_case("port: what fatpack cannot read is CUDA_ERROR_INVALID_IMAGE, with the reason", [] {
    CUcontext own = nullptr;
    EXPECT(cu.ctx_create(&own, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
    const char junk[] = "this is no image";
    CUmodule mod = nullptr;
    CUresult r = fatpackModuleLoadData(&mod, junk);
    EXPECT(r == CUDA_ERROR_INVALID_IMAGE && !mod, "CUresult %d", static_cast<int>(r));
    EXPECT(has(fatpack_last_error(), "fatpackModuleLoadData"), "message: %s", fatpack_last_error());
    char log[512] = {};
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof log))};
    r = fatpackModuleLoadDataEx(&mod, junk, 2, keys, values);
    EXPECT(r == CUDA_ERROR_INVALID_IMAGE, "Ex: CUresult %d", static_cast<int>(r));
    EXPECT(has(log, "fatpackModuleLoadDataEx") && has(log, "PTX"), "error log: %s", log);
    cu.ctx_destroy(own);
  });

  run_case("port-library: fatpackLibraryLoadData of a fatbin, PTX and a cubin; one handle for every context", [] {
    const auto info = fatpack::device(0).value();
    std::vector<std::string> images = {"vadd.fatbin", "vadd.compute_80.ptx"};
    if (info.cc_major == 9) images.push_back("vadd.sm_90.cubin");
    CUcontext before = nullptr;
    EXPECT(cu.ctx_create(&before, 0, 0) == CUDA_SUCCESS, "cuCtxCreate (before the loads)");
    CUdevice dev0 = 0;
    cu.device_get(&dev0, 0);
    for (const auto& name : images) {
      std::vector<std::uint8_t> bytes = read_file(name);
      if (name.find(".ptx") != std::string::npos) bytes.push_back(0);  // PTX ends with its NUL
      bytes.resize(bytes.size() + 64, 0xAB);  // what follows the image is not read as part of it
      const int live = fake_stat("fakecuda_live_libraries");
      CUlibrary lib = nullptr;
      CUresult r = fatpackLibraryLoadData(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      EXPECT(r == CUDA_SUCCESS && lib, "%s: CUresult %d: %s", name.c_str(), static_cast<int>(r), fatpack_last_error());
      CUlibrary again = nullptr;
      EXPECT(fatpackLibraryLoadData(&again, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) == CUDA_SUCCESS &&
                 again == lib,
             "%s: the same bytes again gave another library", name.c_str());
      std::vector<std::uint8_t>().swap(bytes);  // the caller's bytes may go at once
      if (r != CUDA_SUCCESS) continue;
      EXPECT(current() == before, "%s: the load changed the current context", name.c_str());
      if (g_fake) EXPECT(fake_stat("fakecuda_live_libraries") == live + 1, "%s: %d libraries, not %d", name.c_str(),
                         fake_stat("fakecuda_live_libraries"), live + 1);
      CUkernel k = nullptr;
      EXPECT(cu.library_kernel(&k, lib, "vadd") == CUDA_SUCCESS && k, "%s: cuLibraryGetKernel", name.c_str());
      CUdeviceptr p = 0;
      int n = 0;  // no thread touches the (null) pointers on a real GPU
      void* args[] = {&p, &p, &p, &n};
      auto launch = [&](const char* where) {
        EXPECT(cu.launch(reinterpret_cast<CUfunction>(k), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS,
               "%s: launch of the CUkernel in %s", name.c_str(), where);
        EXPECT(cu.sync() == CUDA_SUCCESS, "%s: cuCtxSynchronize in %s", name.c_str(), where);  // done before any unload
      };
      if (k) {
        launch("the context made before the load");
        CUcontext after = nullptr;
        EXPECT(cu.ctx_create(&after, 0, 0) == CUDA_SUCCESS, "cuCtxCreate (after the load)");
        launch("a context made after the load");
        cu.ctx_destroy(after);
        CUcontext primary = nullptr;
        EXPECT(cu.retain(&primary, dev0) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
        cu.set_current(primary);
        launch("the primary context");
        cu.set_current(before);
        cu.release(dev0);
      }
      // Two loads, two unloads: the library stays until the last.
      EXPECT(fatpackLibraryUnload(lib) == CUDA_SUCCESS, "%s: first unload", name.c_str());
      if (g_fake) EXPECT(fake_stat("fakecuda_live_libraries") == live + 1, "%s: unloaded by the first of two", name.c_str());
      if (k) launch("the context made before the load, after one of two unloads");
      EXPECT(fatpackLibraryUnload(again) == CUDA_SUCCESS, "%s: second unload", name.c_str());
      if (g_fake) EXPECT(fake_stat("fakecuda_live_libraries") == live, "%s: not unloaded by the last", name.c_str());
      EXPECT(static_cast<CUresult>(fatpackLibraryUnload(lib)) == CUDA_ERROR_INVALID_HANDLE, "%s: a third unload",
             name.c_str());
      std::printf("  device 0 (CC %d.%d): %s ok\n", info.cc_major, info.cc_minor, name.c_str());
    }
    cu.ctx_destroy(before);
  });

  run_case("port-library: options honoured, ignored and refused; what fatpack cannot read", [] {
    const std::vector<std::uint8_t> fatbin = read_file("vadd.fatbin");
    CUlibrary lib = nullptr;
    // Accepted: a JIT option fatpack ignores, the error log buffer, and the preserved-binary hint (which
    // changes nothing: the bytes may still go right after the call).
    {
      std::vector<std::uint8_t> copy = fatbin;
      char log[256] = {};
      CUjit_option jit[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* jit_values[] = {reinterpret_cast<void*>(std::uintptr_t(1)), log,
                            reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof log))};
      CUlibraryOption opt[] = {CU_LIBRARY_BINARY_IS_PRESERVED};
      void* opt_values[] = {reinterpret_cast<void*>(std::uintptr_t(1))};
      CUresult r = fatpackLibraryLoadData(&lib, copy.data(), jit, jit_values, 3, opt, opt_values, 1);
      std::vector<std::uint8_t>().swap(copy);
      EXPECT(r == CUDA_SUCCESS && lib, "accepted options: CUresult %d: %s", static_cast<int>(r), fatpack_last_error());
      CUkernel k = nullptr;
      if (lib) EXPECT(cu.library_kernel(&k, lib, "vadd") == CUDA_SUCCESS, "cuLibraryGetKernel after the bytes went");
      if (lib) EXPECT(fatpackLibraryUnload(lib) == CUDA_SUCCESS, "unload");
    }
    auto refused = [&](const char* what, CUresult want, const char* in_message, const void* image, CUjit_option* jit,
                       void** jit_values, unsigned njit, CUlibraryOption* opt, void** opt_values, unsigned nopt) {
      lib = reinterpret_cast<CUlibrary>(std::uintptr_t(1));  // must come back null
      CUresult r = fatpackLibraryLoadData(&lib, image, jit, jit_values, njit, opt, opt_values, nopt);
      EXPECT(r == want && lib == nullptr, "%s: CUresult %d, expected %d", what, static_cast<int>(r), static_cast<int>(want));
      EXPECT(has(fatpack_last_error(), "fatpackLibraryLoadData") && has(fatpack_last_error(), in_message),
             "%s: message: %s", what, fatpack_last_error());
    };
    CUlibraryOption host_table[] = {CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE};
    CUlibraryOption unknown_option[] = {static_cast<CUlibraryOption>(77)};
    CUjit_option unknown_jit[] = {static_cast<CUjit_option>(9999)};
    void* one_value[] = {nullptr};
    refused("cudart's host table", CUDA_ERROR_NOT_SUPPORTED, "CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE",
            fatbin.data(), nullptr, nullptr, 0, host_table, one_value, 1);
    refused("an unknown library option", CUDA_ERROR_INVALID_VALUE, "not a CUlibraryOption", fatbin.data(), nullptr,
            nullptr, 0, unknown_option, one_value, 1);
    refused("library options without arrays", CUDA_ERROR_INVALID_VALUE, "no option array", fatbin.data(), nullptr,
            nullptr, 0, nullptr, nullptr, 2);
    refused("an unknown JIT option", CUDA_ERROR_INVALID_VALUE, "not a CUjit_option", fatbin.data(), unknown_jit,
            one_value, 1, nullptr, nullptr, 0);
    refused("JIT options without arrays", CUDA_ERROR_INVALID_VALUE, "no option array", fatbin.data(), nullptr, nullptr,
            3, nullptr, nullptr, 0);
    refused("a null image", CUDA_ERROR_INVALID_VALUE, "null image", nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0);
    EXPECT(fatpackLibraryLoadData(nullptr, fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) ==
               CUDA_ERROR_INVALID_VALUE,
           "a null handle pointer");
    // Bytes fatpack cannot read: the reason, in fatpack_last_error() and in the caller's error log.
    const char junk[] = "this is no image";
    char log[512] = {};
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof log))};
    refused("junk", CUDA_ERROR_INVALID_IMAGE, "PTX", junk, keys, values, 2, nullptr, nullptr, 0);
    EXPECT(has(log, "fatpackLibraryLoadData") && has(log, "PTX"), "error log: %s", log);
    // A log callback that throws: the failure still returns its CUresult (no exception crosses the C API).
    const fatpack::log_level level = fatpack::get_log_level();
    fatpack::set_log_level(fatpack::log_level::error);
    int calls = 0;
    fatpack::set_log_callback([&calls](fatpack::log_level, std::string_view) {
      ++calls;
      throw std::runtime_error("a log callback that throws");
    });
    refused("junk, with a log callback that throws", CUDA_ERROR_INVALID_IMAGE, "PTX", junk, nullptr, nullptr, 0, nullptr,
            nullptr, 0);
    fatpack::set_log_callback(nullptr);
    fatpack::set_log_level(level);
    EXPECT(calls == 1, "the log callback was called %d times", calls);
    // A handle fatpack did not return never reaches the driver.
    EXPECT(static_cast<CUresult>(fatpackLibraryUnload(reinterpret_cast<CUlibrary>(log))) == CUDA_ERROR_INVALID_HANDLE,
           "unload of a handle fatpack did not return");
    // The module port's Ex form checks its JIT options alike.
    CUmodule mod = nullptr;
    EXPECT(static_cast<CUresult>(fatpackModuleLoadDataEx(&mod, fatbin.data(), 1, unknown_jit, one_value)) ==
                   CUDA_ERROR_INVALID_VALUE &&
               !mod,
           "fatpackModuleLoadDataEx with an unknown JIT option");
  });

  run_case("port-library: the entry is chosen for the current context's device", [ndev] {
    if (ndev < 2) {
      std::printf("  one device: nothing to compare\n");
      return;
    }
    const std::vector<std::uint8_t> fatbin = read_file("vadd.fatbin");
    std::vector<CUlibrary> libs(2, nullptr);
    std::vector<CUcontext> own(2, nullptr);
    for (int d = 0; d < 2; ++d) {
      CUdevice dev = 0;
      cu.device_get(&dev, d);
      EXPECT(cu.ctx_create(&own[d], 0, dev) == CUDA_SUCCESS, "cuCtxCreate on device %d", d);
      EXPECT(fatpackLibraryLoadData(&libs[d], fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) == CUDA_SUCCESS,
             "device %d: %s", d, fatpack_last_error());
      CUcontext popped = nullptr;
      cu.pop(&popped);
    }
    EXPECT(libs[0] && libs[1] && libs[0] != libs[1], "one library for two devices");
    CUdeviceptr p = 0;
    int n = 0;
    void* args[] = {&p, &p, &p, &n};
    auto launch = [&](int lib_of, int in_context_of) {
      CUkernel k = nullptr;
      if (!libs[lib_of] || cu.library_kernel(&k, libs[lib_of], "vadd") != CUDA_SUCCESS) return CUDA_ERROR_NOT_FOUND;
      cu.set_current(own[in_context_of]);
      CUresult r = cu.launch(reinterpret_cast<CUfunction>(k), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
      cu.set_current(nullptr);
      return r;
    };
    for (int d = 0; d < 2; ++d) EXPECT(launch(d, d) == CUDA_SUCCESS, "device %d: its library's kernel", d);
    if (g_fake) {
      // Devices of different CC (9.0, 8.0): device 1's library holds sm_80 SASS, which CC 9.0 cannot run.
      CUresult r = launch(1, 0);
      EXPECT(r == CUDA_ERROR_NO_BINARY_FOR_GPU, "device 1's library on device 0: CUresult %d", static_cast<int>(r));
    }
    for (int d = 0; d < 2; ++d) {
      if (libs[d]) EXPECT(fatpackLibraryUnload(libs[d]) == CUDA_SUCCESS, "unload %d", d);
      cu.ctx_destroy(own[d]);
    }
  });

  run_case("library: one load, its kernels launch in every context of the device, present and future", [ndev] {
    CUcontext before = nullptr;
    EXPECT(cu.ctx_create(&before, 0, 0) == CUDA_SUCCESS, "cuCtxCreate (before the load)");
    fatpack::load_options o;
    o.device = 0;
    auto lib = fatpack::load_library("ctx_vadd", o);
    EXPECT(lib.has_value(), "load_library: %s", lib ? "" : lib.error().what());
    if (!lib) return;
    EXPECT(current() == before, "load_library changed the current context");
    EXPECT(lib->report().target == "sm_90" || fatpack::device(0).value().cc_major != 9, "target %s",
           lib->report().target.c_str());
    auto again = fatpack::load_library("ctx_vadd", o);
    EXPECT(again && again->handle() == lib->handle(), "a second library for the same module and device");
    auto k = lib->kernel("vadd");
    EXPECT(k.has_value(), "kernel(vadd): %s", k ? "" : k.error().what());
    auto missing = lib->kernel("no_such_kernel");
    EXPECT(!missing && missing.error().code == fatpack::errc::not_found && has(missing.error().message, "saxpy"),
           "kernel(no_such_kernel): %s", missing ? "found" : missing.error().what());
    if (!k) return;
    CUdeviceptr p = 0;
    int n = 0;  // no thread touches the (null) pointers on a real GPU
    void* args[] = {&p, &p, &p, &n};
    // A CUkernel in place of a CUfunction, and the kernel's function, in each context.
    auto launch_in = [&](const char* what) {
      EXPECT(cu.launch(reinterpret_cast<CUfunction>(*k), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS,
             "%s: cuLaunchKernel(CUkernel)", what);
      auto f = lib->function("vadd");
      EXPECT(f.has_value(), "%s: function(): %s", what, f ? "" : f.error().what());
      if (f) EXPECT(cu.launch(*f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS, "%s: launch", what);
      return f ? *f : nullptr;
    };
    CUfunction f_before = launch_in("the context made before the load");
    CUcontext after = nullptr;
    EXPECT(cu.ctx_create(&after, 0, 0) == CUDA_SUCCESS, "cuCtxCreate (after the load)");
    CUfunction f_after = launch_in("a context made after the load");
    EXPECT(f_before != f_after, "one CUfunction for two contexts");
    EXPECT(cu.ctx_destroy(after) == CUDA_SUCCESS, "cuCtxDestroy");
    CUcontext primary = nullptr;
    CUdevice dev0 = 0;
    cu.device_get(&dev0, 0);
    EXPECT(cu.retain(&primary, dev0) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
    cu.set_current(primary);  // replaces `before` on this thread's stack
    launch_in("the primary context");
    cu.set_current(before);
    launch_in("the first context again, after another was destroyed");
    cu.release(dev0);
    // Another device of another CC gets its own library with its own entry.
    if (ndev > 1) {
      const auto info1 = fatpack::device(1).value();
      o.device = 1;
      auto lib1 = fatpack::load_library("ctx_vadd", o);
      EXPECT(lib1 && lib1->device() == 1 && lib1->handle() != lib->handle(), "device 1: %s",
             lib1 ? "the same library" : lib1.error().what());
      if (lib1) {
        std::printf("  device 0 -> %s, device 1 (CC %d.%d) -> %s\n", lib->report().target.c_str(), info1.cc_major,
                    info1.cc_minor, lib1->report().target.c_str());
        CUdevice dev1 = 0;
        cu.device_get(&dev1, 1);
        CUcontext c1 = nullptr;
        EXPECT(cu.ctx_create(&c1, 0, dev1) == CUDA_SUCCESS, "cuCtxCreate on device 1");
        auto k1 = lib1->kernel("vadd");
        EXPECT(k1 && cu.launch(reinterpret_cast<CUfunction>(*k1), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) ==
                         CUDA_SUCCESS,
               "device 1: launch of its library's kernel");
        cu.ctx_destroy(c1);
      }
    }
    lib->reset();
    cu.ctx_destroy(before);
  });

  run_case("library-preserved: a library of an uncompressed entry is loaded from the package in place, a decoded one is not",
           [] {
    // Packages the runtime owns (copied in): one uncompressed, one LZ4. Only the first may be given to
    // cuLibraryLoadData as CU_LIBRARY_BINARY_IS_PRESERVED: a decoded entry's buffer goes after the
    // load, and the fake reads a preserved image again whenever the library enters a new context.
    const std::vector<std::string> items = {"vadd.sm_80.cubin", "vadd.sm_90.cubin", "vadd.compute_80.ptx"};
    for (const auto codec : {fatpack::core::codec::none, fatpack::core::codec::lz4}) {
      const std::string name = codec == fatpack::core::codec::none ? "pres_none" : "pres_lz4";
      std::vector<fatpack::core::entry_input> entries;
      for (const auto& item : items) {
        auto bytes = read_file(item);
        auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), item, name);
        EXPECT(r.has_value(), "import %s", item.c_str());
        if (r) for (auto& e : r.value()) entries.push_back(std::move(e));
      }
      fatpack::core::pack_options po;
      po.codec = codec;
      auto pkg = fatpack::core::write_package(name, entries, po);
      EXPECT(pkg.has_value(), "write_package %s", name.c_str());
      if (!pkg) return;
      auto added = fatpack::add_package_memory(pkg->data(), pkg->size(), name);
      EXPECT(added.ok(), "add_package_memory %s: %s", name.c_str(), added ? "" : added.error().what());
      pkg->assign(pkg->size(), 0xee);  // the runtime has its own copy: ours may change
      const int preserved = fake_stat("fakecuda_preserved_libraries");
      const int stale = fake_stat("fakecuda_stale_uses");
      fatpack::load_options o;
      o.device = 0;
      auto lib = fatpack::load_library(name, o);
      EXPECT(lib.has_value(), "load_library(%s): %s", name.c_str(), lib ? "" : lib.error().what());
      if (!lib) return;
      const bool sass = lib->report().target.rfind("sm_", 0) == 0;
      if (g_fake)
        EXPECT(fake_stat("fakecuda_preserved_libraries") == preserved + (codec == fatpack::core::codec::none && sass),
               "%s (%s): preserved libraries %d -> %d", name.c_str(), lib->report().target.c_str(), preserved,
               fake_stat("fakecuda_preserved_libraries"));
      // Into a context made after the load: the fake (lazy, as the driver is) reads the image now.
      CUcontext c = nullptr;
      EXPECT(cu.ctx_create(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
      auto f = lib->function("vadd");
      EXPECT(f.has_value(), "%s: function(vadd) in a new context: %s", name.c_str(), f ? "" : f.error().what());
      EXPECT(fake_stat("fakecuda_stale_uses") == stale, "%s: the preserved image changed under the library", name.c_str());
      cu.ctx_destroy(c);
    }
  });

  run_case("typed: a module's kernel with its argument types, checked once, launched in the module's context", [] {
    auto m = load("typed");
    CUcontext other = nullptr;
    EXPECT(cu.ctx_create(&other, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");  // current now: not the module's
    auto k = m.kernel<const float*, char, double, int, float*>("mix");
    EXPECT(k.has_value(), "kernel<...>(mix): %s", k ? "" : k.error().what());
    if (k) {
      EXPECT(k->checked(), "not checked: %s", k->check_note().c_str());
      // The parameters came from the driver (cuFuncGetParamInfo, asked for with the CUDA 12.4 ABI
      // that introduced it), not from the package's PTX.
      EXPECT(k->check_note().empty(), "not checked by the driver: %s", k->check_note().c_str());
      EXPECT(k->name() == "mix", "name %s", k->name().c_str());
      const float* a = nullptr;
      float* out = reinterpret_cast<float*>(static_cast<std::uintptr_t>(0x1000));  // never touched: n = 0 on a GPU
      const int n = g_fake ? 7 : 0;
      auto s = k->launch(fatpack::dims(1), fatpack::dims(32), 0, nullptr, a, 'x', 2.5, n, out);
      EXPECT(s.ok(), "launch: %s", s ? "" : s.error().what());
      EXPECT(current() == other, "the launch changed the current context");
      if (g_fake) {
        // What the driver read, at the kernel's offsets 0, 8, 16, 24, 32.
        const auto p = fake_last_params();
        EXPECT(p.size() == 40, "parameter buffer of %zu bytes", p.size());
        EXPECT(at<char>(p, 8) == 'x' && at<double>(p, 16) == 2.5 && at<int>(p, 24) == 7 &&
                   at<std::uintptr_t>(p, 32) == 0x1000,
               "the kernel would read other values");
      } else {
        EXPECT(cu.sync() == CUDA_SUCCESS, "cuCtxSynchronize");
      }
    }
    EXPECT(cu.ctx_destroy(other) == CUDA_SUCCESS, "cuCtxDestroy");
  });

  run_case("typed-cost: a typed launch against cuLaunchKernel of the same function (printed, not checked)", [] {
    auto m = load("typed");
    auto k = m.kernel<const float*, char, double, int, float*>("mix");
    auto f = m.function("mix");
    if (!k || !f) {
      EXPECT(false, "mix: %s", k ? f.error().what() : k.error().what());
      return;
    }
    const float* a = nullptr;
    float* out = nullptr;
    char c = 'x';
    double d = 1.0;
    int n = 0;
    void* args[] = {&a, &c, &d, &n, &out};
    const int rounds = 2000;
    auto time_it = [&](auto&& launch) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < rounds; ++i) launch();
      if (!g_fake) cu.sync();
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / rounds;
    };
    for (int pass = 0; pass < 2; ++pass) {  // the first pass warms up
      const double raw = time_it([&] { cu.launch(*f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr); });
      const double typed = time_it([&] { (void)k->launch(1, 32, 0, nullptr, a, c, d, n, out); });
      if (pass == 1)
        std::printf("  per launch (%d launches%s): cuLaunchKernel %.3f us, typed launch %.3f us\n", rounds,
                    g_fake ? ", fake driver" : "", raw, typed);
    }
  });

  run_case("typed-errors: a wrong count, size or offset names the argument, kernel, module, package, device and driver",
           [] {
    auto m = load("typed");
    auto names_all = [](const fatpack::error& e) {
      EXPECT(e.code == fatpack::errc::invalid_argument, "code %s", fatpack::errc_name(e.code));
      for (const char* part : {"kernel 'mix'", "module 'typed'", "package 'typed'", "device 0"})
        EXPECT(has(e.message, part), "no %s in: %s", part, e.message.c_str());
      EXPECT(has(e.message, fatpack::driver_library()), "no driver in: %s", e.message.c_str());
      std::printf("  %s\n", e.message.c_str());
    };
    auto count = m.kernel<const float*, char, double, int>("mix");
    EXPECT(!count, "4 arguments accepted for 5 parameters");
    if (!count) {
      names_all(count.error());
      EXPECT(has(count.error().message, "takes 5 parameters, 4 arguments were given"), "%s", count.error().what());
    }
    auto size = m.kernel<const float*, char, double, int, int>("mix");  // an int where a pointer is
    EXPECT(!size, "an int accepted for a pointer");
    if (!size) {
      names_all(size.error());
      EXPECT(has(size.error().message, "argument 5 of 5: the kernel's parameter is 8 bytes at offset 32, the argument "
                                       "given is 4 bytes at offset 28"),
             "%s", size.error().what());
    }
    struct two_ints {
      int a, b;
    };
    auto offset = m.kernel<const float*, char, two_ints, int, float*>("mix");  // 8 bytes, but 4-aligned
    EXPECT(!offset, "two ints accepted for a double");
    if (!offset) {
      names_all(offset.error());
      EXPECT(has(offset.error().message, "argument 3 of 5: the kernel's parameter is 8 bytes at offset 16, the "
                                         "argument given is 8 bytes at offset 12"),
             "%s", offset.error().what());
    }
    auto missing = m.kernel<int>("no_such_kernel");
    EXPECT(!missing && missing.error().code == fatpack::errc::not_found, "no_such_kernel: %s",
           missing ? "found" : missing.error().what());
    auto lib = fatpack::load_library("typed");
    if (lib) {
      auto wrong = lib->kernel<const float*, float*, int>("affine");
      EXPECT(!wrong && wrong.error().code == fatpack::errc::invalid_argument &&
                 has(wrong.error().message, "takes 2 parameters, 3 arguments were given"),
             "library: %s", wrong ? "accepted" : wrong.error().what());
    }
  });

  run_case("typed library: its kernel launches in the current context, else the primary one", [] {
    auto lib = fatpack::load_library("typed");
    EXPECT(lib.has_value(), "load_library: %s", lib ? "" : lib.error().what());
    if (!lib) return;
    auto k = lib->kernel<const float*, char, double, int, float*>("mix");
    EXPECT(k && k->checked() && k->check_note().empty(), "kernel<...>(mix): %s",
           k ? k->check_note().c_str() : k.error().what());
    if (!k) return;
    const float* a = nullptr;
    float* out = nullptr;
    EXPECT(current() == nullptr, "the thread starts with a context");
    auto s = k->launch(1, 32, 0, nullptr, a, 'y', -1.0, 0, out);  // no context: the primary one
    EXPECT(s.ok(), "launch without a context: %s", s ? "" : s.error().what());
    EXPECT(current() == nullptr, "the launch left a context current");
    CUcontext own = nullptr;
    EXPECT(cu.ctx_create(&own, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
    s = k->launch(1, 32, 0, nullptr, a, 'y', -1.0, 0, out);  // in the application's context
    EXPECT(s.ok(), "launch in an own context: %s", s ? "" : s.error().what());
    if (g_fake) EXPECT(fake_modules_in(own) == 1, "the kernel did not run in the current context");
    EXPECT(current() == own, "the launch changed the current context");
    if (!g_fake) EXPECT(cu.sync() == CUDA_SUCCESS, "cuCtxSynchronize");
    EXPECT(cu.ctx_destroy(own) == CUDA_SUCCESS, "cuCtxDestroy");
  });

  run_case("globals: set/get round trip, sizes checked, through a module, a library and the C API", [] {
    struct affine_params {  // typed.cu's c_affine
      float scale, offset;
      int count;
    };
    const int n = g_fake ? 256 : 1 << 16;
    auto m = load("typed");
    auto g = m.global("c_affine");
    EXPECT(g && g->size == sizeof(affine_params) && g->address != 0, "global(c_affine): %s",
           g ? "wrong size or address" : g.error().what());
    const affine_params want{2.0f, -1.0f, n};
    auto s = m.set_global("c_affine", want);
    EXPECT(s.ok(), "set_global: %s", s ? "" : s.error().what());
    auto got = m.get_global<affine_params>("c_affine");
    EXPECT(got && got->scale == 2.0f && got->offset == -1.0f && got->count == n, "get_global: %s",
           got ? "other values" : got.error().what());
    auto zero = m.get_global<unsigned>("d_launches");
    EXPECT(zero && *zero == 0, "d_launches before any launch: %s", zero ? std::to_string(*zero).c_str() : zero.error().what());
    auto wrong = m.set_global("c_affine", 1.0f);
    EXPECT(!wrong, "a 4-byte host object accepted for a 12-byte variable");
    if (!wrong) {
      const auto& e = wrong.error();
      EXPECT(e.code == fatpack::errc::invalid_argument, "code %s", fatpack::errc_name(e.code));
      for (const char* part : {"global 'c_affine'", "is 12 bytes", "host object 4 bytes", "package 'typed'", "device 0"})
        EXPECT(has(e.message, part), "no %s in: %s", part, e.message.c_str());
      EXPECT(has(e.message, fatpack::driver_library()), "no driver in: %s", e.message.c_str());
      std::printf("  %s\n", e.message.c_str());
    }
    // A name with a NUL byte is not the name before it: the driver, which takes a C string, must not
    // be asked for "c_affine" (set_global_bytes overwrote c_affine before this was refused).
    const std::string cut("c_affine\0x", 10);
    {
      auto r = m.global(cut);
      EXPECT(!r && r.error().code == fatpack::errc::invalid_argument && has(r.error().message, "NUL byte") &&
                 has(r.error().message, "c_affine\\x00x"),
             "global(\"c_affine\\0x\"): %s", r ? "found c_affine" : r.error().what());
      const affine_params other{9.0f, 9.0f, 9};
      const fatpack::status cut_set = m.set_global_bytes(cut, &other, sizeof other);
      EXPECT(!cut_set && cut_set.error().code == fatpack::errc::invalid_argument,
             "set_global_bytes(\"c_affine\\0x\"): %s", cut_set ? "wrote c_affine" : cut_set.error().what());
      auto still = m.get_global<affine_params>("c_affine");
      EXPECT(still && still->count == n, "c_affine after the refused write: %s",
             still ? "overwritten" : still.error().what());
    }
    auto none = m.global("no_such_variable");
    EXPECT(!none && none.error().code == fatpack::errc::not_found && has(none.error().message, "no_such_variable"),
           "no_such_variable: %s", none ? "found" : none.error().what());
    // A C++ name inside a namespace is not the variable's symbol: the error names the mangled one.
    auto scoped = m.global("ns::c_scale");
    EXPECT(!scoped && scoped.error().code == fatpack::errc::not_found &&
               has(scoped.error().message, "by its mangled symbol, here \"_ZN2ns7c_scaleE\""),
           "ns::c_scale: %s", scoped ? "found" : scoped.error().what());
    if (!g_fake) {
      // affine reads c_affine: y = 2x - 1 over n elements, once.
      auto k = m.kernel<const float*, float*>("affine");
      EXPECT(k.has_value(), "kernel<...>(affine): %s", k ? "" : k.error().what());
      std::vector<float> hx(n), hy(n, 0.f);
      for (int i = 0; i < n; ++i) hx[i] = static_cast<float>(i % 1000) * 0.25f;
      CUdeviceptr x = 0, y = 0;
      const std::size_t bytes = n * sizeof(float);
      cu.set_current(m.context());
      EXPECT(cu.mem_alloc(&x, bytes) == CUDA_SUCCESS && cu.mem_alloc(&y, bytes) == CUDA_SUCCESS, "cuMemAlloc");
      EXPECT(cu.htod(x, hx.data(), bytes) == CUDA_SUCCESS, "cuMemcpyHtoD");
      if (k) {
        auto ls = k->launch((n + 255) / 256, 256, 0, nullptr, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y));
        EXPECT(ls.ok(), "launch: %s", ls ? "" : ls.error().what());
        EXPECT(cu.sync() == CUDA_SUCCESS, "cuCtxSynchronize");
        EXPECT(cu.dtoh(hy.data(), y, bytes) == CUDA_SUCCESS, "cuMemcpyDtoH");
        int bad = 0;
        for (int i = 0; i < n; ++i) bad += hy[i] != hx[i] * 2.0f - 1.0f;
        EXPECT(bad == 0, "affine: %d of %d wrong", bad, n);
        auto launches = m.get_global<unsigned>("d_launches");
        EXPECT(launches && *launches == 1, "d_launches after one launch: %s",
               launches ? std::to_string(*launches).c_str() : launches.error().what());
      }
      cu.mem_free(x);
      cu.mem_free(y);
      cu.set_current(nullptr);
    }
    // A library's variables, per context: set in one, read back there; another context has its own.
    auto lib = fatpack::load_library("typed");
    EXPECT(lib.has_value(), "load_library: %s", lib ? "" : lib.error().what());
    if (lib) {
      CUcontext c1 = nullptr, c2 = nullptr;
      EXPECT(cu.ctx_create(&c1, 0, 0) == CUDA_SUCCESS, "cuCtxCreate 1");
      EXPECT(lib->set_global("c_affine", want).ok(), "library set_global");
      auto back = lib->get_global<affine_params>("c_affine");
      EXPECT(back && back->count == n, "library get_global: %s", back ? "other values" : back.error().what());
      auto g1 = lib->global("c_affine");
      EXPECT(cu.ctx_create(&c2, 0, 0) == CUDA_SUCCESS, "cuCtxCreate 2");
      auto g2 = lib->global("c_affine");
      auto fresh = lib->get_global<affine_params>("c_affine");
      EXPECT(g1 && g2 && g1->address != g2->address, "one address in two contexts");
      EXPECT(fresh && fresh->count == 0, "the second context sees the first one's value");
      EXPECT(current() == c2, "the library's globals changed the current context");
      cu.ctx_destroy(c2);
      cu.ctx_destroy(c1);
    }
    // The C API.
    fatpack_module* cm = nullptr;
    EXPECT(fatpack_load_module("typed", "typed", 0, &cm) == FATPACK_OK, "%s", fatpack_last_error());
    if (cm) {
      unsigned long long address = 0;
      size_t size = 0;
      EXPECT(fatpack_module_global(cm, "c_affine", &address, &size) == FATPACK_OK && address && size == 12,
             "fatpack_module_global: %s", fatpack_last_error());
      affine_params v{3.0f, 4.0f, 5}, r{};
      EXPECT(fatpack_module_set_global(cm, "c_affine", &v, sizeof v) == FATPACK_OK, "%s", fatpack_last_error());
      EXPECT(fatpack_module_get_global(cm, "c_affine", &r, sizeof r) == FATPACK_OK && r.count == 5 && r.scale == 3.0f,
             "fatpack_module_get_global: %s", fatpack_last_error());
      EXPECT(fatpack_module_set_global(cm, "c_affine", &v, 4) == FATPACK_ERROR_INVALID_ARGUMENT &&
                 has(fatpack_last_error(), "c_affine"),
             "C size mismatch: %s", fatpack_last_error());
      fatpack_module_release(cm);
    }
  });

  run_case("variant: exact, lower-minor, `a` SASS or PTX through the JIT, per device and per kernel", [ndev] {
    for (int d = 0; d < ndev; ++d) {
      const auto info = fatpack::device(d).value();
      // typed: sm_80, sm_90 SASS + compute_80 PTX; typed_a: sm_90a SASS + PTX; typed_ptx: PTX only.
      auto expect_kind = [&](const char* module, fatpack::variant_kind want, const char* target) {
        auto m = load(module, d);
        const fatpack::code_variant v = m.variant();
        EXPECT(v.kind == want && v.target == target && v.device_arch == info.arch, "device %d, %s: %s %s", d, module,
               fatpack::variant_kind_name(v.kind), v.target.c_str());
        if (want == fatpack::variant_kind::ptx_jit)
          EXPECT(!v.ptx_isa.empty() && v.arch == 80, "PTX ISA '%s', arch %u", v.ptx_isa.c_str(), v.arch);
        else
          EXPECT(v.ptx_isa.empty(), "a SASS variant with PTX ISA %s", v.ptx_isa.c_str());
        auto per_kernel = m.variant("affine");
        EXPECT(per_kernel && per_kernel->kind == v.kind && per_kernel->target == v.target, "per kernel: %s",
               per_kernel ? "another variant" : per_kernel.error().what());
        EXPECT(!m.variant("no_such_kernel"), "a variant for a kernel the module does not have");
        std::printf("  device %d (CC %d.%d), %s: %s (%s%s%s)\n", d, info.cc_major, info.cc_minor, module,
                    fatpack::variant_kind_name(v.kind), v.target.c_str(), v.ptx_isa.empty() ? "" : ", PTX ISA ",
                    v.ptx_isa.c_str());
      };
      using vk = fatpack::variant_kind;
      if (info.arch == 90 || info.arch == 80) expect_kind("typed", vk::exact_sass, info.arch == 90 ? "sm_90" : "sm_80");
      if (info.cc_major == 8 && info.arch != 80) expect_kind("typed", vk::lower_minor_sass, "sm_80");
      if (info.arch == 90) expect_kind("typed_a", vk::arch_specific_sass, "sm_90a");
      else expect_kind("typed_a", vk::ptx_jit, "compute_80");
      expect_kind("typed_ptx", vk::ptx_jit, "compute_80");
    }
    fatpack_module* cm = nullptr;
    EXPECT(fatpack_load_module("typed_ptx", "typed_ptx", 0, &cm) == FATPACK_OK, "%s", fatpack_last_error());
    if (cm) {
      fatpack_variant v = FATPACK_VARIANT_INIT;
      EXPECT(fatpack_module_variant(cm, NULL, &v) == FATPACK_OK && v.kind == FATPACK_VARIANT_PTX_JIT &&
                 std::string(v.target) == "compute_80" && v.ptx_isa[0],
             "fatpack_module_variant: %s (%s)", fatpack_last_error(), fatpack_variant_kind_name(v.kind));
      EXPECT(fatpack_module_variant(cm, "no_such_kernel", &v) == FATPACK_ERROR_NOT_FOUND, "C: unknown kernel");
      fatpack_module_release(cm);
    }
    fatpack::module empty;
    EXPECT(empty.variant().kind == fatpack::variant_kind::none, "an empty handle's variant");
    fatpack::typed_kernel<int> none;
    EXPECT(!none.valid() && !none.checked() && none.name().empty() && none.check_note().empty() &&
               none.variant().kind == fatpack::variant_kind::none,
           "an empty typed kernel");
    auto s = none.launch(1, 1, 0, nullptr, 0);
    EXPECT(!s && s.error().code == fatpack::errc::invalid_argument, "launch of an empty typed kernel");
    auto g = empty.global("c_affine");
    EXPECT(!g && g.error().code == fatpack::errc::invalid_argument, "global() of an empty handle");
  });

  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
  return g_failures ? 1 : 0;
}
