// cudart_library: a CUDA runtime (cudart) program that launches fatpack-loaded kernels with cudart's
// own launch calls. fatpack::load_library loads each module as a library, which belongs to no
// context; a library's kernel (a CUkernel) is a cudaKernel_t, which cudaLaunchKernel takes in place of
// a __global__ function's address (cast to const void*), as does the cudaLaunchKernelEx overload for a
// cudaKernel_t. cudart owns the device memory and the stream. See README.md and docs/runtime.md §3.
#include "cudart_sample.hpp"
#include "sample.hpp"

#include <cmath>
#include <vector>

namespace {

const auto ok = sample::cudart_ok;  // ok(cudaCall(...), "cudaCall", message)

}  // namespace

int main(int argc, char** argv) {
  sample::options opt;
  if (!sample::parse(argc, argv, opt)) return 2;

  // fatpack first: without a driver it says which library is missing (cudart would only say
  // "insufficient driver"). The libraries need no context: they are loaded before cudart's first call.
  if (fatpack::status s = fatpack::init(); !s) return sample::fail(opt, s.error());
  fatpack::load_options where;
  where.package = "cl_kernels";
  where.device = 0;  // the device cudart uses below
  auto add = fatpack::load_library("vector_add", where);
  if (!add) return sample::fail(opt, add.error());
  auto axpy = fatpack::load_library("saxpy", where);
  if (!axpy) return sample::fail(opt, axpy.error());
  sample::print_report(add->report());
  sample::print_report(axpy->report());
  // fatpack::cu_kernel (CUkernel) and cudaKernel_t are the same handle type.
  auto add_kernel = add->kernel("vector_add");
  if (!add_kernel) return sample::fail(opt, add_kernel.error());
  auto axpy_kernel = axpy->kernel("saxpy");
  if (!axpy_kernel) return sample::fail(opt, axpy_kernel.error());
  const cudaKernel_t vector_add = add_kernel.value();
  const cudaKernel_t saxpy = axpy_kernel.value();
  if (opt.load_only) {
    std::printf("loaded; kernels vector_add and saxpy are cudaKernel_t handles; --load-only: no cudart call\n");
    return 0;
  }

  const int n = 1 << 22;
  const std::size_t bytes = sizeof(float) * n;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i % 113) * 0.25f;
    b[i] = 5.0f - float(i % 29);
  }
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cudaStream_t stream = nullptr;
  float alpha = 0.5f;
  int count = n;
  const unsigned blocks = (n + 255) / 256;
  std::string err;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(256);
  config.stream = nullptr;  // set below, once the stream exists
  void* add_args[] = {&da, &db, &dc, &count};  // vector_add(a, b, c, n): c = a + b
  bool good = ok(cudaSetDevice(0), "cudaSetDevice", err) && ok(cudaStreamCreate(&stream), "cudaStreamCreate", err) &&
              ok(cudaMalloc(&da, bytes), "cudaMalloc", err) && ok(cudaMalloc(&db, bytes), "cudaMalloc", err) &&
              ok(cudaMalloc(&dc, bytes), "cudaMalloc", err) &&
              ok(cudaMemcpyAsync(da, a.data(), bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", err) &&
              ok(cudaMemcpyAsync(db, b.data(), bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", err);
  if (good) {
    config.stream = stream;
    // A cudaKernel_t where cudaLaunchKernel expects a __global__ function's address.
    good = ok(cudaLaunchKernel(reinterpret_cast<const void*>(vector_add), dim3(blocks), dim3(256), add_args, 0, stream),
              "cudaLaunchKernel(vector_add as cudaKernel_t)", err) &&
           // The cudaLaunchKernelEx overload for a cudaKernel_t: saxpy(alpha, x, y, n), y = alpha * x + y.
           ok(cudaLaunchKernelEx(&config, saxpy, alpha, da, dc, count), "cudaLaunchKernelEx(saxpy as cudaKernel_t)",
              err);
  }
  good = good && ok(cudaMemcpyAsync(c.data(), dc, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync", err) &&
         ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize", err);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  if (stream) cudaStreamDestroy(stream);
  if (!good) return sample::fail(opt, err.c_str());

  for (int i = 0; i < n; ++i) {
    const float want = 0.5f * a[i] + (a[i] + b[i]);
    if (std::fabs(c[i] - want) > 1e-5f * std::fmax(1.0f, std::fabs(want))) {
      std::fprintf(stderr, "%s: mismatch at %d: GPU %g, CPU %g\n", opt.program, i, c[i], want);
      return 1;
    }
  }
  std::printf("ok: %d results match the CPU (cudaLaunchKernel and cudaLaunchKernelEx of cudaKernel_t handles)\n", n);
  return 0;
}
