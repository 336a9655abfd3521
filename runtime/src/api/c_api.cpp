// The C API (fatpack/fatpack.h) over the C++ API. Errors: the status code is returned, the message
// is kept per thread for fatpack_last_error(). Nothing here lets a C++ exception escape.
#include "fatpack/fatpack.h"

#include "fatpack/fatpack.hpp"
#include "api/c_status.hpp"

#include <cstddef>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

struct fatpack_module {
  fatpack::module m;
  std::string trace;
};

namespace {

thread_local std::string t_last_error;
thread_local int t_last_cuda_status = 0;

}  // namespace

// Every C function's error, the port functions' (port_api.cpp) and run-time compilation's
// (c_compile_api.cpp) too, goes to the same per-thread message.
void fatpack::detail::c_api::set_last_error(const fatpack::error* e) {
  if (e) {
    t_last_error = e->what();
    t_last_cuda_status = e->cuda_status;
  } else {
    t_last_error.clear();
    t_last_cuda_status = 0;
  }
}

namespace {

using fatpack::detail::c_api::fail;
using fatpack::detail::c_api::guarded;
using fatpack::detail::c_api::ok;

fatpack_status from(const fatpack::status& s) { return s ? ok() : fail(s.error()); }

// Versioned structs (fatpack.h): `first_version` is the size of the struct's first version (when
// fields are appended, it stays what it is now). Fills min(struct_size, sizeof(T)) bytes of `out`
// from `value` and leaves struct_size as the caller set it.
// check_size() first: whether out can take the struct at all.
template <class T>
bool check_size(const T* out, std::size_t first_version, const char* what, fatpack_status& st) {
  if (!out) {
    st = fail(fatpack::errc::invalid_argument, (std::string(what) + ": null pointer").c_str());
    return false;
  }
  if (out->struct_size < first_version) {
    st = fail(fatpack::errc::invalid_argument,
              (std::string(what) + ": struct_size is " + std::to_string(out->struct_size) + ", at least " +
               std::to_string(first_version) + " expected (initialize the struct with its *_INIT macro)")
                  .c_str());
    return false;
  }
  return true;
}
template <class T>
fatpack_status fill_versioned(T* out, const T& value) {
  const std::size_t size = out->struct_size;
  const std::size_t n = size < sizeof(T) ? size : sizeof(T);
  constexpr std::size_t skip = sizeof(out->struct_size);
  std::memcpy(reinterpret_cast<unsigned char*>(out) + skip, reinterpret_cast<const unsigned char*>(&value) + skip,
              n - skip);
  return ok();
}
// The first versions (this release's structs).
constexpr std::size_t k_device_info_v1 = sizeof(fatpack_device_info);
constexpr std::size_t k_cache_stats_v1 = sizeof(fatpack_cache_stats);
constexpr std::size_t k_variant_v1 = sizeof(fatpack_variant);
static_assert(offsetof(fatpack_device_info, struct_size) == 0 && offsetof(fatpack_cache_stats, struct_size) == 0 &&
                  offsetof(fatpack_variant, struct_size) == 0,
              "struct_size comes first");

}  // namespace

extern "C" {

int fatpack_version(void) { return fatpack::version(); }
const char* fatpack_version_string(void) { return fatpack::version_string(); }

const char* fatpack_status_name(fatpack_status s) {
  switch (s) {
    case FATPACK_OK: return "FATPACK_OK";
    case FATPACK_ERROR_NO_DRIVER: return "FATPACK_ERROR_NO_DRIVER";
    case FATPACK_ERROR_DRIVER_TOO_OLD: return "FATPACK_ERROR_DRIVER_TOO_OLD";
    case FATPACK_ERROR_DRIVER_SYMBOL_MISSING: return "FATPACK_ERROR_DRIVER_SYMBOL_MISSING";
    case FATPACK_ERROR_NO_DEVICE: return "FATPACK_ERROR_NO_DEVICE";
    case FATPACK_ERROR_INVALID_DEVICE: return "FATPACK_ERROR_INVALID_DEVICE";
    case FATPACK_ERROR_NO_PACKAGES: return "FATPACK_ERROR_NO_PACKAGES";
    case FATPACK_ERROR_NOT_FOUND: return "FATPACK_ERROR_NOT_FOUND";
    case FATPACK_ERROR_AMBIGUOUS: return "FATPACK_ERROR_AMBIGUOUS";
    case FATPACK_ERROR_NO_COMPATIBLE_ENTRY: return "FATPACK_ERROR_NO_COMPATIBLE_ENTRY";
    case FATPACK_ERROR_LOAD_FAILED: return "FATPACK_ERROR_LOAD_FAILED";
    case FATPACK_ERROR_JIT_FAILED: return "FATPACK_ERROR_JIT_FAILED";
    case FATPACK_ERROR_BAD_PACKAGE: return "FATPACK_ERROR_BAD_PACKAGE";
    case FATPACK_ERROR_IO: return "FATPACK_ERROR_IO";
    case FATPACK_ERROR_INVALID_ARGUMENT: return "FATPACK_ERROR_INVALID_ARGUMENT";
    case FATPACK_ERROR_CUDA: return "FATPACK_ERROR_CUDA";
  }
  return "FATPACK_ERROR_UNKNOWN";
}

const char* fatpack_last_error(void) { return t_last_error.c_str(); }
int fatpack_last_cuda_status(void) { return t_last_cuda_status; }

fatpack_status fatpack_init(void) {
  return guarded([] { return from(fatpack::init()); });
}

fatpack_status fatpack_driver_version(int* version) {
  return guarded([&] {
    if (!version) return fail(fatpack::errc::invalid_argument, "fatpack_driver_version: null pointer");
    auto v = fatpack::driver_version();
    if (!v) return fail(v.error());
    *version = *v;
    return ok();
  });
}

fatpack_status fatpack_device_count(int* count) {
  return guarded([&] {
    if (!count) return fail(fatpack::errc::invalid_argument, "fatpack_device_count: null pointer");
    auto v = fatpack::device_count();
    if (!v) return fail(v.error());
    *count = *v;
    return ok();
  });
}

fatpack_status fatpack_get_device_info(int ordinal, fatpack_device_info* info) {
  return guarded([&] {
    fatpack_status st = FATPACK_OK;
    if (!check_size(info, k_device_info_v1, "fatpack_get_device_info", st)) return st;
    auto d = fatpack::device(ordinal);
    if (!d) return fail(d.error());
    fatpack_device_info v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.ordinal = d->ordinal;
    v.cc_major = d->cc_major;
    v.cc_minor = d->cc_minor;
    v.integrated = d->integrated ? 1 : 0;
    v.driver_version = d->driver_version;
    std::strncpy(v.max_ptx_isa, d->max_ptx_isa.c_str(), sizeof v.max_ptx_isa - 1);
    std::strncpy(v.name, d->name.c_str(), sizeof v.name - 1);
    std::memcpy(v.uuid, d->uuid.data(), 16);
    return fill_versioned(info, v);
  });
}

fatpack_status fatpack_driver_entry_point(const char* symbol, int cuda_version, void** fn) {
  return guarded([&] {
    if (!fn) return fail(fatpack::errc::invalid_argument, "fatpack_driver_entry_point: null pointer");
    auto r = fatpack::driver_entry_point(symbol, cuda_version);
    if (!r) return fail(r.error());
    *fn = *r;
    return ok();
  });
}

fatpack_status fatpack_add_package_file(const char* path) {
  return guarded([&] {
    if (!path) return fail(fatpack::errc::invalid_argument, "fatpack_add_package_file: null path");
    return from(fatpack::add_package_file(path));
  });
}

fatpack_status fatpack_add_package_memory(const void* data, size_t size, int copy) {
  return guarded([&] {
    return from(fatpack::add_package_memory(data, size, "memory",
                                            copy ? fatpack::ownership::copy : fatpack::ownership::borrow));
  });
}

fatpack_status fatpack_add_image(const void* data, size_t size, const char* module_name, const char* package_name) {
  return guarded([&] {
    if (!module_name) return fail(fatpack::errc::invalid_argument, "fatpack_add_image: null module name");
    return from(fatpack::add_image(data, size, module_name, package_name ? package_name : ""));
  });
}

fatpack_status fatpack_set_policy(fatpack_policy policy) {
  return guarded([&] {
    switch (policy) {
      case FATPACK_POLICY_PREFER_SASS: fatpack::set_policy(fatpack::policy::prefer_sass); break;
      case FATPACK_POLICY_FORCE_PTX: fatpack::set_policy(fatpack::policy::force_ptx); break;
      case FATPACK_POLICY_SASS_ONLY: fatpack::set_policy(fatpack::policy::sass_only); break;
      default: return fail(fatpack::errc::invalid_argument, "fatpack_set_policy: unknown policy");
    }
    return ok();
  });
}

fatpack_status fatpack_set_background_upgrade(int on) {
  return guarded([&] {
    fatpack::set_background_upgrade(on != 0);
    return ok();
  });
}

fatpack_status fatpack_set_jit_pieces(int mode) {
  return guarded([&] {
    if (mode != FATPACK_JIT_PIECES_OFF && mode != FATPACK_JIT_PIECES_ON_DEMAND && mode != FATPACK_JIT_PIECES_BACKGROUND)
      return fail(fatpack::errc::invalid_argument, "fatpack_set_jit_pieces: not a fatpack_jit_pieces value");
    fatpack::set_jit_pieces(mode == FATPACK_JIT_PIECES_OFF         ? fatpack::jit_pieces::off
                            : mode == FATPACK_JIT_PIECES_ON_DEMAND ? fatpack::jit_pieces::on_demand
                                                                   : fatpack::jit_pieces::background);
    return ok();
  });
}

fatpack_status fatpack_load_module_with_policy(const char* module_name, const char* package, int device,
                                               fatpack_policy policy, fatpack_module** out) {
  return guarded([&] {
    if (!out) return fail(fatpack::errc::invalid_argument, "fatpack_load_module: null output pointer");
    *out = nullptr;
    if (!module_name) return fail(fatpack::errc::invalid_argument, "fatpack_load_module: null module name");
    fatpack::load_options o;
    o.device = device;
    if (package) o.package = package;
    switch (policy) {
      case FATPACK_POLICY_DEFAULT: break;
      case FATPACK_POLICY_PREFER_SASS: o.policy = fatpack::policy::prefer_sass; break;
      case FATPACK_POLICY_FORCE_PTX: o.policy = fatpack::policy::force_ptx; break;
      case FATPACK_POLICY_SASS_ONLY: o.policy = fatpack::policy::sass_only; break;
      default: return fail(fatpack::errc::invalid_argument, "fatpack_load_module: unknown policy");
    }
    auto m = fatpack::load_module(module_name, o);
    if (!m) return fail(m.error());
    auto* h = new fatpack_module{std::move(m.value()), {}};
    h->trace = h->m.report().trace();
    *out = h;
    return ok();
  });
}

fatpack_status fatpack_load_module(const char* module_name, const char* package, int device, fatpack_module** out) {
  return fatpack_load_module_with_policy(module_name, package, device, FATPACK_POLICY_DEFAULT, out);
}

void fatpack_module_release(fatpack_module* module) { delete module; }

fatpack_status fatpack_module_function(const fatpack_module* module, const char* kernel, struct CUfunc_st** out) {
  return guarded([&] {
    if (!module || !kernel || !out) return fail(fatpack::errc::invalid_argument, "fatpack_module_function: null argument");
    auto f = module->m.function(kernel);
    if (!f) return fail(f.error());
    *out = *f;
    return ok();
  });
}

struct CUmod_st* fatpack_module_handle(const fatpack_module* module) { return module ? module->m.handle() : nullptr; }
struct CUctx_st* fatpack_module_context(const fatpack_module* module) { return module ? module->m.context() : nullptr; }
fatpack_status fatpack_module_check(const fatpack_module* module) {
  return guarded([&] {
    if (!module) return fail(fatpack::errc::invalid_argument, "fatpack_module_check: null module");
    return from(module->m.check());
  });
}
int fatpack_module_device(const fatpack_module* module) { return module ? module->m.device() : -1; }
const char* fatpack_module_report(const fatpack_module* module) { return module ? module->trace.c_str() : ""; }
int fatpack_module_jit(const fatpack_module* module) { return module && module->m.report().jit ? 1 : 0; }

fatpack_status fatpack_module_variant(const fatpack_module* module, const char* kernel, fatpack_variant* out) {
  return guarded([&] {
    fatpack_status st = FATPACK_OK;
    if (!check_size(out, k_variant_v1, "fatpack_module_variant", st)) return st;
    if (!module) return fail(fatpack::errc::invalid_argument, "fatpack_module_variant: null module");
    fatpack::code_variant cv;
    if (kernel) {
      auto r = module->m.variant(kernel);
      if (!r) return fail(r.error());
      cv = std::move(r.value());
    } else {
      cv = module->m.variant();
    }
    fatpack_variant v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.kind = static_cast<int>(cv.kind);
    v.arch = cv.arch;
    v.device_arch = cv.device_arch;
    std::strncpy(v.target, cv.target.c_str(), sizeof v.target - 1);
    std::strncpy(v.ptx_isa, cv.ptx_isa.c_str(), sizeof v.ptx_isa - 1);
    return fill_versioned(out, v);
  });
}

const char* fatpack_variant_kind_name(int kind) {
  if (kind < FATPACK_VARIANT_NONE || kind > FATPACK_VARIANT_PTX_JIT) return "unknown";
  return fatpack::variant_kind_name(static_cast<fatpack::variant_kind>(kind));
}

fatpack_status fatpack_module_global(const fatpack_module* module, const char* name, unsigned long long* address,
                                     size_t* size) {
  return guarded([&] {
    if (!module || !name) return fail(fatpack::errc::invalid_argument, "fatpack_module_global: null argument");
    auto g = module->m.global(name);
    if (!g) return fail(g.error());
    if (address) *address = g->address;
    if (size) *size = g->size;
    return ok();
  });
}

fatpack_status fatpack_module_set_global(const fatpack_module* module, const char* name, const void* data, size_t size) {
  return guarded([&] {
    if (!module || !name) return fail(fatpack::errc::invalid_argument, "fatpack_module_set_global: null argument");
    return from(module->m.set_global_bytes(name, data, size));
  });
}

fatpack_status fatpack_module_get_global(const fatpack_module* module, const char* name, void* data, size_t size) {
  return guarded([&] {
    if (!module || !name) return fail(fatpack::errc::invalid_argument, "fatpack_module_get_global: null argument");
    return from(module->m.get_global_bytes(name, data, size));
  });
}

}  // extern "C"

namespace {
std::mutex g_warm_mu;
std::vector<fatpack::warm_handle> g_warms;
}  // namespace

extern "C" fatpack_status fatpack_warm_all(int device) {
  return guarded([&] {
    fatpack::warm_options o;
    o.device = device;
    auto h = fatpack::warm(o);
    std::lock_guard<std::mutex> lock(g_warm_mu);
    g_warms.push_back(std::move(h));
    return ok();
  });
}

extern "C" fatpack_status fatpack_warm_wait(void) {
  return guarded([&] {
    std::vector<fatpack::warm_handle> hs;
    {
      std::lock_guard<std::mutex> lock(g_warm_mu);
      hs.swap(g_warms);
    }
    fatpack::status first;
    for (auto& h : hs) {
      auto s = h.wait();
      if (!s && first.ok()) first = s;
    }
    return from(first);
  });
}

// ---- JIT cache ----------------------------------------------------------------------------------

extern "C" fatpack_status fatpack_get_cache_stats(fatpack_cache_stats* out) {
  return guarded([&] {
    fatpack_status st = FATPACK_OK;
    if (!check_size(out, k_cache_stats_v1, "fatpack_get_cache_stats", st)) return st;
    const fatpack::cache_statistics s = fatpack::cache_stats();
    const fatpack_cache_stats v{sizeof(fatpack_cache_stats), s.hits_exact, s.hits_other_driver, s.misses, s.jits,
                                s.jit_ms, s.refreshes, s.bytes_read, s.bytes_written, s.stores, s.evictions,
                                s.rejected, s.waited, s.lock_timeouts, s.io_errors};
    return fill_versioned(out, v);
  });
}

namespace {
// fatpack_cache_path()'s own storage (the mode's names are static strings), so that the path and
// the mode can be used together, e.g. in one printf.
thread_local std::string t_cache_path;
}  // namespace

extern "C" const char* fatpack_cache_path(void) {
  try {
    t_cache_path = fatpack::cache_status().path;
  } catch (...) {
    t_cache_path.clear();
  }
  return t_cache_path.c_str();
}

extern "C" fatpack_cache_mode_id fatpack_cache_get_mode(void) {
  try {
    return static_cast<fatpack_cache_mode_id>(fatpack::cache_status().mode);
  } catch (...) {
    return FATPACK_CACHE_MODE_MEMORY_ONLY;
  }
}

extern "C" const char* fatpack_cache_mode_name(int mode) {
  switch (mode) {
    case FATPACK_CACHE_MODE_READ_WRITE:
    case FATPACK_CACHE_MODE_READ_ONLY:
    case FATPACK_CACHE_MODE_MEMORY_ONLY:
    case FATPACK_CACHE_MODE_DISABLED: return fatpack::cache_mode_name(static_cast<fatpack::cache_mode>(mode));
  }
  return "unknown";
}

extern "C" const char* fatpack_cache_mode(void) { return fatpack_cache_mode_name(fatpack_cache_get_mode()); }

static_assert(static_cast<int>(fatpack::variant_kind::none) == FATPACK_VARIANT_NONE &&
                  static_cast<int>(fatpack::variant_kind::exact_sass) == FATPACK_VARIANT_EXACT_SASS &&
                  static_cast<int>(fatpack::variant_kind::lower_minor_sass) == FATPACK_VARIANT_LOWER_MINOR_SASS &&
                  static_cast<int>(fatpack::variant_kind::arch_specific_sass) == FATPACK_VARIANT_ARCH_SPECIFIC_SASS &&
                  static_cast<int>(fatpack::variant_kind::family_sass) == FATPACK_VARIANT_FAMILY_SASS &&
                  static_cast<int>(fatpack::variant_kind::ptx_jit) == FATPACK_VARIANT_PTX_JIT,
              "fatpack_variant_kind and fatpack::variant_kind have the same numbers");

static_assert(static_cast<int>(fatpack::cache_mode::read_write) == FATPACK_CACHE_MODE_READ_WRITE &&
                  static_cast<int>(fatpack::cache_mode::read_only) == FATPACK_CACHE_MODE_READ_ONLY &&
                  static_cast<int>(fatpack::cache_mode::memory_only) == FATPACK_CACHE_MODE_MEMORY_ONLY &&
                  static_cast<int>(fatpack::cache_mode::disabled) == FATPACK_CACHE_MODE_DISABLED,
              "fatpack_cache_mode_id and fatpack::cache_mode have the same numbers");

extern "C" fatpack_status fatpack_add_prebuilt_cache(const char* directory) {
  if (!directory) return fail(fatpack::errc::invalid_argument, "fatpack_add_prebuilt_cache: directory is NULL");
  return guarded([&] { return from(fatpack::add_prebuilt_cache(directory)); });
}

extern "C" fatpack_status fatpack_set_cache_remote(const char* url, int read_write, const char* key_file,
                                                   int trust_all_writers) {
  return guarded([&] {
    fatpack::remote_cache_options o;
    o.url = url ? url : "";
    o.read_write = read_write != 0;
    o.key_file = key_file ? key_file : "";
    o.trust_all_writers = trust_all_writers != 0;
    return from(fatpack::set_cache_remote(o));
  });
}

extern "C" fatpack_status fatpack_cache_wait_refresh(void) {
  return guarded([&] {
    fatpack::wait_cache_refresh();
    return ok();
  });
}
