// The CUDA driver, reached through dlopen + cuGetProcAddress (after jitify's LibCuda): no link-time
// dependency on libcuda, so a product starts on a machine without a driver and gets one clear error.
//
// Policy:
//  - The library is FATPACK_LIBCUDA when set (a bad override is an error, never a silent fall-back to
//    the system driver), else "libcuda.so.1".
//  - Only cuGetProcAddress_v2 is taken with dlsym; every other entry point comes from it with the ABI
//    of CUDA 12.0 (`abi_version`), whose signatures are the ones cuda.h 13.0 declares for the calls
//    used here. A missing entry point is an error that names it.
//  - fatpack needs a driver for CUDA 12.0 or newer (cuGetProcAddress_v2, cuLink*_v2).
//  - Loading happens once per process; the outcome (driver or error) is kept.
//
// Internal header: it includes cuda.h (types only; never link libcuda).
#pragma once

#include "fatpack/error.hpp"

#include <cuda.h>

#include <string>

namespace fatpack::detail {

// Every entry point the runtime calls. X(name): `name` is cuda.h's spelling (macros such as
// cuLinkCreate -> cuLinkCreate_v2 apply to the member), #name the base name cuGetProcAddress wants.
#define FATPACK_DRIVER_FUNCTIONS(X) \
  X(cuInit)                         \
  X(cuDriverGetVersion)             \
  X(cuGetErrorName)                 \
  X(cuGetErrorString)               \
  X(cuDeviceGetCount)               \
  X(cuDeviceGet)                    \
  X(cuDeviceGetAttribute)           \
  X(cuDeviceGetName)                \
  X(cuDeviceGetUuid)                \
  X(cuDevicePrimaryCtxRetain)       \
  X(cuDevicePrimaryCtxRelease)      \
  X(cuDevicePrimaryCtxGetState)     \
  X(cuCtxPushCurrent)               \
  X(cuCtxPopCurrent)                \
  X(cuCtxGetCurrent)                \
  X(cuCtxSetCurrent)                \
  X(cuCtxGetDevice)                 \
  X(cuModuleLoadDataEx)             \
  X(cuModuleUnload)                 \
  X(cuModuleGetFunction)            \
  X(cuModuleGetGlobal)              \
  X(cuMemcpyHtoD)                   \
  X(cuMemcpyDtoH)                   \
  X(cuLaunchKernel)                 \
  X(cuLinkCreate)                   \
  X(cuLinkAddData)                  \
  X(cuLinkComplete)                 \
  X(cuLinkDestroy)

// Entry points the runtime uses when the driver has them; a missing one stays nullptr and the
// caller falls back (see each use).
//   cuCtxGetId (CUDA 12.0): tells a context from a later one at the same address (load/module_table).
//   cuLibrary* / cuKernelGetFunction (CUDA 12.0): context-independent libraries (fatpack::library).
//   cuThreadExchangeStreamCaptureMode (CUDA 10.1): a piece loaded while a stream is captured
//   (load/pieces.hpp).
#define FATPACK_DRIVER_OPTIONAL_FUNCTIONS(X) \
  X(cuCtxGetId)                              \
  X(cuLibraryLoadData)                       \
  X(cuLibraryUnload)                         \
  X(cuLibraryGetKernel)                      \
  X(cuLibraryGetGlobal)                      \
  X(cuKernelGetFunction)                     \
  X(cuThreadExchangeStreamCaptureMode)

// Optional entry points that arrived after CUDA 12.0, asked for with the ABI of the release that
// introduced them (cuGetProcAddress refuses a symbol newer than the version asked for, with
// CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT); their signatures never changed.
//   cuFuncGetParamInfo / cuKernelGetParamInfo (CUDA 12.4): the kernel's parameters, which a typed
//   kernel's arguments are checked against (api/launch_api.cpp; without them, the package's PTX).
#define FATPACK_DRIVER_OPTIONAL_FUNCTIONS_12_4(X) \
  X(cuFuncGetParamInfo)                           \
  X(cuKernelGetParamInfo)

inline constexpr int abi_version = 12000;          // signatures requested from cuGetProcAddress
inline constexpr int min_driver_version = 12000;   // oldest driver fatpack accepts

struct driver {
  std::string path;   // what was dlopen-ed
  int version = 0;    // cuDriverGetVersion
  int init_pid = 0;   // the process that called cuInit (a fork() child has another pid)
  using get_proc_fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  get_proc_fn get_proc = nullptr;
#define FATPACK_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  FATPACK_DRIVER_FUNCTIONS(FATPACK_DRIVER_MEMBER)
  FATPACK_DRIVER_OPTIONAL_FUNCTIONS(FATPACK_DRIVER_MEMBER)
  FATPACK_DRIVER_OPTIONAL_FUNCTIONS_12_4(FATPACK_DRIVER_MEMBER)
#undef FATPACK_DRIVER_MEMBER

  // "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
  std::string describe(CUresult r) const;
  // "<call>: <describe(r)>"
  std::string call_failed(const char* call, CUresult r) const;
  // "libcuda.so.1 (CUDA 13.0)"
  std::string identify() const;
};

// Loads the driver once per process (thread-safe). The error is kept and returned again later.
const result<const driver*>& load_driver();

// A fork() child of the process that called cuInit cannot use CUDA (the driver's state belongs to
// the parent). An error naming both processes when this process is such a child; ok otherwise.
status usable_in_this_process(const driver& d);

// The library path load_driver() uses: $FATPACK_LIBCUDA or "libcuda.so.1".
std::string driver_path();

// Name of a CUresult without a driver ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"); "CUDA_ERROR_<n>" for
// codes not in the table.
std::string cuda_error_name(int code);

// An error caused by a CUresult.
inline error cuda_error(errc code, CUresult r, std::string message, std::string log = {}) {
  return error{code, static_cast<int>(r), std::move(message), std::move(log)};
}

// Pushes `ctx` on the calling thread for the scope (the caller's own current context is restored).
class scoped_context {
 public:
  scoped_context(const driver& d, CUcontext ctx) : d_(d) { ok_ = d_.cuCtxPushCurrent(ctx) == CUDA_SUCCESS; }
  ~scoped_context() {
    if (ok_) {
      CUcontext popped = nullptr;
      (void)d_.cuCtxPopCurrent(&popped);
    }
  }
  scoped_context(const scoped_context&) = delete;
  scoped_context& operator=(const scoped_context&) = delete;
  bool ok() const { return ok_; }

 private:
  const driver& d_;
  bool ok_ = false;
};

// The calling thread's stream-capture mode set to relaxed for the scope (cuThreadExchangeStreamCaptureMode),
// then restored. Loading a module or JIT-compiling enqueues nothing on any stream, but under the
// global or thread-local mode the driver counts such calls among those not safe while a stream is
// being captured into a graph: a kernel first asked for during the application's capture (a piece
// loaded then, load/pieces.hpp) must neither fail nor invalidate the capture. Without the entry
// point nothing changes.
class relaxed_capture {
 public:
  explicit relaxed_capture(const driver& d) : d_(d) {
    if (d_.cuThreadExchangeStreamCaptureMode) swapped_ = d_.cuThreadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~relaxed_capture() {
    if (swapped_) (void)d_.cuThreadExchangeStreamCaptureMode(&mode_);
  }
  relaxed_capture(const relaxed_capture&) = delete;
  relaxed_capture& operator=(const relaxed_capture&) = delete;

 private:
  const driver& d_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool swapped_ = false;
};

}  // namespace fatpack::detail
