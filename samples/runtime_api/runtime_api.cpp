// runtime-api: a CUDA runtime (cudart) application that uses fatpack-loaded kernels. cudart owns the
// memory, the stream and the events; fatpack loads the kernels into the same primary context (it
// uses cuDevicePrimaryCtxRetain, as cudart does) and the program launches them with fatpack's typed launch
// on its own stream. See README.md and docs/runtime.md §3.
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
  // "insufficient driver"), and the rest of a product could go on without the GPU.
  if (fatpack::status s = fatpack::init(); !s) return sample::fail(opt, s.error());

  fatpack::load_options where;
  where.package = "rt_kernels";
  std::string err;
  if (!opt.load_only) {
    // cudart's device 0 and its primary context become current; fatpack's load (device -1) uses the
    // current context's device, so both sides share that context.
    if (!ok(cudaSetDevice(0), "cudaSetDevice", err) || !ok(cudaFree(nullptr), "cudaFree(0)", err))
      return sample::fail(opt, err.c_str());
  } else {
    where.device = 0;  // the fake driver of the tests: no cudart calls at all
  }
  auto add = fatpack::load_module("vector_add", where);
  if (!add) return sample::fail(opt, add.error());
  auto axpy = fatpack::load_module("saxpy", where);
  if (!axpy) return sample::fail(opt, axpy.error());
  sample::print_report(add->report());
  sample::print_report(axpy->report());
  // The kernels with their argument types, checked once against their real parameters.
  auto add_fn = add->kernel<const float*, const float*, float*, int>("vector_add");
  auto axpy_fn = axpy->kernel<float, const float*, float*, int>("saxpy");
  if (!add_fn) return sample::fail(opt, add_fn.error());
  if (!axpy_fn) return sample::fail(opt, axpy_fn.error());
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernels\n");
    return 0;
  }

  const int n = 1 << 22;
  const std::size_t bytes = sizeof(float) * n;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i % 101) * 0.5f;
    b[i] = 3.0f - float(i % 17);
  }
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  const unsigned blocks = (n + 255) / 256;
  float kernel_ms = 0;
  bool good = ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", err) &&
              ok(cudaEventCreate(&start), "cudaEventCreate", err) && ok(cudaEventCreate(&stop), "cudaEventCreate", err) &&
              ok(cudaMalloc(&da, bytes), "cudaMalloc", err) && ok(cudaMalloc(&db, bytes), "cudaMalloc", err) &&
              ok(cudaMalloc(&dc, bytes), "cudaMalloc", err) &&
              ok(cudaMemcpyAsync(da, a.data(), bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", err) &&
              ok(cudaMemcpyAsync(db, b.data(), bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", err) &&
              ok(cudaEventRecord(start, stream), "cudaEventRecord", err);
  if (good) {
    // The typed launch takes the cudaStream_t as it is (a CUstream): the kernels queue behind the
    // copies on the program's own stream, in the modules' context (cudart's primary context).
    fatpack::status s = add_fn->launch(blocks, 256, 0, stream, da, db, dc, n);  // c = a + b
    if (s) s = axpy_fn->launch(blocks, 256, 0, stream, 0.5f, da, dc, n);      // c += 0.5 * a
    if (!s) {
      err = s.error().what();
      good = false;
    }
  }
  good = good && ok(cudaEventRecord(stop, stream), "cudaEventRecord", err) &&
         ok(cudaMemcpyAsync(c.data(), dc, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync", err) &&
         ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize", err) &&
         ok(cudaEventElapsedTime(&kernel_ms, start, stop), "cudaEventElapsedTime", err);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (stream) cudaStreamDestroy(stream);
  if (!good) return sample::fail(opt, err.c_str());

  for (int i = 0; i < n; ++i) {
    const float want = a[i] + b[i] + 0.5f * a[i];
    if (std::fabs(c[i] - want) > 1e-5f * std::fmax(1.0f, std::fabs(want))) {
      std::fprintf(stderr, "%s: mismatch at %d: GPU %g, CPU %g\n", opt.program, i, c[i], want);
      return 1;
    }
  }
  std::printf("ok: %d results match the CPU; the two kernels took %.3f ms on the stream (cudaEvent)\n", n, kernel_ms);
  return 0;
}
