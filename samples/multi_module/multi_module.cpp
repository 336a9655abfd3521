// multi-module: several packages and modules in one program, with background warm-up. fatpack::warm()
// queues, on a thread pool, the JIT of every module that has no SASS for this GPU; the program goes on
// with its own start-up meanwhile, and the loads afterwards find the compiled SASS. Then every kernel
// runs and is checked against the CPU. See README.md.
#include "sample.hpp"

#include <chrono>
#include <cmath>
#include <vector>

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  sample::options opt;
  if (!sample::parse(argc, argv, opt)) return 2;

  // 1. Start compiling what this GPU needs, in the background.
  const auto t0 = std::chrono::steady_clock::now();
  fatpack::warm_handle warm = fatpack::warm();
  std::printf("warm-up: %zu compiles queued (%.3f ms)\n", warm.jobs(), ms_since(t0));

  // 2. The program's own start-up work meanwhile.
  const int n = 1 << 20;
  std::vector<float> a(n), b(n), y(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i % 97) * 0.25f;
    b[i] = 1.0f - float(i % 13);
  }

  // 3. Wait for the warm-up (a load would also wait for, or take over, a compile it needs).
  const auto t1 = std::chrono::steady_clock::now();
  if (fatpack::status s = warm.wait(); !s) return sample::fail(opt, s.error());
  std::printf("warm-up: done after %.3f ms more\n", ms_since(t1));

  // 4. Load every module; the ones warm-up compiled report their SASS as reused. Each kernel is
  // looked up with its argument types (checked against its parameters) and keeps its module loaded.
  auto load = [&](const char* package, const char* module) -> fatpack::result<fatpack::module> {
    fatpack::load_options where;
    where.package = package;
    auto m = fatpack::load_module(module, where);
    if (!m) return m;
    const fatpack::load_report& r = m->report();
    std::printf("%s/%s: entry %zu %s (%s), %.3f ms\n", package, module, r.entry, r.target.c_str(),
                !r.jit ? "SASS" : r.jit_reused ? "JIT from PTX, SASS reused" : "JIT from PTX", r.total_ms);
    return m;
  };
  auto add_module = load("mm_core", "vector_add");
  if (!add_module) return sample::fail(opt, add_module.error());
  auto add = add_module->kernel<const float*, const float*, float*, int>("vector_add");  // y = a + b
  auto saxpy_module = load("mm_core", "saxpy");
  if (!saxpy_module) return sample::fail(opt, saxpy_module.error());
  auto saxpy = saxpy_module->kernel<float, const float*, float*, int>("saxpy");  // y += alpha * x
  auto scale_module = load("mm_extra", "scale");
  if (!scale_module) return sample::fail(opt, scale_module.error());
  auto scale = scale_module->kernel<float*, float, int>("scale");  // x *= factor
  auto sum_module = load("mm_extra", "block_sum");
  if (!sum_module) return sample::fail(opt, sum_module.error());
  auto block_sum = sum_module->kernel<const float*, float*, int>("block_sum");  // partial sums
  for (const fatpack::status& s : {add ? fatpack::status() : add.error(), saxpy ? fatpack::status() : saxpy.error(),
                                   scale ? fatpack::status() : scale.error(),
                                   block_sum ? fatpack::status() : block_sum.error()})
    if (!s) return sample::fail(opt, s.error());
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernels\n");
    return 0;
  }

  // 5. y = 2 * (a + b) + a; sum(y), each step a kernel of another module.
  auto drv = sample::driver_for(add_module.value());  // allocate in the modules' context
  if (!drv) return sample::fail(opt, drv.error());
  const sample::driver& cu = drv.value();
  std::string err;
  const std::size_t bytes = sizeof(float) * n;
  const unsigned blocks = (n + 255) / 256;
  sample::device_buffer da(cu, bytes, err), db(cu, bytes, err), dy(cu, bytes, err), dp(cu, blocks * sizeof(float), err);
  if (!da || !db || !dy || !dp) return sample::fail(opt, err.c_str());
  std::vector<float> partial(blocks);
  if (!cu.check(cu.memcpy_htod(da.get(), a.data(), bytes), "cuMemcpyHtoD", err) ||
      !cu.check(cu.memcpy_htod(db.get(), b.data(), bytes), "cuMemcpyHtoD", err))
    return sample::fail(opt, err.c_str());
  const fatpack::dims grid(blocks), block(256);
  for (const fatpack::status& s :
       {add->launch(grid, block, 0, nullptr, da.as<const float>(), db.as<const float>(), dy.as<float>(), n),  // y = a + b
        scale->launch(grid, block, 0, nullptr, dy.as<float>(), 2.0f, n),                                  // y *= 2
        saxpy->launch(grid, block, 0, nullptr, 1.0f, da.as<const float>(), dy.as<float>(), n),            // y += a
        block_sum->launch(grid, block, 0, nullptr, dy.as<const float>(), dp.as<float>(), n)})           // partial sums
    if (!s) return sample::fail(opt, s.error());
  if (!cu.check(cu.ctx_synchronize(), "cuCtxSynchronize", err) ||
      !cu.check(cu.memcpy_dtoh(y.data(), dy.get(), bytes), "cuMemcpyDtoH", err) ||
      !cu.check(cu.memcpy_dtoh(partial.data(), dp.get(), blocks * sizeof(float)), "cuMemcpyDtoH", err))
    return sample::fail(opt, err.c_str());

  double gpu_sum = 0, cpu_sum = 0;
  for (float p : partial) gpu_sum += p;
  for (int i = 0; i < n; ++i) {
    const float want = 2.0f * (a[i] + b[i]) + a[i];
    if (std::fabs(y[i] - want) > 1e-5f * std::fmax(1.0f, std::fabs(want))) {
      std::fprintf(stderr, "%s: mismatch at %d: GPU %g, CPU %g\n", opt.program, i, y[i], want);
      return 1;
    }
    cpu_sum += want;
  }
  // float partial sums of 256 values each: a relative tolerance.
  if (std::fabs(gpu_sum - cpu_sum) > 1e-4 * std::fabs(cpu_sum)) {
    std::fprintf(stderr, "%s: sum: GPU %.6f, CPU %.6f\n", opt.program, gpu_sum, cpu_sum);
    return 1;
  }
  std::printf("ok: 4 kernels from 2 packages match the CPU (sum %.1f)\n", cpu_sum);
  return 0;
}
