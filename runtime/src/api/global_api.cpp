// __constant__ / __device__ variables of loaded code (loaded_code::global, set/get_global): the
// address and size from the driver, host bytes copied in the code's context after a size check.
#include "api/code_context.hpp"

#include "fatpack/core/hex.hpp"
#include "fatpack/fatpack.hpp"

#include <cctype>
#include <string>

namespace fatpack {

namespace {

// The caller's name as a message shows it: control bytes escaped, at most 200 bytes.
std::string global_where(const detail::module_state& s, const std::string& name) {
  return "global '" + core::printable_text(name, 200) + "' of " + detail::code_where(s);
}

// For a name not found: a C++ name inside namespaces ("ns::c_scale", each part an identifier) is not
// the variable's symbol, which is mangled ("_ZN2ns7c_scaleE"); kernels are found by their C++ names,
// so a user may well try the same for a variable. The hint names the symbol; "" for other names.
std::string scoped_name_hint(const std::string& name) {
  if (name.find("::") == std::string::npos || name.size() > 1024) return {};
  std::string mangled = "_ZN";
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = name.find("::", start);
    const std::string part = name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || std::isdigit(static_cast<unsigned char>(part[0]))) return {};
    for (const char c : part)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return {};
    mangled += std::to_string(part.size()) + part;
    if (end == std::string::npos) break;
    start = end + 2;
  }
  return " (a variable inside a namespace is found by its mangled symbol, here \"" + mangled + "E\")";
}

// The variable's address and size, looked up in `ctx` (current during the call).
result<global_info> find_global(const detail::module_state& s, const std::string& name, CUcontext ctx) {
  const detail::driver& d = *s.drv;
  // The driver takes a C string: "a\0b" would be read as "a", another variable than the one asked for.
  if (name.find('\0') != std::string::npos)
    return error{errc::invalid_argument, 0, global_where(s, name) + ": the name holds a NUL byte", {}};
  if (s.lib && !d.cuLibraryGetGlobal)
    return error{errc::driver_symbol_missing, 0,
                 global_where(s, name) + ": the driver has no cuLibraryGetGlobal (CUDA 12.0); load the module with "
                                         "load_module to reach its globals",
                 {}};
  detail::scoped_context current(d, ctx);
  if (!current.ok())
    return detail::cuda_error(errc::cuda, CUDA_ERROR_INVALID_CONTEXT,
                              global_where(s, name) + ": its context could not be made current");
  CUdeviceptr ptr = 0;
  std::size_t size = 0;
  CUmodule mod = s.mod;
  if (s.pieces) {
    // Kernel-granular JIT: the piece that defines the variable (each is in exactly one).
    const std::uint32_t piece = s.pieces->find(name);
    if (piece != detail::piece_set::none) {
      auto m = detail::load_piece(*s.pieces, piece, ctx);
      if (!m) return std::move(m).error();
      mod = *m;
    }
  }
  CUresult r = s.lib ? d.cuLibraryGetGlobal(&ptr, &size, s.lib, name.c_str())
                     : mod ? d.cuModuleGetGlobal(&ptr, &size, mod, name.c_str())
                           : CUDA_ERROR_NOT_FOUND;
  if (r != CUDA_SUCCESS)
    return detail::cuda_error(r == CUDA_ERROR_NOT_FOUND ? errc::not_found : errc::cuda, r,
                              global_where(s, name) + ": " +
                                  d.call_failed(s.lib ? "cuLibraryGetGlobal" : "cuModuleGetGlobal", r) +
                                  (r == CUDA_ERROR_NOT_FOUND ? scoped_name_hint(name) : std::string()));
  return global_info{static_cast<std::uint64_t>(ptr), size};
}

enum class direction { to_device, to_host };

status copy_global(const std::shared_ptr<detail::module_state>& st, std::string_view name_view, void* host,
                   std::size_t size, direction dir) {
  const char* what = dir == direction::to_device ? "set_global" : "get_global";
  if (!st) return error{errc::invalid_argument, 0, std::string(what) + "(): empty handle", {}};
  if (!host && size) return error{errc::invalid_argument, 0, std::string(what) + "(): null host pointer", {}};
  const detail::module_state& s = *st;
  const std::string name(name_view);
  auto ctx = detail::code_context(s);
  if (!ctx) return ctx.error();
  auto g = find_global(s, name, *ctx);
  if (!g) return std::move(g).error();
  if (g->size != size)
    return error{errc::invalid_argument, 0,
                 global_where(s, name) + ": the variable is " + std::to_string(g->size) + " bytes, the host object " +
                     std::to_string(size) + " bytes",
                 {}};
  const detail::driver& d = *s.drv;
  detail::scoped_context current(d, *ctx);
  if (!current.ok())
    return detail::cuda_error(errc::cuda, CUDA_ERROR_INVALID_CONTEXT,
                              global_where(s, name) + ": its context could not be made current");
  CUresult r = dir == direction::to_device ? d.cuMemcpyHtoD(static_cast<CUdeviceptr>(g->address), host, size)
                                           : d.cuMemcpyDtoH(host, static_cast<CUdeviceptr>(g->address), size);
  if (r != CUDA_SUCCESS)
    return detail::cuda_error(errc::cuda, r,
                              global_where(s, name) + ": " +
                                  d.call_failed(dir == direction::to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH", r));
  return {};
}

}  // namespace

result<global_info> loaded_code::global(std::string_view name) const {
  if (!state_) return error{errc::invalid_argument, 0, "global(): empty handle", {}};
  auto ctx = detail::code_context(*state_);
  if (!ctx) return ctx.error();
  return find_global(*state_, std::string(name), *ctx);
}

status loaded_code::set_global_bytes(std::string_view name, const void* data, std::size_t size) const {
  return copy_global(state_, name, const_cast<void*>(data), size, direction::to_device);
}

status loaded_code::get_global_bytes(std::string_view name, void* data, std::size_t size) const {
  return copy_global(state_, name, data, size, direction::to_host);
}

}  // namespace fatpack
