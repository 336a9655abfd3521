// runtime_compile: a fused element-wise kernel built at run time from an expression given as a string
// (fatpack::compile, docs/nvrtc.md). See README.md.
#include "sample.hpp"

#include <fatpack/compile.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// The expression becomes the body of a template; the name expression instantiates it for float, and
// the kernel is then found by its C++ name.
std::string kernel_source(const std::string& expression) {
  return "template <class T>\n"
         "__global__ void fused(const T* __restrict__ xs, const T* __restrict__ ys, T* __restrict__ out, T a, int n) {\n"
         "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n"
         "  const T x = xs[i], y = ys[i];\n"
         "  out[i] = " + expression + ";\n"
         "}\n";
}

// The CPU's answer for the default expression only (another expression is run, not checked).
float cpu_default(float a, float x, float y) { return a * x + std::sin(y); }

}  // namespace

int main(int argc, char** argv) {
  // The expression is the one argument that is not an option.
  std::string expression = "a * x + sinf(y)";
  // --pad-terms N: N more terms that add zero (0.0f * sinf(x + k): IEEE arithmetic keeps them), so
  // the kernel is large (a cache entry the runtime maps) and its results are still the default's.
  int pad_terms = 0;
  std::vector<char*> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--pad-terms" && i + 1 < argc) pad_terms = std::atoi(argv[++i]);
    else if (argv[i][0] == '-') args.push_back(argv[i]);
    else expression = argv[i];
  }
  const bool default_expression = expression == "a * x + sinf(y)";
  if (pad_terms < 0 || pad_terms > 10000) {
    std::fprintf(stderr, "--pad-terms: 0 to 10000\n");
    return 2;
  }
  if (pad_terms > 0) {
    expression += " + 0.0f * (sinf(x)";
    for (int k = 1; k < pad_terms; ++k) expression += " + sinf(x + " + std::to_string(k) + ".0f)";
    expression += ")";
  }
  sample::options opt;
  if (!sample::parse(static_cast<int>(args.size()), args.data(), opt)) return 2;
  if (pad_terms > 0) std::printf("expression: out = a * x + sinf(y) + %d terms that add zero\n", pad_terms);
  else std::printf("expression: out = %s\n", expression.c_str());

  fatpack::compile_request req;
  req.name = "fused.cu";
  req.source = kernel_source(expression);
  req.name_expressions = {"fused<float>"};
  req.options = {"-std=c++17"};
  auto program = fatpack::compile(req);
  if (!program) return sample::fail(opt, program.error());  // what() ends with NVRTC's log (file:line)
  const fatpack::compile_report& r = program->report;
  std::printf("path: %s (%s): %s\n", fatpack::compile_path_name(r.path), r.target.c_str(), r.reason.c_str());
  std::printf("compiler: %s\n", r.compiler.c_str());
  std::printf("took %.3f ms (NVRTC %.3f ms)\n", r.total_ms, r.nvrtc_ms);
  auto kernel = program->library.kernel<const float*, const float*, float*, float, int>("fused<float>");
  if (!kernel) return sample::fail(opt, kernel.error());
  std::printf("kernel: %s\n", kernel->name().c_str());
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernel\n");
    return 0;
  }

  // Memory in the device's primary context, where the library's kernel launches without a context.
  auto cu = sample::load_driver();
  if (!cu) return sample::fail(opt, cu.error());
  decltype(&::cuDevicePrimaryCtxRetain) retain = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  if (auto s = sample::entry_point(retain, "cuDevicePrimaryCtxRetain"); !s) return sample::fail(opt, s.error());
  if (auto s = sample::entry_point(device_get, "cuDeviceGet"); !s) return sample::fail(opt, s.error());
  std::string err;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (!cu->check(device_get(&dev, program->library.device()), "cuDeviceGet", err) ||
      !cu->check(retain(&ctx, dev), "cuDevicePrimaryCtxRetain", err) ||
      !cu->check(cu->ctx_set_current(ctx), "cuCtxSetCurrent", err))
    return sample::fail(opt, err.c_str());
  const int n = 1 << 20;
  const float a = 1.5f;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.01f;
    y[i] = static_cast<float>(i % 777) * 0.02f;
  }
  const std::size_t bytes = sizeof(float) * n;
  sample::device_buffer dx(*cu, bytes, err), dy(*cu, bytes, err), dout(*cu, bytes, err);
  if (!dx || !dy || !dout) return sample::fail(opt, err.c_str());
  if (!cu->check(cu->memcpy_htod(dx.get(), x.data(), bytes), "cuMemcpyHtoD", err) ||
      !cu->check(cu->memcpy_htod(dy.get(), y.data(), bytes), "cuMemcpyHtoD", err))
    return sample::fail(opt, err.c_str());
  if (auto s = kernel->launch((n + 255) / 256, 256, 0, nullptr, dx.as<const float>(), dy.as<const float>(),
                              dout.as<float>(), a, n);
      !s)
    return sample::fail(opt, s.error());
  if (!cu->check(cu->ctx_synchronize(), "cuCtxSynchronize", err) ||
      !cu->check(cu->memcpy_dtoh(out.data(), dout.get(), bytes), "cuMemcpyDtoH", err))
    return sample::fail(opt, err.c_str());
  if (!default_expression) {
    std::printf("ran %d elements (another expression than the default: not checked against the CPU)\n", n);
    return 0;
  }
  for (int i = 0; i < n; ++i) {
    const float want = cpu_default(a, x[i], y[i]);
    if (std::fabs(out[i] - want) > 1e-4f * std::fmax(1.0f, std::fabs(want)))
      return sample::fail(opt, ("mismatch at " + std::to_string(i) + ": GPU " + std::to_string(out[i]) + ", CPU " +
                                std::to_string(want))
                                   .c_str());
  }
  std::printf("ok: %d results match the CPU\n", n);
  return 0;
}
