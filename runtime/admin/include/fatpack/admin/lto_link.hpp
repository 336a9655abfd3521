// Build-time link of LTO-IR (nvcc -ltoir -dlto) into a cubin, with the runtime's own nvJitLink code
// (dlopen of libnvJitLink.so.13 or FATPACK_NVJITLINK; the same options and -lto as at load time).
// `fatpack build -- -rdc=true -dlto` makes its SASS entries with it: link-time optimised SASS, which
// nvcc -dlink -dlto cannot make where nvlink's LTO library does not load. Internal
// (fatpack_cache_admin); like cache_admin.hpp it includes only fatpack/error.hpp.
#pragma once

#include "fatpack/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::detail::lto {

struct linked {
  std::vector<std::uint8_t> cubin;
  std::string linker;    // "nvjitlink 13.0"
  std::string info_log;  // nvJitLink's -verbose log ("Used 16 registers ...")
};

// Links `parts` (each one source's LTO-IR) for `sm_target` ("sm_90", "sm_90a", "sm_100f") with the
// ptxas options `ptxas_options` (the recorded-options syntax of fatpack/core/jit_options.hpp).
// errc::no_driver when nvJitLink cannot be loaded; errc::jit_failed with the linker's log otherwise.
result<linked> link_ltoir(const std::vector<std::vector<std::uint8_t>>& parts, const std::string& sm_target,
                          const std::string& ptxas_options, const std::string& name);

}  // namespace fatpack::detail::lto
