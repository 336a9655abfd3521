// The loader: walks the selector's candidates for one module on one device, decompresses only the
// entry it tries, loads it with cuModuleLoadDataEx into the chosen context (the calling thread's current
// one or the device's primary context: platform/device.hpp, choose_context), and goes on to
// the next candidate when the driver refuses (e.g. CUDA_ERROR_UNSUPPORTED_PTX_VERSION from the JIT ->
// an older PTX; CUDA_ERROR_NO_BINARY_FOR_GPU / INVALID_IMAGE from a load -> the next SASS or PTX).
//
// Memory: an embedded or mapped package is read in place; the decompressed SASS buffer lives only
// until cuModuleLoadDataEx returns (the driver keeps its own copy). PTX goes through the JIT service,
// which keeps the produced SASS for the process (jit/service.hpp).
//
// Every load produces a load_report (chosen entry, why, JIT or not, milliseconds per phase, every
// attempt), logged at FATPACK_LOG=info and kept with the module.
#pragma once

#include "load/pieces.hpp"
#include "platform/device.hpp"
#include "registry/registry.hpp"

#include "fatpack/fatpack.hpp"

#include "fatpack/core/kernel_names.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fatpack::detail {

struct module_state {
  const driver* drv = nullptr;
  const device* dev = nullptr;
  package_ptr package;
  std::string module_name;
  target_context ctx;  // the context the module lives in (and fatpack's reference when it is primary)
  CUmodule mod = nullptr;
  CUlibrary lib = nullptr;  // a library (load_library) instead of a module: no context (ctx.ctx null)
  // Kernel-granular JIT (load/pieces.hpp): the module's PTX split into pieces, each loaded into ctx
  // on first use; `mod` is then null.
  std::shared_ptr<piece_set> pieces;
  load_report report;
  std::vector<std::string> kernels;  // the loaded entry's kernels (symbols)
  // Their demangled names, for lookups by C++ name (kernel_lookup.hpp): made on first use.
  mutable std::once_flag names_once;
  mutable std::vector<core::kernel_name> names;

  std::mutex mu;  // guards functions
  std::unordered_map<std::string, CUfunction> functions;  // by the name the caller gave (bounded)

  module_state() = default;
  module_state(const module_state&) = delete;
  module_state& operator=(const module_state&) = delete;
  ~module_state();  // cuModuleUnload (unless its context was destroyed), then the context reference goes

  // An error naming package, module, device and driver when the module's context is gone (destroyed,
  // or a new context at its address): the module went with it.
  status check_context() const;
};

// The selector's view for the report, without loading anything.
load_report plan_entries(const device& dev, const module_entries& me, policy p);

// Loads the module on `dev` into `ctx` (choose_context); the report is in the returned state (and in
// the error's message).
result<std::shared_ptr<module_state>> load_entries(const driver& drv, const device& dev, const module_entries& me,
                                                   policy p, target_context ctx, bool library = false,
                                                   piece_policy pieces = piece_policy::off);

}  // namespace fatpack::detail
