// The optional second JIT back end: nvJitLink (dlopen-ed, never linked), PTX -> SASS without the
// driver's JIT.
//
// Policy: cuLink stays the default because only the installed driver knows GPUs newer than our
// toolkit (docs/design.md §2). nvJitLink is chosen with FATPACK_JIT_BACKEND=nvjitlink or
// fatpack::set_jit_backend(); its output is deterministic for a given library version, it needs no
// context, and a newer nvJitLink than the driver can compile newer PTX ISAs. When the library is
// missing, or does not know the device's architecture (NVJITLINK_ERROR_UNRECOGNIZED_ARCH /
// UNSUPPORTED_ARCH: a GPU newer than the library), the JIT service falls back to cuLink.
// Library: FATPACK_NVJITLINK=/path, else "libnvJitLink.so.13". The ABI used is the 13.0 one (the
// versioned __nvJitLink*_13_0 entry points every 13.x library exports).
#pragma once

#include "jit/culink.hpp"

#include "fatpack/core/target.hpp"

#include <string>

namespace fatpack::detail {

struct nvjitlink_lib {
  std::string path;
  unsigned major = 0, minor = 0;
  void* fns[10] = {};  // entry points, see jit_nvjitlink.cpp
  std::string identify() const;  // "nvjitlink 13.0"
};

// Loads the library once per process; the error (missing library, missing entry point) is kept.
const result<const nvjitlink_lib*>& load_nvjitlink();

// Compiles NUL-terminated PTX for sm_<arch><variant>. `arch_unknown` is set when the library does not
// know that architecture (the caller then uses cuLink).
// Several parts (a link group, docs/format.md §4.1) are added one by one and linked together.
// `ltoir`: the parts are LTO-IR (nvcc -dlto), added as NVJITLINK_INPUT_LTOIR and linked with -lto;
// only nvJitLink can link them (the caller falls back to the module's next candidate, not cuLink).
result<jit_output> nvjitlink_compile(const nvjitlink_lib& lib, const std::vector<core::byte_span>& ptx_parts,
                                     std::string_view name, const jit_options& opts, std::uint32_t arch,
                                     core::arch_variant variant, bool& arch_unknown, bool ltoir = false);

}  // namespace fatpack::detail
