// hello: c = a + b on the GPU with a kernel that fatpack_add_kernels compiled for several GPUs and
// embedded in this program. It prints which entry of the package runs on this GPU and why, then
// checks the result against the CPU. See README.md.
#include "sample.hpp"

#include <cmath>
#include <vector>

int main(int argc, char** argv) {
  sample::options opt;
  if (!sample::parse(argc, argv, opt)) return 2;

  // The package is named in CMakeLists.txt (NAME hello); its module is named after vector_add.cu.
  fatpack::load_options where;
  where.package = "hello";
  auto module = fatpack::load_module("vector_add", where);
  if (!module) return sample::fail(opt, module.error());
  sample::print_report(module->report());
  // The kernel with its argument types: checked once against its real parameters (count, offsets,
  // sizes), then launched with values.
  auto kernel = module->kernel<const float*, const float*, float*, int>("vector_add");
  if (!kernel) return sample::fail(opt, kernel.error());
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernel\n");
    return 0;
  }

  // fatpack loaded the module into the device's primary context; allocate in the same one.
  auto drv = sample::driver_for(module.value());
  if (!drv) return sample::fail(opt, drv.error());
  const sample::driver& cu = drv.value();
  std::string err;

  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * float(i);
    b[i] = 2.0f - float(i % 7);
  }
  const std::size_t bytes = sizeof(float) * n;
  sample::device_buffer da(cu, bytes, err), db(cu, bytes, err), dc(cu, bytes, err);
  if (!da || !db || !dc) return sample::fail(opt, err.c_str());
  const unsigned threads = 256, blocks = (n + threads - 1) / threads;
  if (!cu.check(cu.memcpy_htod(da.get(), a.data(), bytes), "cuMemcpyHtoD", err) ||
      !cu.check(cu.memcpy_htod(db.get(), b.data(), bytes), "cuMemcpyHtoD", err))
    return sample::fail(opt, err.c_str());
  if (fatpack::status s = kernel->launch(blocks, threads, 0, nullptr, da.as<const float>(), db.as<const float>(),
                                         dc.as<float>(), n);
      !s)
    return sample::fail(opt, s.error());
  if (!cu.check(cu.ctx_synchronize(), "cuCtxSynchronize", err) ||
      !cu.check(cu.memcpy_dtoh(c.data(), dc.get(), bytes), "cuMemcpyDtoH", err))
    return sample::fail(opt, err.c_str());

  for (int i = 0; i < n; ++i) {
    if (std::fabs(c[i] - (a[i] + b[i])) > 1e-6f * std::fabs(a[i] + b[i])) {
      std::fprintf(stderr, "%s: mismatch at %d: GPU %g, CPU %g\n", opt.program, i, c[i], a[i] + b[i]);
      return 1;
    }
  }
  std::printf("ok: %d sums match the CPU\n", n);
  return 0;
}
