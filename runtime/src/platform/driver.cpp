// Loading the CUDA driver (see driver.hpp for the policy).
#include "platform/driver.hpp"

#include "platform/load_once.hpp"
#include "platform/os.hpp"

#include "fatpack/core/target.hpp"

#include <mutex>

namespace fatpack::detail {

namespace {

struct name_entry {
  int code;
  const char* name;
};
// The codes the runtime reports most; the driver's own cuGetErrorName covers the rest when loaded.
constexpr name_entry k_names[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {200, "CUDA_ERROR_INVALID_IMAGE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {218, "CUDA_ERROR_INVALID_PTX"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"},
    {300, "CUDA_ERROR_INVALID_SOURCE"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

result<const driver*> do_load() {
  auto* d = new driver();  // never freed: see os::library
  d->path = driver_path();
  const bool overridden = os::getenv_path("FATPACK_LIBCUDA") && *os::getenv_path("FATPACK_LIBCUDA");
  std::string why;
  os::library lib = os::open_library(d->path, why);
  if (!lib.handle) {
    std::string msg = overridden ? "cannot load the CUDA driver FATPACK_LIBCUDA=" + d->path + ": " + why
                                 : "cannot load the CUDA driver " + d->path + ": " + why +
                                       " (is the NVIDIA driver installed? FATPACK_LIBCUDA=/path overrides the library)";
    delete d;
    return error{errc::no_driver, 0, std::move(msg), {}};
  }
  // The version first, through the plain export every driver has: an old driver is "too old", not
  // "missing an entry point" (cuGetProcAddress_v2 arrived with CUDA 12.0).
  {
    using version_fn = CUresult (*)(int*);
    auto ver = reinterpret_cast<version_fn>(os::find_symbol(lib, "cuDriverGetVersion"));
    int v = 0;
    if (ver && ver(&v) == CUDA_SUCCESS && v < min_driver_version) {
      std::string msg = d->path + " supports CUDA " + core::cuda_version_str(v) + "; fatpack needs a driver for CUDA " +
                        core::cuda_version_str(min_driver_version) + " or newer";
      delete d;
      return error{errc::driver_too_old, 0, std::move(msg), {}};
    }
  }
  d->get_proc = reinterpret_cast<driver::get_proc_fn>(os::find_symbol(lib, "cuGetProcAddress_v2"));
  if (!d->get_proc) {
    std::string msg = d->path + " is not a usable CUDA driver: entry point cuGetProcAddress_v2 not found";
    delete d;
    return error{errc::driver_symbol_missing, 0, std::move(msg), {}};
  }

  auto resolve = [&](const char* name, void** slot, int version = abi_version) -> status {
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
    *slot = nullptr;
    CUresult r = d->get_proc(name, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    if (r == CUDA_SUCCESS && *slot) return {};
    std::string why2 = q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "the driver's version is not sufficient"
                       : q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND     ? "symbol not found"
                                                                        : "cuGetProcAddress returned " + cuda_error_name(r);
    return error{errc::driver_symbol_missing, static_cast<int>(r),
                 d->path + ": driver entry point " + name + " not found (" + why2 + ")", {}};
  };

  // cuDriverGetVersion first, so that a too-old driver is reported as such rather than as a
  // missing entry point.
  if (auto s = resolve("cuDriverGetVersion", reinterpret_cast<void**>(&d->cuDriverGetVersion)); !s) {
    delete d;
    return s.error();
  }
  if (d->cuDriverGetVersion(&d->version) != CUDA_SUCCESS) d->version = 0;
  if (d->version < min_driver_version) {
    std::string msg = d->path + " supports CUDA " + core::cuda_version_str(d->version) +
                      "; fatpack needs a driver for CUDA " + core::cuda_version_str(min_driver_version) + " or newer";
    delete d;
    return error{errc::driver_too_old, 0, std::move(msg), {}};
  }
#define FATPACK_DRIVER_RESOLVE(name)                                                        \
  if (auto s = resolve(#name, reinterpret_cast<void**>(&d->name)); !s) {                   \
    delete d;                                                                               \
    return s.error();                                                                       \
  }
  FATPACK_DRIVER_FUNCTIONS(FATPACK_DRIVER_RESOLVE)
#undef FATPACK_DRIVER_RESOLVE
#define FATPACK_DRIVER_RESOLVE_OPTIONAL(name) (void)resolve(#name, reinterpret_cast<void**>(&d->name));
  FATPACK_DRIVER_OPTIONAL_FUNCTIONS(FATPACK_DRIVER_RESOLVE_OPTIONAL)
#undef FATPACK_DRIVER_RESOLVE_OPTIONAL
#define FATPACK_DRIVER_RESOLVE_12_4(name) (void)resolve(#name, reinterpret_cast<void**>(&d->name), 12040);
  FATPACK_DRIVER_OPTIONAL_FUNCTIONS_12_4(FATPACK_DRIVER_RESOLVE_12_4)
#undef FATPACK_DRIVER_RESOLVE_12_4

  CUresult r = d->cuInit(0);
  if (r != CUDA_SUCCESS) {
    errc code = r == CUDA_ERROR_NO_DEVICE ? errc::no_device
                : r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ? errc::driver_too_old
                                                      : errc::cuda;
    std::string msg = (code == errc::no_device ? "no CUDA device: " : "cannot initialise the CUDA driver: ") +
                      d->call_failed("cuInit", r) + " (driver " + d->identify() + ")";
    delete d;
    return error{code, static_cast<int>(r), std::move(msg), {}};
  }
  d->init_pid = os::process_id();
  return static_cast<const driver*>(d);
}

}  // namespace

status usable_in_this_process(const driver& d) {
  const int me = os::process_id();
  if (me == d.init_pid) return {};
  return error{errc::cuda, 0,
               "process " + std::to_string(me) + " is a fork() child of process " + std::to_string(d.init_pid) +
                   ", which initialised CUDA (" + d.identify() +
                   "); CUDA cannot be used in a child after the parent's cuInit: use fatpack in the parent, or "
                   "exec() a new program in the child",
               {}};
}

std::string driver_path() {
  const char* env = os::getenv_path("FATPACK_LIBCUDA");
  return env && *env ? std::string(env) : std::string("libcuda.so.1");
}

const result<const driver*>& load_driver() {
  // Leaked on purpose: static objects destroyed at exit (modules) may still call the driver. No lock
  // is held while it loads (platform/load_once.hpp): a library's constructor may be the first to ask.
  static std::atomic<const result<const driver*>*> loaded{nullptr};
  return load_once(loaded, do_load);
}

std::string cuda_error_name(int code) {
  for (const auto& e : k_names)
    if (e.code == code) return e.name;
  return "CUDA_ERROR_" + std::to_string(code);
}

std::string driver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) (void)cuGetErrorName(r, &name);
  if (cuGetErrorString) (void)cuGetErrorString(r, &text);
  std::string s = name ? std::string(name) : cuda_error_name(static_cast<int>(r));
  s += " (" + std::to_string(static_cast<int>(r)) + ")";
  if (text && *text) s += std::string(": ") + text;
  return s;
}

std::string driver::call_failed(const char* call, CUresult r) const { return std::string(call) + ": " + describe(r); }

std::string driver::identify() const { return path + " (CUDA " + core::cuda_version_str(version) + ")"; }

}  // namespace fatpack::detail
