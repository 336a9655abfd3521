// future-gpu: this program's package has no SASS for the GPU it runs on (on an H200: SASS for sm_75,
// sm_80, sm_86 and sm_89 only, plus compute_80 PTX), the situation of every product on a GPU released
// after it shipped. fatpack JIT-compiles the PTX through the driver; the SASS goes to fatpack's cache,
// so the next run of the program loads it without compiling. Run it twice (run_twice.sh does) and
// compare the reports. See README.md.
#include "sample.hpp"

#include <chrono>
#include <cmath>
#include <vector>

static float poly_cpu(float v) {
  float acc = 0.0f;
  for (int k = 24; k >= 0; --k) acc = acc * v + 1.0f / float(k + 1);
  return acc;
}

int main(int argc, char** argv) {
  sample::options opt;
  if (!sample::parse(argc, argv, opt)) return 2;

  const auto start = std::chrono::steady_clock::now();
  fatpack::load_options where;
  where.package = "future_gpu";
  auto module = fatpack::load_module("kernels", where);
  if (!module) return sample::fail(opt, module.error());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const fatpack::load_report& r = module->report();
  sample::print_report(r);
  std::printf("  jit: %s, jit_reused: %s%s%s, jit %.3f ms, load_module %.3f ms in all\n", r.jit ? "yes" : "no",
              r.jit_reused ? "yes" : "no", r.jit_path.empty() ? "" : ", path ", r.jit_path.c_str(), r.jit_ms, load_ms);
  if (r.jit && !r.jit_reused)
    std::printf("  this run compiled the PTX; run the program again: the SASS now comes from the cache\n");
  else if (r.jit_reused)
    std::printf("  the SASS came from an earlier compile (the cache): no JIT this time\n");
  else
    std::printf("  this GPU has SASS in the package: nothing to compile (the sample is meant for a GPU newer than sm_89)\n");

  auto kernel = module->kernel<const float*, float*, int>("poly");
  if (!kernel) return sample::fail(opt, kernel.error());
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernel\n");
    return 0;
  }

  auto drv = sample::driver_for(module.value());
  if (!drv) return sample::fail(opt, drv.error());
  const sample::driver& cu = drv.value();
  std::string err;
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = float(i % 1000) / 1000.0f - 0.5f;
  const std::size_t bytes = sizeof(float) * n;
  sample::device_buffer dx(cu, bytes, err), dy(cu, bytes, err);
  if (!dx || !dy) return sample::fail(opt, err.c_str());
  if (!cu.check(cu.memcpy_htod(dx.get(), x.data(), bytes), "cuMemcpyHtoD", err)) return sample::fail(opt, err.c_str());
  if (fatpack::status s = kernel->launch((n + 255) / 256, 256, 0, nullptr, dx.as<const float>(), dy.as<float>(), n); !s)
    return sample::fail(opt, s.error());
  if (!cu.check(cu.ctx_synchronize(), "cuCtxSynchronize", err) ||
      !cu.check(cu.memcpy_dtoh(y.data(), dy.get(), bytes), "cuMemcpyDtoH", err))
    return sample::fail(opt, err.c_str());
  // Different JIT paths emit different SASS (and may contract to FMA differently): compare with a tolerance.
  for (int i = 0; i < n; ++i) {
    const float want = poly_cpu(x[i]);
    if (std::fabs(y[i] - want) > 1e-5f * std::fmax(1.0f, std::fabs(want))) {
      std::fprintf(stderr, "%s: mismatch at %d: GPU %.8g, CPU %.8g\n", opt.program, i, y[i], want);
      return 1;
    }
  }
  std::printf("ok: %d results match the CPU\n", n);
  return 0;
}
