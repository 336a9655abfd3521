// separate_compilation: a kernel that calls a __device__ function from another .cu file, built with
// -rdc=true by fatpack_add_kernels into a static library, linked into this program. It checks
// y = (2 * alpha * x + 1) + y against the CPU. With FATPACK_FORCE_PTX_JIT=1 the module comes from
// the relocatable PTX of both files, JIT-linked by the driver; otherwise from the sm_90 SASS that
// nvcc -dlink made at build time. See README.md.
#include "sample.hpp"

#include <cmath>
#include <vector>

int main(int argc, char** argv) {
  sample::options opt;
  if (!sample::parse(argc, argv, opt)) return 2;

  // NAME separate_compilation, MODULE rdc in CMakeLists.txt: both files make the one module "rdc".
  fatpack::load_options where;
  where.package = "separate_compilation";
  auto module = fatpack::load_module("rdc", where);
  if (!module) return sample::fail(opt, module.error());
  sample::print_report(module->report());
  // The kernel with its argument types, checked once against its real parameters.
  auto kernel = module->kernel<float, const float*, float*, int>("rdc_saxpy");
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
  float alpha = 1.5f;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.25f * float(i % 1000);
    y[i] = 3.0f - float(i % 11);
  }
  const std::size_t bytes = sizeof(float) * n;
  sample::device_buffer dx(cu, bytes, err), dy(cu, bytes, err);
  if (!dx || !dy) return sample::fail(opt, err.c_str());
  const unsigned threads = 256, blocks = (n + threads - 1) / threads;
  if (!cu.check(cu.memcpy_htod(dx.get(), x.data(), bytes), "cuMemcpyHtoD", err) ||
      !cu.check(cu.memcpy_htod(dy.get(), y.data(), bytes), "cuMemcpyHtoD", err))
    return sample::fail(opt, err.c_str());
  if (fatpack::status s = kernel->launch(blocks, threads, 0, nullptr, alpha, dx.as<const float>(), dy.as<float>(), n); !s)
    return sample::fail(opt, s.error());
  if (!cu.check(cu.ctx_synchronize(), "cuCtxSynchronize", err) ||
      !cu.check(cu.memcpy_dtoh(out.data(), dy.get(), bytes), "cuMemcpyDtoH", err))
    return sample::fail(opt, err.c_str());

  for (int i = 0; i < n; ++i) {
    const float want = (2.0f * (alpha * x[i]) + 1.0f) + y[i];
    if (std::fabs(out[i] - want) > 1e-5f * std::fmax(1.0f, std::fabs(want))) {
      std::fprintf(stderr, "%s: mismatch at %d: GPU %g, CPU %g\n", opt.program, i, out[i], want);
      return 1;
    }
  }
  std::printf("ok: %d results of a kernel calling a device function from another file match the CPU\n", n);
  return 0;
}
