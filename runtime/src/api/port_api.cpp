// One-line ports for driver-API code (fatpack.h, "Ports"): functions with the shape of
// cuModuleLoadData / cuModuleLoadDataEx / cuModuleUnload that take the same image bytes (cubin, PTX,
// nvcc fatbin) and return a CUmodule in the calling thread's current context, through fatpack's
// selection, JIT and cache.
//
// Policy:
//  - The image's size comes from its own header (core::image_extent), read no further than
//    k_image_limit bytes.
//  - The image is copied once per distinct image (XXH3 and size) into a one-module package the
//    registry owns for the life of the process (add_image): the caller's bytes may go as soon as the
//    call returns. A second load of the same bytes in the same context shares the first one's module.
//  - Each successful call holds one fatpack::module; fatpackModuleUnload drops one. The module is
//    unloaded when the last one goes (never when its context was destroyed: then it went with it).
//  - Errors: a CUresult (the driver's own when it refused the image; CUDA_ERROR_INVALID_IMAGE for an
//    image fatpack cannot read, CUDA_ERROR_NO_BINARY_FOR_GPU when no entry fits the device), the
//    message in fatpack_last_error() and, when the caller passed CU_JIT_ERROR_LOG_BUFFER, there too.
#include "fatpack/fatpack.h"
#include "fatpack/fatpack.hpp"

#include "platform/driver.hpp"
#include "registry/registry.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/input.hpp"

#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

void fatpack_c_set_last_error(const fatpack::error* e);  // c_api.cpp

namespace {

constexpr std::size_t k_image_limit = std::size_t(1) << 30;  // 1 GiB

struct port_state {
  std::mutex mu;
  std::set<std::string> registered;                          // image package names
  std::map<CUmodule, std::vector<fatpack::module>> handles;  // one per successful load call
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

// Writes the message to the caller's CU_JIT_ERROR_LOG_BUFFER, if it gave one.
void to_error_log(const std::string& text, unsigned n, const CUjit_option* keys, void* const* values) {
  if (!keys || !values) return;
  char* buf = nullptr;
  std::size_t size = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (keys[i] == CU_JIT_ERROR_LOG_BUFFER) buf = static_cast<char*>(values[i]);
    if (keys[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = reinterpret_cast<std::uintptr_t>(values[i]);
  }
  if (!buf || size == 0) return;
  const std::size_t len = std::min(size - 1, text.size());
  std::memcpy(buf, text.data(), len);
  buf[len] = 0;
}

int port_load(CUmod_st** out, const void* image, unsigned n, const CUjit_option* keys, void* const* values,
              const char* call) {
  auto fail = [&](const fatpack::error& e) {
    fatpack_c_set_last_error(&e);
    to_error_log(e.message + (e.log.empty() ? "" : "\n" + e.log), n, keys, values);
    return cuda_result_of(e);
  };
  try {
    if (!out || !image)
      return fail(fatpack::error{fatpack::errc::invalid_argument, CUDA_ERROR_INVALID_VALUE,
                                 std::string(call) + ": null " + (out ? "image" : "module pointer"), {}});
    *out = nullptr;
    auto size = fatpack::core::image_extent(image, k_image_limit);
    if (!size) {
      fatpack::error e = size.error();
      e.cuda_status = CUDA_ERROR_INVALID_IMAGE;
      e.message = std::string(call) + ": the image is not one fatpack can read: " + e.message;
      return fail(e);
    }
    const fatpack::core::byte_span bytes(static_cast<const std::uint8_t*>(image), *size);
    const std::uint64_t h = fatpack::core::xxh3(bytes);
    const std::string name = "image-" + fatpack::core::hex_bytes(reinterpret_cast<const std::uint8_t*>(&h), sizeof h) +
                             "-" + std::to_string(*size);
    auto& st = state();
    {
      std::lock_guard<std::mutex> lock(st.mu);
      if (!st.registered.count(name)) {
        if (auto s = fatpack::detail::registry::instance().add_image(image, *size, name, name); !s) {
          fatpack::error e = s.error();
          if (!e.cuda_status) e.cuda_status = CUDA_ERROR_INVALID_IMAGE;
          e.message = std::string(call) + ": " + e.message;
          return fail(e);
        }
        st.registered.insert(name);
      }
    }
    fatpack::load_options o;
    o.package = name;
    auto m = fatpack::load_module(name, o);
    if (!m) {
      fatpack::error e = m.error();
      e.message = std::string(call) + ": " + e.message;
      return fail(e);
    }
    CUmodule mod = m->handle();
    {
      std::lock_guard<std::mutex> lock(st.mu);
      st.handles[mod].push_back(std::move(m.value()));
    }
    *out = mod;
    fatpack_c_set_last_error(nullptr);
    return CUDA_SUCCESS;
  } catch (const std::exception& ex) {
    return fail(fatpack::error{fatpack::errc::cuda, CUDA_ERROR_OUT_OF_MEMORY, std::string(call) + ": " + ex.what(), {}});
  } catch (...) {
    return fail(fatpack::error{fatpack::errc::cuda, CUDA_ERROR_UNKNOWN, std::string(call) + ": unknown exception", {}});
  }
}

}  // namespace

extern "C" {

int fatpack_cu_module_load_data(struct CUmod_st** module, const void* image) {
  return port_load(module, image, 0, nullptr, nullptr, "fatpackModuleLoadData");
}

int fatpack_cu_module_load_data_ex(struct CUmod_st** module, const void* image, unsigned int num_options,
                                   void* options, void** option_values) {
  return port_load(module, image, num_options, static_cast<const CUjit_option*>(options), option_values,
                   "fatpackModuleLoadDataEx");
}

int fatpack_cu_module_unload(struct CUmod_st* module) {
  std::vector<fatpack::module> drop;  // released outside the lock
  auto& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.handles.find(module);
    if (it == st.handles.end() || it->second.empty()) {
      fatpack::error e{fatpack::errc::invalid_argument, CUDA_ERROR_INVALID_HANDLE,
                       "fatpackModuleUnload: not a module fatpackModuleLoadData returned (or unloaded already)", {}};
      fatpack_c_set_last_error(&e);
      return CUDA_ERROR_INVALID_HANDLE;
    }
    drop.push_back(std::move(it->second.back()));
    it->second.pop_back();
    if (it->second.empty()) st.handles.erase(it);
  }
  fatpack_c_set_last_error(nullptr);
  return CUDA_SUCCESS;
}

}  // extern "C"
