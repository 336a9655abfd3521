// fakecuda_old: a "driver" from before CUDA 12.0 (no cuGetProcAddress_v2), for the old-driver test.
// FAKECUDA_DRIVER_VERSION sets what cuDriverGetVersion reports (default 11040 = CUDA 11.4).
#include <cstdlib>

extern "C" {

__attribute__((visibility("default"))) int cuDriverGetVersion(int* v) {
  const char* e = std::getenv("FAKECUDA_DRIVER_VERSION");
  *v = e && *e ? std::atoi(e) : 11040;
  return 0;
}

// The v1 signature (CUDA 11.3-11.8): no symbol-status argument.
__attribute__((visibility("default"))) int cuGetProcAddress(const char*, void** pfn, int, unsigned long long) {
  *pfn = nullptr;
  return 500;  // CUDA_ERROR_NOT_FOUND
}

}  // extern "C"
