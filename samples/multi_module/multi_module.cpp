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

struct loaded {
  fatpack::module module;
  fatpack::cu_function kernel = nullptr;
};

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

  // 4. Load every module; the ones warm-up compiled report their SASS as reused.
  struct want {
    const char* package;
    const char* module;
    const char* kernel;
  };
  const want wanted[] = {{"mm_core", "vector_add", "vector_add"},
                         {"mm_core", "saxpy", "saxpy"},
                         {"mm_extra", "scale", "scale"},
                         {"mm_extra", "block_sum", "block_sum"}};
  std::vector<loaded> kernels;
  for (const want& w : wanted) {
    fatpack::load_options where;
    where.package = w.package;
    auto m = fatpack::load_module(w.module, where);
    if (!m) return sample::fail(opt, m.error());
    const fatpack::load_report& r = m->report();
    std::printf("%s/%s: entry %zu %s (%s), %.3f ms\n", w.package, w.module, r.entry, r.target.c_str(),
                !r.jit ? "SASS" : r.jit_reused ? "JIT from PTX, SASS reused" : "JIT from PTX", r.total_ms);
    auto f = m->function(w.kernel);
    if (!f) return sample::fail(opt, f.error());
    kernels.push_back({std::move(m.value()), f.value()});
  }
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernels\n");
    return 0;
  }

  // 5. y = 2 * (a + b) + a; sum(y), each step a kernel of another module.
  auto drv = sample::driver_for(kernels[0].module);
  if (!drv) return sample::fail(opt, drv.error());
  const sample::driver& cu = drv.value();
  std::string err;
  const std::size_t bytes = sizeof(float) * n;
  const unsigned blocks = (n + 255) / 256;
  sample::device_buffer da(cu, bytes, err), db(cu, bytes, err), dy(cu, bytes, err), dp(cu, blocks * sizeof(float), err);
  if (!da || !db || !dy || !dp) return sample::fail(opt, err.c_str());
  int count = n;
  float two = 2.0f, one = 1.0f;
  void* add_args[] = {&da.get(), &db.get(), &dy.get(), &count};  // y = a + b
  void* scale_args[] = {&dy.get(), &two, &count};                 // y *= 2
  void* saxpy_args[] = {&one, &da.get(), &dy.get(), &count};      // y += a
  void* sum_args[] = {&dy.get(), &dp.get(), &count};              // partial sums of y
  auto launch = [&](fatpack::cu_function f, void** args) {
    return cu.check(cu.launch_kernel(f, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel", err);
  };
  std::vector<float> partial(blocks);
  if (!cu.check(cu.memcpy_htod(da.get(), a.data(), bytes), "cuMemcpyHtoD", err) ||
      !cu.check(cu.memcpy_htod(db.get(), b.data(), bytes), "cuMemcpyHtoD", err) || !launch(kernels[0].kernel, add_args) ||
      !launch(kernels[2].kernel, scale_args) || !launch(kernels[1].kernel, saxpy_args) ||
      !launch(kernels[3].kernel, sum_args) || !cu.check(cu.ctx_synchronize(), "cuCtxSynchronize", err) ||
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
