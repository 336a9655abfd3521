// One-line ports for driver-API code (fatpack.h, "Ports"): functions with the shape of
// cuModuleLoadData / cuModuleLoadDataEx / cuModuleUnload and cuLibraryLoadData / cuLibraryUnload that
// take the same image bytes (cubin, PTX, nvcc fatbin) and return a CUmodule in the calling thread's
// current context, or a context-independent CUlibrary, through fatpack's selection, JIT and cache.
//
// Policy:
//  - The image's size comes from its own header (core::image_extent), read no further than
//    k_image_limit bytes.
//  - The image is copied once per distinct image into a one-module package the registry owns for
//    the life of the process (add_image), and once more to tell images apart (registry/image_names.hpp:
//    an XXH3 match counts only when the bytes are equal): the caller's bytes may go as soon as the
//    call returns. A second load of the same bytes in the same context (a library: for the same
//    device) shares the first one's module or library.
//  - Each successful call holds one fatpack::module (fatpack::library); fatpackModuleUnload
//    (fatpackLibraryUnload) drops one. The module is unloaded when the last one goes (never when its
//    context was destroyed: then it went with it); the library likewise (cuLibraryUnload).
//  - Options: the JIT options are checked (a key the driver does not define, or a count with no
//    arrays, is CUDA_ERROR_INVALID_VALUE) and ignored, fatpack choosing the JIT's options from the
//    entry, except CU_JIT_ERROR_LOG_BUFFER(_SIZE_BYTES), which receives the message of a failure.
//    Library options: CU_LIBRARY_BINARY_IS_PRESERVED is a memory hint with nothing to do (fatpack
//    hands the driver its own copy); CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE (cudart's own
//    registration tables, which describe the caller's image, not the entry fatpack picks) is refused
//    with CUDA_ERROR_NOT_SUPPORTED.
//  - Errors: a CUresult (the driver's own when it refused the image; CUDA_ERROR_INVALID_IMAGE for an
//    image fatpack cannot read, CUDA_ERROR_NO_BINARY_FOR_GPU when no entry fits the device), the
//    message in fatpack_last_error(), in the log at level error, and, when the caller passed
//    CU_JIT_ERROR_LOG_BUFFER, there too.
#include "fatpack/fatpack.h"
#include "fatpack/fatpack.hpp"
#include "api/c_status.hpp"

#include "platform/driver.hpp"
#include "platform/log.hpp"
#include "registry/image_names.hpp"
#include "registry/registry.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/input.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr std::size_t k_image_limit = std::size_t(1) << 30;  // 1 GiB

// What one successful load call holds, per handle it returned: the handle stays loaded while its
// vector is not empty.
template <class Handle, class Owner>
using holders = std::map<Handle, std::vector<Owner>>;

struct port_state {
  std::mutex mu;
  fatpack::detail::image_names images;  // the name of each distinct image registered
  holders<CUmodule, fatpack::module> modules;
  holders<CUlibrary, fatpack::library> libraries;
};

port_state& state() {
  static port_state* s = new port_state();  // leaked: handles may be dropped from static destructors
  return *s;
}

int cuda_result_of(const fatpack::error& e) {
  if (e.cuda_status) return e.cuda_status;
  switch (e.code) {
    case fatpack::errc::no_driver:
    case fatpack::errc::driver_too_old: return CUDA_ERROR_NOT_INITIALIZED;
    case fatpack::errc::no_device: return CUDA_ERROR_NO_DEVICE;
    case fatpack::errc::invalid_argument: return CUDA_ERROR_INVALID_VALUE;
    case fatpack::errc::no_compatible_entry: return CUDA_ERROR_NO_BINARY_FOR_GPU;
    case fatpack::errc::jit_failed: return CUDA_ERROR_INVALID_PTX;
    case fatpack::errc::bad_package: return CUDA_ERROR_INVALID_IMAGE;
    case fatpack::errc::driver_symbol_missing: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_UNKNOWN;
  }
}

// The caller's JIT options, as the driver's load calls take them.
struct jit_options {
  unsigned count = 0;
  const CUjit_option* keys = nullptr;
  void* const* values = nullptr;
};

// Writes the message to the caller's CU_JIT_ERROR_LOG_BUFFER, if it gave one (options already checked).
void to_error_log(const std::string& text, const jit_options& o) {
  if (!o.keys || !o.values) return;
  char* buf = nullptr;
  std::size_t size = 0;
  for (unsigned i = 0; i < o.count; ++i) {
    if (o.keys[i] == CU_JIT_ERROR_LOG_BUFFER) buf = static_cast<char*>(o.values[i]);
    if (o.keys[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = reinterpret_cast<std::uintptr_t>(o.values[i]);
  }
  if (!buf || size == 0) return;
  const std::size_t len = std::min(size - 1, text.size());
  std::memcpy(buf, text.data(), len);
  buf[len] = 0;
}

fatpack::error invalid_value(const std::string& message) {
  return fatpack::error{fatpack::errc::invalid_argument, CUDA_ERROR_INVALID_VALUE, message, {}};
}

// What the driver checks of option arrays: a count needs both arrays, and every key is one it defines.
fatpack::status check_jit_options(const jit_options& o, const char* call) {
  if (o.count == 0) return {};
  if (!o.keys || !o.values)
    return invalid_value(std::string(call) + ": " + std::to_string(o.count) + " JIT options but no option array");
  for (unsigned i = 0; i < o.count; ++i)
    if (static_cast<unsigned>(o.keys[i]) >= static_cast<unsigned>(CU_JIT_NUM_OPTIONS))
      return invalid_value(std::string(call) + ": JIT option " + std::to_string(i) + " is " +
                           std::to_string(static_cast<unsigned>(o.keys[i])) + ", not a CUjit_option");
  return {};
}

fatpack::status check_library_options(unsigned n, const CUlibraryOption* keys, void* const* values, const char* call) {
  if (n == 0) return {};
  if (!keys || !values)
    return invalid_value(std::string(call) + ": " + std::to_string(n) + " library options but no option array");
  for (unsigned i = 0; i < n; ++i) {
    if (keys[i] == CU_LIBRARY_BINARY_IS_PRESERVED) continue;  // a hint: fatpack gives the driver its own copy
    if (keys[i] == CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE)
      return fatpack::error{fatpack::errc::invalid_argument, CUDA_ERROR_NOT_SUPPORTED,
                            std::string(call) +
                                ": CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE is not supported (the tables "
                                "describe the caller's image; fatpack loads the entry it selects from it)",
                            {}};
    return invalid_value(std::string(call) + ": library option " + std::to_string(i) + " is " +
                         std::to_string(static_cast<unsigned>(keys[i])) + ", not a CUlibraryOption");
  }
  return {};
}

// Registers the image (once per distinct image) as a one-module package; returns its name, which is
// also the module's.
fatpack::result<std::string> register_image(const void* image, const char* call) {
  auto size = fatpack::core::image_extent(image, k_image_limit);
  if (!size) {
    fatpack::error e = size.error();
    e.cuda_status = CUDA_ERROR_INVALID_IMAGE;
    e.message = std::string(call) + ": the image is not one fatpack can read: " + e.message;
    return e;
  }
  const fatpack::core::byte_span bytes(static_cast<const std::uint8_t*>(image), *size);
  const std::uint64_t h = fatpack::core::xxh3(bytes);
  auto& st = state();
  fatpack::detail::log_deferral defer;  // the registry logs; the lines go out after st.mu is released
  std::lock_guard<std::mutex> lock(st.mu);
  auto named = st.images.name_of(bytes.data, bytes.size, h);
  if (named.is_new) {
    if (auto s = fatpack::detail::registry::instance().add_image(image, *size, named.name, named.name); !s) {
      fatpack::error e = s.error();
      if (!e.cuda_status) e.cuda_status = CUDA_ERROR_INVALID_IMAGE;
      e.message = std::string(call) + ": " + e.message;
      return e;
    }
    st.images.keep(bytes.data, bytes.size, h);
  }
  return named.name;
}

// The common part of every load port: checks, registers the image, loads it with `load` (the image's
// name -> result<Owner>), keeps the owner in `table` and returns its handle in *out.
template <class Handle, class Owner, class Load>
int port_load(Handle* out, const void* image, const jit_options& jit, const fatpack::status& options_ok,
              const char* call, holders<Handle, Owner> port_state::*table, Load load) {
  auto fail = [&](const fatpack::error& e) noexcept {
    try {
      fatpack::detail::c_api::set_last_error(&e);
      // A ported program sees only the CUresult; the log makes the reason visible without changing its
      // code (by default the process's first failure, one line; FATPACK_LOG=error or more: every one).
      fatpack::detail::log_line(fatpack::log_level::error, e.message);
      if (check_jit_options(jit, call)) to_error_log(e.message + (e.log.empty() ? "" : "\n" + e.log), jit);
    } catch (...) {
      // A log callback that throws, or no memory for the message: the CUresult still goes back, and
      // no exception crosses the C API.
    }
    return cuda_result_of(e);
  };
  try {
    if (out) *out = nullptr;
    if (!out || !image) return fail(invalid_value(std::string(call) + ": null " + (out ? "image" : "handle pointer")));
    if (!options_ok) return fail(options_ok.error());
    auto name = register_image(image, call);
    if (!name) return fail(name.error());
    fatpack::load_options o;
    o.package = *name;
    fatpack::result<Owner> loaded = load(*name, o);
    if (!loaded) {
      fatpack::error e = loaded.error();
      e.message = std::string(call) + ": " + e.message;
      return fail(e);
    }
    Handle h = loaded->handle();
    {
      auto& st = state();
      std::lock_guard<std::mutex> lock(st.mu);
      (st.*table)[h].push_back(std::move(loaded.value()));
    }
    *out = h;
    fatpack::detail::c_api::set_last_error(nullptr);
    return CUDA_SUCCESS;
  } catch (const std::exception& ex) {
    return fail(fatpack::error{fatpack::errc::cuda, CUDA_ERROR_OUT_OF_MEMORY, std::string(call) + ": " + ex.what(), {}});
  } catch (...) {
    return fail(fatpack::error{fatpack::errc::cuda, CUDA_ERROR_UNKNOWN, std::string(call) + ": unknown exception", {}});
  }
}

// Drops what one load call of `handle` holds; the last one unloads it.
template <class Handle, class Owner>
int port_unload(Handle handle, holders<Handle, Owner> port_state::*table, const char* call, const char* load_call) {
  std::vector<Owner> drop;  // released outside the lock
  auto& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto& held = st.*table;
    auto it = held.find(handle);
    if (it == held.end() || it->second.empty()) {
      fatpack::error e{fatpack::errc::invalid_argument, CUDA_ERROR_INVALID_HANDLE,
                       std::string(call) + ": not a handle " + load_call + " returned (or unloaded already)", {}};
      fatpack::detail::c_api::set_last_error(&e);
      return CUDA_ERROR_INVALID_HANDLE;
    }
    drop.push_back(std::move(it->second.back()));
    it->second.pop_back();
    if (it->second.empty()) held.erase(it);
  }
  fatpack::detail::c_api::set_last_error(nullptr);
  return CUDA_SUCCESS;
}

fatpack::result<fatpack::module> load_as_module(const std::string& name, const fatpack::load_options& o) {
  // The port hands out a CUmodule: one module, never pieces.
  fatpack::load_options whole = o;
  whole.pieces = fatpack::jit_pieces::off;
  return fatpack::load_module(name, whole);
}

fatpack::result<fatpack::library> load_as_library(const std::string& name, const fatpack::load_options& o) {
  return fatpack::load_library(name, o);  // device -1: the current context's device, else 0
}

}  // namespace

extern "C" {

int fatpack_cu_module_load_data(struct CUmod_st** module, const void* image) {
  return port_load(module, image, jit_options{}, fatpack::status{}, "fatpackModuleLoadData", &port_state::modules,
                   load_as_module);
}

int fatpack_cu_module_load_data_ex(struct CUmod_st** module, const void* image, unsigned int num_options,
                                   void* options, void** option_values) {
  const jit_options jit{num_options, static_cast<const CUjit_option*>(options), option_values};
  const char* call = "fatpackModuleLoadDataEx";
  return port_load(module, image, jit, check_jit_options(jit, call), call, &port_state::modules, load_as_module);
}

int fatpack_cu_module_unload(struct CUmod_st* module) {
  return port_unload(module, &port_state::modules, "fatpackModuleUnload", "fatpackModuleLoadData");
}

int fatpack_cu_library_load_data(struct CUlib_st** library, const void* code, void* jit_options_array,
                                 void** jit_option_values, unsigned int num_jit_options, void* library_options,
                                 void** library_option_values, unsigned int num_library_options) {
  const jit_options jit{num_jit_options, static_cast<const CUjit_option*>(jit_options_array), jit_option_values};
  const char* call = "fatpackLibraryLoadData";
  fatpack::status ok = check_jit_options(jit, call);
  if (ok)
    ok = check_library_options(num_library_options, static_cast<const CUlibraryOption*>(library_options),
                               library_option_values, call);
  return port_load(library, code, jit, ok, call, &port_state::libraries, load_as_library);
}

int fatpack_cu_library_unload(struct CUlib_st* library) {
  return port_unload(library, &port_state::libraries, "fatpackLibraryUnload", "fatpackLibraryLoadData");
}

}  // extern "C"
