// The GPU suite (ctest label `gpu`): the runtime against the real driver on a real GPU.
//
// Without a driver or GPU it prints "SKIPPED: no CUDA driver/GPU (<why>)" and exits 77, which CTest
// reports as skipped (SKIP_RETURN_CODE). With one, on the H200 test machine (CC 9.0):
//   (a) a package with sm_75/sm_80/sm_90 SASS + compute_90 PTX loads the sm_90 SASS;
//   (b) a package with only sm_75/sm_80/sm_86/sm_89 SASS + compute_80 PTX (the "unknown future GPU"
//       case on real hardware) takes the PTX path through the driver's cuLink JIT, and the kernels
//       compute the right results (checked against the CPU with a tolerance: JIT paths differ);
//   (c) force_ptx loads PTX although SASS fits;
//   (d) a PTX whose .version is newer than the driver accepts (rewritten to 9.9) is refused with the
//       reason and an older PTX is used; the driver's own refusal (cuLinkAddData -> 222) is shown too;
//   (e) a bare cubin handed in by the application loads and runs;
//   (f) the package of (b) through the optional nvJitLink back end (cuLink if the library is absent);
//   (g) a PTX entry that records -maxrregcount=32 (regs.cu, about 130 registers without it) is
//       compiled within 32 registers (CU_FUNC_ATTRIBUTE_NUM_REGS), through cuLink and nvJitLink;
//   (h) kernels by C++ name (tests/kernels/names.cu, SASS and PTX, module and library): the real
//       driver gets the mangled symbol, and the templated and overloaded kernels compute right;
//   (i) separate compilation: a link group of two files' relocatable PTX (a kernel calling a
//       __device__ function of the other file) JIT-linked by cuLink, and (j) by nvJitLink, runs right;
//   (k) a relocatable sm_90 cubin before that group is refused by the runtime, and the group loads.
// Each case prints the entry it chose and the JIT milliseconds. The driver's JIT cache is disabled
// (CUDA_CACHE_DISABLE=1) so the JIT times are cold compiles.
//
// Usage: fatpack_gpu_test [ARTIFACTS_DIR]   (default: the build's tests/artifacts)
#include "gpu_support.hpp"

#include <cuda.h>  // types only: every call goes through fatpack::driver_entry_point

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace core = fatpack::core;
using namespace fatpack_gpu_test;

namespace {

constexpr int k_skip = 77;

// The driver calls the test needs, through the driver fatpack loaded.
struct cuda_calls {
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) htod = nullptr;
  decltype(&::cuMemcpyDtoH) dtoh = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuCtxSynchronize) sync = nullptr;
  decltype(&::cuCtxPushCurrent) push = nullptr;
  decltype(&::cuCtxPopCurrent) pop = nullptr;
  decltype(&::cuLinkCreate) link_create = nullptr;
  decltype(&::cuLinkAddData) link_add = nullptr;
  decltype(&::cuLinkDestroy) link_destroy = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) release = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuFuncGetAttribute) func_attribute = nullptr;
};

template <class F>
void get(F& f, const char* name) {
  f = reinterpret_cast<F>(fatpack::driver_entry_point(name).value());
}

cuda_calls load_calls() {
  cuda_calls c;
  get(c.mem_alloc, "cuMemAlloc");
  get(c.mem_free, "cuMemFree");
  get(c.htod, "cuMemcpyHtoD");
  get(c.dtoh, "cuMemcpyDtoH");
  get(c.launch, "cuLaunchKernel");
  get(c.sync, "cuCtxSynchronize");
  get(c.push, "cuCtxPushCurrent");
  get(c.pop, "cuCtxPopCurrent");
  get(c.link_create, "cuLinkCreate");
  get(c.link_add, "cuLinkAddData");
  get(c.link_destroy, "cuLinkDestroy");
  get(c.retain, "cuDevicePrimaryCtxRetain");
  get(c.release, "cuDevicePrimaryCtxRelease");
  get(c.device_get, "cuDeviceGet");
  get(c.func_attribute, "cuFuncGetAttribute");
  return c;
}

#define CU(call)                                                                 \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      std::printf("  FAIL %s:%d: %s returned %d\n", __FILE__, __LINE__, #call, static_cast<int>(r_)); \
      ++g_failures;                                                              \
      return false;                                                              \
    }                                                                            \
  } while (0)

// Pops the context a run pushed, however the run ends.
struct pop_on_exit {
  const cuda_calls& cu;
  ~pop_on_exit() {
    CUcontext c;
    cu.pop(&c);
  }
};

// Launches vadd and saxpy from `m` on its primary context; compares with the CPU.
bool run_kernels(const cuda_calls& cu, const fatpack::module& m) {
  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n), y(n), y0(n);
  for (int i = 0; i < n; ++i) {
    a[i] = std::sin(0.001f * i) * 3.0f;
    b[i] = std::cos(0.002f * i) + 0.5f;
    y0[i] = 0.25f * static_cast<float>(i % 97);
  }
  auto vadd = m.function("vadd");
  auto saxpy = m.function("saxpy");
  EXPECT(vadd.has_value() && saxpy.has_value(), "kernels missing");
  if (!vadd || !saxpy) return false;
  CU(cu.push(reinterpret_cast<CUcontext>(m.context())));
  pop_on_exit popper{cu};
  const std::size_t bytes = sizeof(float) * n;
  CUdeviceptr da = 0, db = 0, dc = 0, dy = 0;
  CU(cu.mem_alloc(&da, bytes));
  CU(cu.mem_alloc(&db, bytes));
  CU(cu.mem_alloc(&dc, bytes));
  CU(cu.mem_alloc(&dy, bytes));
  CU(cu.htod(da, a.data(), bytes));
  CU(cu.htod(db, b.data(), bytes));
  CU(cu.htod(dy, y0.data(), bytes));
  int nn = n;
  float alpha = 1.75f;
  void* vargs[] = {&da, &db, &dc, &nn};
  void* sargs[] = {&alpha, &da, &dy, &nn};
  unsigned grid = static_cast<unsigned>((n + 255) / 256);
  CU(cu.launch(reinterpret_cast<CUfunction>(*vadd), grid, 1, 1, 256, 1, 1, 0, nullptr, vargs, nullptr));
  CU(cu.launch(reinterpret_cast<CUfunction>(*saxpy), grid, 1, 1, 256, 1, 1, 0, nullptr, sargs, nullptr));
  CU(cu.sync());
  CU(cu.dtoh(c.data(), dc, bytes));
  CU(cu.dtoh(y.data(), dy, bytes));
  cu.mem_free(da);
  cu.mem_free(db);
  cu.mem_free(dc);
  cu.mem_free(dy);
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    float ev = a[i] + b[i];
    float es = alpha * a[i] + y0[i];
    double e1 = std::fabs(c[i] - ev) / std::max(1.0f, std::fabs(ev));
    double e2 = std::fabs(y[i] - es) / std::max(1.0f, std::fabs(es));
    worst = std::max(worst, std::max(e1, e2));
    if (e1 > 1e-5 || e2 > 1e-5) ++bad;
  }
  EXPECT(bad == 0, "%d of %d results differ from the CPU by more than 1e-5 (worst %.3g)", bad, n, worst);
  std::printf("  kernels: vadd + saxpy on %d elements match the CPU (worst relative error %.3g)\n", n, worst);
  return bad == 0;
}

// Launches rdc_saxpy (y = (2 * alpha * x + 1) + y, the 2x+1 from another file) from `m`; compares
// with the CPU.
bool run_rdc_kernel(const cuda_calls& cu, const fatpack::module& m) {
  const int n = 1 << 20;
  std::vector<float> x(n), y0(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = std::sin(0.001f * i) * 3.0f;
    y0[i] = 0.25f * static_cast<float>(i % 97);
  }
  auto k = m.function("rdc_saxpy");
  EXPECT(k.has_value(), "rdc_saxpy missing");
  if (!k) return false;
  CU(cu.push(reinterpret_cast<CUcontext>(m.context())));
  const pop_on_exit popper{cu};
  const std::size_t bytes = sizeof(float) * n;
  CUdeviceptr dx = 0, dy = 0;
  CU(cu.mem_alloc(&dx, bytes));
  CU(cu.mem_alloc(&dy, bytes));
  CU(cu.htod(dx, x.data(), bytes));
  CU(cu.htod(dy, y0.data(), bytes));
  int nn = n;
  float alpha = 1.75f;
  void* args[] = {&alpha, &dx, &dy, &nn};
  CU(cu.launch(reinterpret_cast<CUfunction>(*k), static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0, nullptr,
               args, nullptr));
  CU(cu.sync());
  CU(cu.dtoh(y.data(), dy, bytes));
  cu.mem_free(dx);
  cu.mem_free(dy);
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const float want = (2.0f * (alpha * x[i]) + 1.0f) + y0[i];
    const double e = std::fabs(y[i] - want) / std::max(1.0f, std::fabs(want));
    worst = std::max(worst, e);
    if (e > 1e-5) ++bad;
  }
  EXPECT(bad == 0, "%d of %d results differ from the CPU by more than 1e-5 (worst %.3g)", bad, n, worst);
  std::printf("  kernel: rdc_saxpy (calling a __device__ function of another file) on %d elements matches the CPU "
              "(worst relative error %.3g)\n", n, worst);
  return bad == 0;
}

// names.cu's mylib::affine<float, 256> (out = 2 in + 1) and mylib::scale(float*, float) (p *= s),
// found by their C++ names in `m` (and, when `lib` is given, through its CUkernel), on 256 elements.
bool run_named_kernels(const cuda_calls& cu, const fatpack::module& m, const fatpack::library* lib) {
  auto affine = m.function("mylib::affine<float, 256>(const float*, float*, int)");
  auto scale = m.function("mylib::scale(float*, float)");
  auto ambiguous = m.function("mylib::scale");
  EXPECT(affine.has_value(), "%s", affine ? "" : affine.error().what());
  EXPECT(scale.has_value(), "%s", scale ? "" : scale.error().what());
  EXPECT(!ambiguous && ambiguous.error().code == fatpack::errc::ambiguous, "mylib::scale was not ambiguous");
  if (!affine || !scale) return false;
  CUfunction affine_f = reinterpret_cast<CUfunction>(*affine);
  if (lib) {
    auto k = lib->kernel("mylib::affine<float, 256>");
    EXPECT(k.has_value(), "%s", k ? "" : k.error().what());
    if (!k) return false;
    affine_f = reinterpret_cast<CUfunction>(*k);  // cuLaunchKernel takes a CUkernel too
  }
  CU(cu.push(reinterpret_cast<CUcontext>(m.context())));
  pop_on_exit popper{cu};
  const int n = 256;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = 0.5f * static_cast<float>(i) - 7.0f;
  const std::size_t bytes = sizeof(float) * n;
  CUdeviceptr din = 0, dout = 0;
  CU(cu.mem_alloc(&din, bytes));
  CU(cu.mem_alloc(&dout, bytes));
  CU(cu.htod(din, in.data(), bytes));
  int nn = n;
  float s = 3.0f;
  void* aargs[] = {&din, &dout, &nn};
  void* sargs[] = {&dout, &s};
  CU(cu.launch(affine_f, 1, 1, 1, n, 1, 1, 0, nullptr, aargs, nullptr));
  CU(cu.launch(reinterpret_cast<CUfunction>(*scale), 1, 1, 1, n, 1, 1, 0, nullptr, sargs, nullptr));
  CU(cu.sync());
  CU(cu.dtoh(out.data(), dout, bytes));
  cu.mem_free(din);
  cu.mem_free(dout);
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (out[i] != (in[i] * 2.0f + 1.0f) * s) ++bad;
  EXPECT(bad == 0, "%d of %d results of affine<float, 256> then scale differ", bad, n);
  std::printf("  named kernels%s: mylib::affine<float, 256> then mylib::scale(float*, float) on %d elements: %s\n",
              lib ? " (affine as the library's CUkernel)" : "", n, bad ? "WRONG" : "right");
  return bad == 0;
}

void print_report(const char* label, const fatpack::load_report& r) {
  std::printf("  %s: chose entry %zu %s%s: %s\n", label, r.entry, r.target.c_str(),
              r.jit ? (r.jit_reused ? " (JIT, reused)" : (" (JIT via " + r.jit_path + ")").c_str()) : " (SASS)",
              r.reason.c_str());
  std::printf("  %s: select %.3f ms, decompress %.3f ms, JIT %.1f ms, load %.3f ms, total %.1f ms\n", label,
              r.select_ms, r.decompress_ms, r.jit_ms, r.load_ms, r.total_ms);
}

fatpack::module load(const char* name, std::optional<fatpack::policy> p = std::nullopt) {
  fatpack::load_options o;
  o.device = 0;
  o.policy = p;
  auto m = fatpack::load_module(name, o);
  if (!m) {
    std::printf("  FAIL: load %s: %s\n", name, m.error().what());
    ++g_failures;
    return {};
  }
  std::string t = m->report().trace();
  std::printf("  trace:\n");
  std::size_t pos = 0;
  while (pos < t.size()) {
    auto nl = t.find('\n', pos);
    std::printf("    %s\n", t.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos).c_str());
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return std::move(m.value());
}

// Kernel-granular JIT under stream capture (issue 13): vadd's piece is loaded by the first
// function("vadd"), made while `stream` is being captured in global mode into a graph; the capture
// must survive, and the graph's launch must compute c = a + b.
bool run_captured(const fatpack::module& m) {
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuStreamBeginCapture) begin_capture = nullptr;
  decltype(&::cuStreamEndCapture) end_capture = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) instantiate = nullptr;
  decltype(&::cuGraphLaunch) graph_launch = nullptr;
  decltype(&::cuGraphExecDestroy) exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) graph_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_sync = nullptr;
  get(stream_create, "cuStreamCreate");
  get(stream_destroy, "cuStreamDestroy");
  get(begin_capture, "cuStreamBeginCapture");
  get(end_capture, "cuStreamEndCapture");
  get(instantiate, "cuGraphInstantiateWithFlags");
  get(graph_launch, "cuGraphLaunch");
  get(exec_destroy, "cuGraphExecDestroy");
  get(graph_destroy, "cuGraphDestroy");
  get(stream_sync, "cuStreamSynchronize");
  cuda_calls cu = load_calls();
  CU(cu.push(reinterpret_cast<CUcontext>(m.context())));
  pop_on_exit popper{cu};
  const int n = 1 << 16;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 3.0f - i;
  }
  const std::size_t bytes = sizeof(float) * n;
  CUdeviceptr da = 0, db = 0, dc = 0;
  CU(cu.mem_alloc(&da, bytes));
  CU(cu.mem_alloc(&db, bytes));
  CU(cu.mem_alloc(&dc, bytes));
  CU(cu.htod(da, a.data(), bytes));
  CU(cu.htod(db, b.data(), bytes));
  CUstream stream = nullptr;
  CU(stream_create(&stream, CU_STREAM_NON_BLOCKING));
  CU(begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  auto vadd = m.function("vadd");  // the piece compiles (or is reused) and loads now, mid-capture
  if (!vadd) {
    std::printf("  FAIL: function(vadd) during capture: %s\n", vadd.error().what());
    ++g_failures;
    CUgraph g = nullptr;
    end_capture(stream, &g);
    return false;
  }
  int nn = n;
  void* args[] = {&da, &db, &dc, &nn};
  CU(cu.launch(reinterpret_cast<CUfunction>(*vadd), unsigned((n + 255) / 256), 1, 1, 256, 1, 1, 0, stream, args, nullptr));
  CUgraph graph = nullptr;
  CU(end_capture(stream, &graph));
  CUgraphExec exec = nullptr;
  CU(instantiate(&exec, graph, 0));
  CU(graph_launch(exec, stream));
  CU(stream_sync(stream));
  CU(cu.dtoh(c.data(), dc, bytes));
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += c[i] != a[i] + b[i];
  EXPECT(bad == 0, "%d of %d results of the captured graph are wrong", bad, n);
  std::printf("  captured: function(vadd) during a global-mode capture, then the graph ran: %s\n",
              bad == 0 ? "results match" : "WRONG");
  exec_destroy(exec);
  graph_destroy(graph);
  stream_destroy(stream);
  cu.mem_free(da);
  cu.mem_free(db);
  cu.mem_free(dc);
  return bad == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_artifacts = argv[1];
  // Cold JIT times: the driver's own cache must not answer (docs/benchmarks.md).
  setenv("CUDA_CACHE_DISABLE", "1", 1);
  setenv("FATPACK_CACHE_DISABLE", "1", 1);  // nor fatpack's (tests/cache measures the cache)
  if (auto s = fatpack::init(); !s) {
    std::printf("SKIPPED: no CUDA driver/GPU (%s)\n", s.error().message.c_str());
    return k_skip;
  }
  auto dev = fatpack::device(0).value();
  if (dev.name.find("FakeCUDA") != std::string::npos) {
    std::printf("SKIPPED: no CUDA driver/GPU (FATPACK_LIBCUDA points at the fake driver)\n");
    return k_skip;
  }
  std::printf("device 0: %s, CC %d.%d, driver CUDA %d.%d (PTX ISA <= %s), %s, driver library %s\n", dev.name.c_str(),
              dev.cc_major, dev.cc_minor, dev.driver_version / 1000, dev.driver_version % 1000 / 10,
              dev.max_ptx_isa.c_str(), dev.uuid_str.c_str(), fatpack::driver_library().c_str());
  const bool h200 = dev.arch == 90;
  if (!h200) std::printf("note: not CC 9.0; the expected-entry checks below are for the H200 and are skipped\n");
  cuda_calls cu = load_calls();

  add_package("gpu_a", {"vadd.sm_75.cubin", "vadd.sm_80.cubin", "vadd.sm_90.cubin", "vadd.compute_90.ptx"});
  add_package("gpu_b", {"vadd.sm_75.cubin", "vadd.sm_80.cubin", "vadd.sm_86.cubin", "vadd.sm_89.cubin",
                        "vadd.compute_80.ptx"});
  add_package("gpu_d", {"vadd.sm_75.cubin", "vadd.compute_90.ptx@9.9", "vadd.compute_80.ptx"});

  std::printf("\n(a) sm_75/sm_80/sm_90 SASS + compute_90 PTX -> the sm_90 SASS\n");
  {
    auto m = load("gpu_a");
    if (m) {
      print_report("(a)", m.report());
      if (h200) EXPECT(m.report().target == "sm_90" && !m.report().jit, "chose %s", m.report().target.c_str());
      run_kernels(cu, m);
    }
  }

  std::printf("\n(b) sm_75/sm_80/sm_86/sm_89 SASS + compute_80 PTX -> PTX through the cuLink JIT\n");
  {
    auto m = load("gpu_b");
    if (m) {
      print_report("(b)", m.report());
      if (h200)
        EXPECT(m.report().jit && m.report().target.rfind("compute_80", 0) == 0, "chose %s", m.report().target.c_str());
      std::printf("  (b): JIT %.1f ms (cold: CUDA_CACHE_DISABLE=1)\n", m.report().jit_ms);
      run_kernels(cu, m);
    }
  }

  std::printf("\n(p) kernel-granular JIT: vadd.cu's PTX in 2 pieces, vadd first asked for while a stream is captured\n");
  {
    add_package("gpu_p", {"vadd.compute_80.ptx"});
    auto m = load("gpu_p");
    if (m) {
      EXPECT(m.report().pieces.rfind("2 pieces", 0) == 0, "pieces: '%s'", m.report().pieces.c_str());
      EXPECT(m.handle() == nullptr, "a module in pieces has a single CUmodule");
      run_captured(m);
      run_kernels(cu, m);
    }
  }

  std::printf("\n(c) force_ptx on the package of (a) -> compute_90 PTX through the JIT\n");
  {
    auto m = load("gpu_a", fatpack::policy::force_ptx);
    if (m) {
      print_report("(c)", m.report());
      EXPECT(m.report().jit, "force_ptx chose %s", m.report().target.c_str());
      if (h200) EXPECT(m.report().target.rfind("compute_90", 0) == 0, "chose %s", m.report().target.c_str());
      std::printf("  (c): JIT %.1f ms\n", m.report().jit_ms);
      run_kernels(cu, m);
    }
  }

  std::printf("\n(d) compute_90 PTX rewritten to .version 9.9 + compute_80 PTX (9.0) -> 9.9 refused, compute_80 used\n");
  {
    auto m = load("gpu_d");
    if (m) {
      print_report("(d)", m.report());
      bool refused = false;
      for (const auto& c : m.report().candidates)
        if (c.target == "compute_90 (PTX ISA 9.9)") {
          refused = c.verdict == fatpack::verdict::rejected;
          std::printf("  (d): entry %zu %s: %s: %s\n", c.entry, c.target.c_str(), fatpack::verdict_name(c.verdict), c.reason.c_str());
        }
      EXPECT(refused, "the 9.9 PTX was not refused by the selector");
      if (h200) EXPECT(m.report().target == "compute_80 (PTX ISA 9.0)", "chose %s", m.report().target.c_str());
      run_kernels(cu, m);
    }
    // The driver's own answer to that PTX, which is why the selector refuses it up front.
    auto ptx99 = with_version(read_file("vadd.compute_90.ptx"), "9.9");
    ptx99.push_back(0);
    CUdevice d = 0;
    CUcontext ctx = nullptr;
    if (cu.device_get(&d, 0) == CUDA_SUCCESS && cu.retain(&ctx, d) == CUDA_SUCCESS) {
      cu.push(ctx);
      char err[4096] = {};
      CUjit_option k[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* v[] = {err, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof err - 1))};
      CUlinkState ls = nullptr;
      CUresult r = cu.link_create(2, k, v, &ls);
      if (r == CUDA_SUCCESS) {
        r = cu.link_add(ls, CU_JIT_INPUT_PTX, ptx99.data(), ptx99.size(), "vadd_9.9", 0, nullptr, nullptr);
        std::printf("  (d): the driver itself: cuLinkAddData(.version 9.9) -> %d; log: %s\n", static_cast<int>(r), err);
        if (dev.driver_version < 13100) EXPECT(r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "cuLinkAddData returned %d", r);
        cu.link_destroy(ls);
      }
      CUcontext popped;
      cu.pop(&popped);
      cu.release(d);
    }
  }

  std::printf("\n(e) a bare cubin handed in by the application\n");
  {
    auto cubin = read_file("vadd.sm_" + std::to_string(dev.arch) + ".cubin");
    auto s = fatpack::add_image(cubin.data(), cubin.size(), "gpu_bare");
    EXPECT(s.ok(), "%s", s ? "" : s.error().what());
    auto m = load("gpu_bare");
    if (m) {
      print_report("(e)", m.report());
      run_kernels(cu, m);
    }
  }

  std::printf("\n(f) the package of (b) through the nvJitLink back end (FATPACK_NVJITLINK or libnvJitLink.so.13)\n");
  {
    fatpack::set_jit_backend(fatpack::jit_backend::nvjitlink);
    auto m = load("gpu_b");
    fatpack::set_jit_backend(fatpack::jit_backend::culink);
    if (m) {
      print_report("(f)", m.report());
      EXPECT(m.report().jit, "chose %s", m.report().target.c_str());
      std::printf("  (f): JIT %.1f ms via %s\n", m.report().jit_ms, m.report().jit_path.c_str());
      run_kernels(cu, m);
    }
  }

  std::printf("\n(g) -maxrregcount=32 recorded on a PTX entry reaches the JIT (cuLink, then nvJitLink)\n");
  {
    add_package("gpu_regs", {"regs.compute_80.ptx"});
    add_package("gpu_regs32", {"regs.compute_80.ptx"}, "gpu_regs32", "-maxrregcount=32");
    auto registers = [&](const char* package) {
      auto m = load(package);
      if (!m) return -1;
      print_report(package, m.report());
      auto f = m.function("_Z4regsPfPKfi");
      if (!f) {
        EXPECT(false, "%s: %s", package, f.error().what());
        return -1;
      }
      int n = -1;
      CUresult r = cu.func_attribute(&n, CU_FUNC_ATTRIBUTE_NUM_REGS, f.value());
      EXPECT(r == CUDA_SUCCESS, "cuFuncGetAttribute(NUM_REGS) -> %d", static_cast<int>(r));
      std::printf("  (g) %s: %d registers via %s\n", package, n, m.report().jit_path.c_str());
      return n;
    };
    const int free_regs = registers("gpu_regs"), limited = registers("gpu_regs32");
    EXPECT(free_regs > 32, "without options: %d registers (the test needs a kernel above 32)", free_regs);
    EXPECT(limited > 0 && limited <= 32, "with -maxrregcount=32: %d registers", limited);
    // The same through nvJitLink: another package name, so nothing is reused from the cuLink load.
    add_package("gpu_regs32_nvj", {"regs.compute_80.ptx"}, "gpu_regs32_nvj", "-maxrregcount=32");
    fatpack::set_jit_backend(fatpack::jit_backend::nvjitlink);
    const int nvj = registers("gpu_regs32_nvj");
    fatpack::set_jit_backend(fatpack::jit_backend::culink);
    EXPECT(nvj > 0 && nvj <= 32, "with -maxrregcount=32 via nvJitLink: %d registers", nvj);
  }

  std::printf("\n(h) kernels by C++ name: names.cu's templated and overloaded kernels, SASS, PTX and library\n");
  {
    add_package("gpu_names", {"names.sm_90.cubin", "names.compute_90.ptx"});
    for (auto pol : {fatpack::policy::prefer_sass, fatpack::policy::force_ptx}) {
      auto m = load("gpu_names", pol);
      if (!m) continue;
      print_report("(h)", m.report());
      run_named_kernels(cu, m, nullptr);
    }
    auto m = load("gpu_names");
    fatpack::load_options o;
    o.device = 0;
    auto lib = fatpack::load_library("gpu_names", o);
    EXPECT(lib.has_value(), "%s", lib ? "" : lib.error().what());
    if (m && lib) run_named_kernels(cu, m, &*lib);
  }
  add_rdc_package("gpu_rdc", false);
  add_rdc_package("gpu_rdc_reloc", true);
  std::printf("\n(i) separate compilation: relocatable PTX of two files, one link group -> cuLink links both\n");
  {
    auto m = load("gpu_rdc");
    if (m) {
      print_report("(i)", m.report());
      EXPECT(m.report().jit && m.report().target.find("[2 linked parts]") != std::string::npos, "chose %s",
             m.report().target.c_str());
      run_rdc_kernel(cu, m);
    }
  }
  std::printf("\n(j) the link group of (i) through nvJitLink\n");
  {
    fatpack::set_jit_backend(fatpack::jit_backend::nvjitlink);
    auto m = load("gpu_rdc_reloc", fatpack::policy::force_ptx);  // another package: no in-process reuse of (h)
    fatpack::set_jit_backend(fatpack::jit_backend::culink);
    if (m) {
      print_report("(j)", m.report());
      std::printf("  (j): JIT %.1f ms via %s\n", m.report().jit_ms, m.report().jit_path.c_str());
      run_rdc_kernel(cu, m);
    }
  }
  std::printf("\n(k) a relocatable sm_90 cubin (not device-linked) before that group -> refused, the group loads\n");
  {
    auto m = load("gpu_rdc_reloc");
    if (m) {
      print_report("(k)", m.report());
      const auto& at = m.report().attempts;
      if (h200) {
        EXPECT(at.size() == 2 && !at[0].ok && at[0].message.find("relocatable cubin") != std::string::npos,
               "the relocatable cubin was not refused first (%zu attempts)", at.size());
        if (!at.empty()) std::printf("  (k): entry %zu %s: %s\n", at[0].entry, at[0].target.c_str(), at[0].message.c_str());
      }
      run_rdc_kernel(cu, m);
    }
  }

  std::printf("\n(l) link-time optimisation: the LTO-IR group of two files (nvcc -ltoir -dlto) -> nvJitLink -lto\n");
  {
    add_lto_package("gpu_lto");
    auto m = load("gpu_lto");
    if (m) {
      print_report("(l)", m.report());
      std::printf("  (l): JIT %.1f ms via %s\n", m.report().jit_ms, m.report().jit_path.c_str());
      // Where libnvJitLink.so.13 loads (the toolkit's lib64 on the loader path, or FATPACK_NVJITLINK),
      // the LTO-IR group ranks above the PTX group; without it the PTX group loads and this says so.
      EXPECT(m.report().target.rfind("lto_90", 0) == 0 && m.report().jit_path.find("nvjitlink") != std::string::npos,
             "chose %s via %s (is libnvJitLink.so.13 on the loader path? FATPACK_NVJITLINK)", m.report().target.c_str(),
             m.report().jit_path.c_str());
      run_rdc_kernel(cu, m);
    }
  }

  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
  return g_failures ? 1 : 0;
}
