/* c-api: the hello sample in C. c = a + b on the GPU through fatpack's C API (<fatpack/fatpack.h>):
 * the kernel was compiled for several GPUs and embedded by fatpack_add_kernels; fatpack picks the
 * entry for this GPU and says why; the result is checked against the CPU. The driver calls go through
 * fatpack_driver_entry_point, so the program does not link libcuda. See README.md.
 *   c_api [--load-only] [--skip-without-gpu]   (as the C++ samples: samples/common/sample.hpp) */
#include <cuda.h>
#include <fatpack/fatpack.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*ctx_set_current_fn)(CUcontext);
typedef CUresult (*ctx_synchronize_fn)(void);
typedef CUresult (*mem_alloc_fn)(CUdeviceptr*, size_t);
typedef CUresult (*mem_free_fn)(CUdeviceptr);
typedef CUresult (*memcpy_htod_fn)(CUdeviceptr, const void*, size_t);
typedef CUresult (*memcpy_dtoh_fn)(void*, CUdeviceptr, size_t);
typedef CUresult (*launch_kernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, CUstream, void**, void**);

static int skip_without_gpu = 0;

/* 77 (skipped) for a machine without driver or GPU when asked, else 1. */
static int fail(fatpack_status status) {
  fprintf(stderr, "c_api: %s: %s\n", fatpack_status_name(status), fatpack_last_error());
  if (status == FATPACK_ERROR_NO_DRIVER || status == FATPACK_ERROR_NO_DEVICE) {
    fprintf(stderr, "c_api: this sample needs an NVIDIA GPU and its driver%s\n", skip_without_gpu ? "; skipped" : "");
    return skip_without_gpu ? 77 : 1;
  }
  return 1;
}

static int cuda_failed(CUresult r, const char* call) {
  fprintf(stderr, "c_api: %s failed: CUresult %d\n", call, (int)r);
  return 1;
}

static fatpack_status entry(const char* symbol, void** fn) { return fatpack_driver_entry_point(symbol, 12000, fn); }

int main(int argc, char** argv) {
  int load_only = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--load-only") == 0) {
      load_only = 1;
    } else if (strcmp(argv[i], "--skip-without-gpu") == 0) {
      skip_without_gpu = 1;
    } else {
      fprintf(stderr, "usage: c_api [--load-only] [--skip-without-gpu]\n");
      return 2;
    }
  }

  printf("c_api: fatpack %s\n", fatpack_version_string());
  fatpack_module* module = NULL;
  fatpack_status s = fatpack_load_module("vector_add", "c_hello", -1, &module);
  if (s != FATPACK_OK) return fail(s);
  /* A versioned struct: FATPACK_DEVICE_INFO_INIT sets struct_size (docs/runtime.md §2). */
  fatpack_device_info info = FATPACK_DEVICE_INFO_INIT;
  if ((s = fatpack_get_device_info(fatpack_module_device(module), &info)) != FATPACK_OK) return fail(s);
  printf("c_api: device %d: %s, CC %d.%d; JIT cache %s %s\n", info.ordinal, info.name, info.cc_major, info.cc_minor,
         fatpack_cache_mode(), fatpack_cache_path());
  /* The load report: which entry, why, and the time per phase (the FATPACK_LOG=info text). */
  printf("%s\n", fatpack_module_report(module));
  printf("c_api: the kernel %s\n", fatpack_module_jit(module) ? "was JIT-compiled from PTX" : "is SASS from the package");
  struct CUfunc_st* kernel = NULL;
  if ((s = fatpack_module_function(module, "vector_add", &kernel)) != FATPACK_OK) return fail(s);
  if (load_only) {
    printf("loaded; --load-only: not running the kernel\n");
    fatpack_module_release(module);
    return 0;
  }

  ctx_set_current_fn ctx_set_current;
  ctx_synchronize_fn ctx_synchronize;
  mem_alloc_fn mem_alloc;
  mem_free_fn mem_free;
  memcpy_htod_fn memcpy_htod;
  memcpy_dtoh_fn memcpy_dtoh;
  launch_kernel_fn launch_kernel;
  if ((s = entry("cuCtxSetCurrent", (void**)&ctx_set_current)) || (s = entry("cuCtxSynchronize", (void**)&ctx_synchronize)) ||
      (s = entry("cuMemAlloc", (void**)&mem_alloc)) || (s = entry("cuMemFree", (void**)&mem_free)) ||
      (s = entry("cuMemcpyHtoD", (void**)&memcpy_htod)) || (s = entry("cuMemcpyDtoH", (void**)&memcpy_dtoh)) ||
      (s = entry("cuLaunchKernel", (void**)&launch_kernel)))
    return fail(s);

  /* fatpack loaded the module into the device's primary context: allocate in the same one. */
  CUresult r = ctx_set_current(fatpack_module_context(module));
  if (r != CUDA_SUCCESS) return cuda_failed(r, "cuCtxSetCurrent");
  int n = 1 << 20;
  size_t bytes = sizeof(float) * (size_t)n;
  float* a = malloc(bytes);
  float* b = malloc(bytes);
  float* c = malloc(bytes);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * (float)i;
    b[i] = 2.0f - (float)(i % 7);
  }
  CUdeviceptr da = 0, db = 0, dc = 0;
  int rc = 0;
  if ((r = mem_alloc(&da, bytes)) || (r = mem_alloc(&db, bytes)) || (r = mem_alloc(&dc, bytes))) {
    rc = cuda_failed(r, "cuMemAlloc");
  } else {
    void* args[] = {&da, &db, &dc, &n};
    if ((r = memcpy_htod(da, a, bytes)) || (r = memcpy_htod(db, b, bytes)) ||
        (r = launch_kernel(kernel, (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL)) ||
        (r = ctx_synchronize()) || (r = memcpy_dtoh(c, dc, bytes))) {
      rc = cuda_failed(r, "a driver call");
    } else {
      for (int i = 0; i < n; ++i) {
        if (fabsf(c[i] - (a[i] + b[i])) > 1e-6f * fabsf(a[i] + b[i])) {
          fprintf(stderr, "c_api: mismatch at %d: GPU %g, CPU %g\n", i, c[i], a[i] + b[i]);
          rc = 1;
          break;
        }
      }
      if (rc == 0) printf("ok: %d sums match the CPU\n", n);
    }
  }
  if (da) mem_free(da);
  if (db) mem_free(db);
  if (dc) mem_free(dc);
  free(a);
  free(b);
  free(c);
  fatpack_module_release(module);
  return rc;
}
