// What the C++ samples share: their command line, how they report a load and fail, and the few CUDA
// driver calls they make (memory; kernels are launched through fatpack's typed launch,
// module::kernel<Args...>). The samples do not link libcuda: they take the driver's entry points
// through fatpack (fatpack::driver_entry_point), so they start on a machine without a driver and say
// what is missing, like a product would.
//
// Command line (every sample):
//   --load-only          stop after loading the kernels and printing the load report. Used with the
//                        fake driver of the tests (tests/fakecuda), whose kernels cannot run.
//   --skip-without-gpu   exit 77 (CTest's "skipped") instead of 1 when there is no driver or no GPU.
// Exit status: 0 results match the CPU, 1 failure (no driver: the message names the driver library),
// 77 skipped.
#pragma once

#include <cuda.h>
#include <fatpack/fatpack.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace sample {

struct options {
  const char* program = "sample";
  bool load_only = false;
  bool skip_without_gpu = false;
};

inline bool parse(int argc, char** argv, options& o) {
  if (argc > 0) {
    const char* slash = std::strrchr(argv[0], '/');
    o.program = slash ? slash + 1 : argv[0];
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--load-only") == 0) {
      o.load_only = true;
    } else if (std::strcmp(argv[i], "--skip-without-gpu") == 0) {
      o.skip_without_gpu = true;
    } else {
      std::fprintf(stderr, "usage: %s [--load-only] [--skip-without-gpu]\n", o.program);
      return false;
    }
  }
  return true;
}

// Prints the error; 77 when the caller asked to skip and the machine has no driver or GPU, else 1.
inline int fail(const options& o, const fatpack::error& e) {
  std::fprintf(stderr, "%s: %s\n", o.program, e.what());
  const bool no_gpu = e.code == fatpack::errc::no_driver || e.code == fatpack::errc::no_device;
  if (no_gpu)
    std::fprintf(stderr, "%s: this sample needs an NVIDIA GPU and its driver (%s)%s\n", o.program,
                 fatpack::driver_library().c_str(), o.skip_without_gpu ? "; skipped" : "");
  return no_gpu && o.skip_without_gpu ? 77 : 1;
}

inline int fail(const options& o, const char* what) {
  std::fprintf(stderr, "%s: %s\n", o.program, what);
  return 1;
}

// Which entry runs and why (the report's short form; FATPACK_LOG=info prints the full trace).
inline void print_report(const fatpack::load_report& r) {
  std::printf("module '%s' (package '%s') on device %d (%s, CC %u.%u), driver CUDA %d.%d:\n", r.module.c_str(),
              r.package.c_str(), r.device, r.device_name.c_str(), r.arch / 10, r.arch % 10, r.driver_version / 1000,
              (r.driver_version % 1000) / 10);
  std::printf("  runs entry %zu %s (%s)\n", r.entry, r.target.c_str(),
              !r.jit ? "SASS" : r.jit_reused ? "JIT from PTX, SASS reused" : "JIT from PTX");
  std::printf("  why: %s\n", r.reason.c_str());
  std::printf("  took %.3f ms (select %.3f, context %.3f, decompress %.3f, jit %.3f, load %.3f)\n", r.total_ms,
              r.select_ms, r.context_ms, r.decompress_ms, r.jit_ms, r.load_ms);
}

// The driver calls the samples make, through the driver fatpack loaded.
struct driver {
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;

  // "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY" into `message`; true when ok.
  bool check(CUresult r, const char* call, std::string& message) const {
    if (r == CUDA_SUCCESS) return true;
    const char* name = nullptr;
    if (get_error_name) get_error_name(r, &name);
    message = std::string(call) + " failed: " + (name ? name : std::to_string(int(r)));
    return false;
  }
};

template <class F>
fatpack::status entry_point(F& out, const char* symbol) {
  auto p = fatpack::driver_entry_point(symbol);
  if (!p) return p.error();
  out = reinterpret_cast<F>(p.value());
  return {};
}

// cuGetProcAddress takes the base names ("cuMemAlloc"); driver_entry_point's default ABI (cuda.h
// 13.0's, or an older driver's own) gives the _v2 variants that cuda.h's macros name.
inline fatpack::result<driver> load_driver() {
  driver d;
  for (auto s : {entry_point(d.ctx_set_current, "cuCtxSetCurrent"), entry_point(d.ctx_synchronize, "cuCtxSynchronize"),
                 entry_point(d.mem_alloc, "cuMemAlloc"), entry_point(d.mem_free, "cuMemFree"),
                 entry_point(d.memcpy_htod, "cuMemcpyHtoD"), entry_point(d.memcpy_dtoh, "cuMemcpyDtoH"),
                 entry_point(d.get_error_name, "cuGetErrorName")})
    if (!s) return s.error();
  return d;
}

// The driver calls, with the module's context (its device's primary context) made current, so that
// memory allocated next is usable by the module's kernels.
inline fatpack::result<driver> driver_for(const fatpack::module& m) {
  auto d = load_driver();
  if (!d) return d.error();
  std::string message;
  if (!d->check(d->ctx_set_current(m.context()), "cuCtxSetCurrent", message))
    return fatpack::error{fatpack::errc::cuda, 0, message, {}};
  return d;
}

// Device memory that frees itself.
class device_buffer {
 public:
  device_buffer(const driver& d, std::size_t bytes, std::string& message) : d_(d) {
    if (!d_.check(d_.mem_alloc(&ptr_, bytes), "cuMemAlloc", message)) ptr_ = 0;
  }
  ~device_buffer() {
    if (ptr_) d_.mem_free(ptr_);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  explicit operator bool() const { return ptr_ != 0; }
  CUdeviceptr get() const { return ptr_; }
  // The memory as a kernel argument: buffer.as<const float>() is a const float*.
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_));
  }

 private:
  const driver& d_;
  CUdeviceptr ptr_ = 0;
};

}  // namespace sample
