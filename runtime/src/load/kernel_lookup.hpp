// Kernels by name in a loaded module or library: the one place that turns the name a caller gave
// (module::function, library::kernel, library::function, fatpack_module_function, and every lookup
// built on them) into the symbol the driver knows (cuModuleGetFunction / cuLibraryGetKernel take
// only that). The list of kernels is the loaded entry's (module_state::kernels, from the package);
// the matching rules are core's (fatpack/core/kernel_names.hpp): the exact symbol first, then the
// C++ name as c++filt prints it.
#pragma once

#include "load/loader.hpp"

#include "fatpack/core/kernel_names.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace fatpack::detail {

// The symbol of the kernel `query` names (the callers in api.cpp still ask the driver for a name
// not in the list, and return this error only when the driver does not know it either). errc::not_found (naming the kernels the module has,
// demangled; CUDA status CUDA_ERROR_NOT_FOUND, as the driver has for an unknown name), errc::ambiguous (naming every candidate, demangled with its symbol), or
// errc::invalid_argument (an empty or over-long name); each message names the kernel, module,
// package, target, device and driver.
result<std::string> resolve_kernel(const module_state& s, std::string_view query);

// The entry's kernels with their demangled names, made on first use (thread-safe).
const std::vector<core::kernel_name>& kernel_names(const module_state& s);

// "kernel 'q' in module 'm' (package 'p', sm_90) on device 0 (...), driver ...": the start of every
// message about one kernel of a loaded module (the name cut to a printable length).
std::string kernel_where(const module_state& s, std::string_view query);

}  // namespace fatpack::detail
