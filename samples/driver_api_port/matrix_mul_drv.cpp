// matrix_mul_drv: C = A * B with the CUDA driver API in a context of the program's own, checked
// against the CPU. The kernel (matrix_mul_kernel.cu) is an nvcc fatbin read from a file and loaded
// from memory, as driver-API programs do.
//
// This folder has two copies of this program: matrix_mul_drv.cpp loads the image with the driver's
// cuModuleLoadData; matrix_mul_drv_port.cpp is the same file with that one call changed to fatpack's
// and fatpack's header included, nothing else (check_port_diff.py tests that). See README.md.
//
//   matrix_mul_drv[_port] [--image FATBIN] [--load-only] [--skip-without-gpu]
//
// --image: the kernel image (default: matrix_mul_kernel.fatbin next to the executable). --load-only:
// stop after loading the kernel (the fake driver of the tests cannot run kernels).
// --skip-without-gpu: exit 77 (skipped) instead of 1 when the driver reports no GPU.
// Exit status: 0 results match the CPU, 1 failure, 77 skipped.
#include <cuda.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

const int kTile = 16;  // TILE of matrix_mul_kernel.cu: one block computes one TILE x TILE tile of C

const char* error_name(CUresult r) {
  const char* name = nullptr;
  return cuGetErrorName(r, &name) == CUDA_SUCCESS && name ? name : "an unknown CUresult";
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "matrix_mul_drv: %s failed: %s (%d)\n", what, error_name(r), static_cast<int>(r));
  std::exit(1);
}

std::string default_image_path() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "matrix_mul_kernel.fatbin";
  exe[n] = 0;
  std::string dir(exe);
  return dir.substr(0, dir.rfind('/') + 1) + "matrix_mul_kernel.fatbin";
}

std::vector<char> read_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes;
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in || bytes.empty()) {
    std::fprintf(stderr, "matrix_mul_drv: cannot read the kernel image %s\n", path.c_str());
    std::exit(1);
  }
  return bytes;
}

// Values in [-1, 1) from a fixed linear congruential sequence: the same matrices on every run.
void fill(std::vector<float>& m, unsigned seed) {
  for (auto& v : m) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string image_path = default_image_path();
  bool load_only = false, skip_without_gpu = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--load-only") == 0) {
      load_only = true;
    } else if (std::strcmp(argv[i], "--skip-without-gpu") == 0) {
      skip_without_gpu = true;
    } else if (std::strcmp(argv[i], "--image") == 0 && i + 1 < argc) {
      image_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--image FATBIN] [--load-only] [--skip-without-gpu]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<char> image = read_image(image_path);

  // The driver, device 0, and a context of the program's own, current on this thread.
  CUresult init = cuInit(0);
  int devices = 0;
  if (init == CUDA_SUCCESS) init = cuDeviceGetCount(&devices);
  if (init != CUDA_SUCCESS || devices == 0) {
    std::fprintf(stderr, "matrix_mul_drv: no CUDA device (cuInit/cuDeviceGetCount: %s)%s\n",
                 init != CUDA_SUCCESS ? error_name(init) : "0 devices", skip_without_gpu ? "; skipped" : "");
    return skip_without_gpu ? 77 : 1;
  }
  CUdevice device = 0;
  check(cuDeviceGet(&device, 0), "cuDeviceGet");
  char name[256] = {};
  int cc_major = 0, cc_minor = 0;
  check(cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  check(cuDeviceGetAttribute(&cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(&cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute");
  std::printf("device 0: %s, CC %d.%d\n", name, cc_major, cc_minor);
  CUcontext context = nullptr;
  check(cuCtxCreate(&context, nullptr, 0, device), "cuCtxCreate");

  // The kernel image goes into the current context; the module goes with the context (cuCtxDestroy).
  CUmodule module = nullptr;
  const auto load_start = std::chrono::steady_clock::now();
  CUresult loaded = cuModuleLoadData(&module, image.data());
  const std::chrono::duration<double, std::milli> load_time = std::chrono::steady_clock::now() - load_start;
  check(loaded, "loading the kernel image");
  CUfunction matrix_mul = nullptr;
  check(cuModuleGetFunction(&matrix_mul, module, "matrix_mul"), "cuModuleGetFunction(matrix_mul)");
  std::printf("loaded %s (%zu bytes) in %.3f ms; kernel matrix_mul found\n", image_path.c_str(), image.size(),
              load_time.count());
  if (load_only) {
    std::printf("--load-only: not running the kernel\n");
    check(cuCtxDestroy(context), "cuCtxDestroy");
    return 0;
  }

  // C (a_rows x b_cols) = A (a_rows x a_cols) * B (a_cols x b_cols); every size a multiple of the tile.
  int a_rows = 20 * kTile, a_cols = 30 * kTile, b_cols = 40 * kTile;
  std::vector<float> a(static_cast<std::size_t>(a_rows) * a_cols), b(static_cast<std::size_t>(a_cols) * b_cols);
  std::vector<float> c(static_cast<std::size_t>(a_rows) * b_cols, 0.0f);
  fill(a, 1u);
  fill(b, 2u);
  CUdeviceptr d_a = 0, d_b = 0, d_c = 0;
  check(cuMemAlloc(&d_a, a.size() * sizeof(float)), "cuMemAlloc(A)");
  check(cuMemAlloc(&d_b, b.size() * sizeof(float)), "cuMemAlloc(B)");
  check(cuMemAlloc(&d_c, c.size() * sizeof(float)), "cuMemAlloc(C)");
  check(cuMemcpyHtoD(d_a, a.data(), a.size() * sizeof(float)), "cuMemcpyHtoD(A)");
  check(cuMemcpyHtoD(d_b, b.data(), b.size() * sizeof(float)), "cuMemcpyHtoD(B)");
  void* params[] = {&d_c, &d_a, &d_b, &a_cols, &b_cols};
  check(cuLaunchKernel(matrix_mul, static_cast<unsigned>(b_cols / kTile), static_cast<unsigned>(a_rows / kTile), 1,
                       kTile, kTile, 1, 0, nullptr, params, nullptr),
        "cuLaunchKernel(matrix_mul)");
  check(cuCtxSynchronize(), "cuCtxSynchronize");
  check(cuMemcpyDtoH(c.data(), d_c, c.size() * sizeof(float)), "cuMemcpyDtoH(C)");
  check(cuMemFree(d_a), "cuMemFree");
  check(cuMemFree(d_b), "cuMemFree");
  check(cuMemFree(d_c), "cuMemFree");

  // The CPU's product in double; float sums of a_cols products may differ from it by a few ulps of
  // the sum of the products' magnitudes.
  long wrong = 0;
  double worst = 0.0;
  for (int i = 0; i < a_rows; ++i) {
    for (int j = 0; j < b_cols; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int k = 0; k < a_cols; ++k) {
        const double p = static_cast<double>(a[i * a_cols + k]) * b[k * b_cols + j];
        sum += p;
        magnitude += std::fabs(p);
      }
      const double err = std::fabs(c[i * b_cols + j] - sum) / (magnitude > 0 ? magnitude : 1.0);
      worst = std::fmax(worst, err);
      if (err > 1e-4 && wrong++ == 0)
        std::fprintf(stderr, "matrix_mul_drv: C[%d][%d] is %.7g on the GPU, %.7g on the CPU\n", i, j,
                     static_cast<double>(c[i * b_cols + j]), sum);
    }
  }
  check(cuCtxDestroy(context), "cuCtxDestroy");
  if (wrong) {
    std::fprintf(stderr, "matrix_mul_drv: %ld of %zu results differ from the CPU\n", wrong, c.size());
    return 1;
  }
  std::printf("ok: the %dx%d product matches the CPU (largest error %.2e of the magnitude)\n", a_rows, b_cols, worst);
  return 0;
}
