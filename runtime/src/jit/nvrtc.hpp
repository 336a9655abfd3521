// NVRTC, CUDA C++ -> cubin or PTX at run time (fatpack::compile, docs/nvrtc.md). dlopen-ed, never
// linked: a program that never compiles, or whose compiles all hit the source cache, never loads it.
//
// Which library: FATPACK_LIBNVRTC (a path with a '/': exactly that file; a bare name: searched like
// the defaults), else libnvrtc.so.13, then libnvrtc.so.12, each searched in the order dlopen of the
// bare name uses: LD_LIBRARY_PATH, the dynamic loader's cache (/etc/ld.so.cache, platform/ld_cache.hpp;
// a damaged one is skipped), the system library directories; then the CUDA toolkit's default
// location (k_default_dirs in nvrtc.cpp), which dlopen would not search. The search is fatpack's own,
// so the file it finds is known *before* loading it: locate_nvrtc() reads that file's ELF build-id (a
// small bounded read of a 105 MB file), which is the compiler identity in the source cache's key, and
// load_nvrtc() dlopen-s exactly the path it found. The builtins library NVRTC loads from its own
// directory (libnvrtc-builtins.so.X.Y) is part of the identity too.
#pragma once

#include "fatpack/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fatpack::detail {

// Bounds on what a caller hands the compiler (docs/nvrtc.md "Limits"): larger inputs are
// errc::invalid_argument naming the bound.
inline constexpr std::size_t k_max_source_bytes = std::size_t(64) << 20;   // source, and each header
inline constexpr std::size_t k_max_headers = 4096;
inline constexpr std::size_t k_max_options = 1024;
inline constexpr std::size_t k_max_option_bytes = 64 * 1024;               // one option, name expression or path
inline constexpr std::size_t k_max_name_expressions = 4096;

struct nvrtc_location {
  std::string path;      // the file load_nvrtc() dlopen-s
  std::string identity;  // "libnvrtc.so.13 build-id 65be...; builtins build-id ab12..."
};

// Finds NVRTC without loading it. errc::no_driver when there is none: the message names what was
// searched and what to install.
result<nvrtc_location> locate_nvrtc();
// The same with another loader's cache file (tests; "" reads none).
result<nvrtc_location> locate_nvrtc(const std::string& ld_cache_path);

struct nvrtc_lib {
  nvrtc_location where;
  int major = 0, minor = 0;        // nvrtcVersion
  std::vector<int> archs;          // nvrtcGetSupportedArchs: 75, 80, 86, ..., ascending
  void* fns[15] = {};              // entry points, see nvrtc.cpp
  std::string identify() const;    // "NVRTC 13.0 (/usr/local/cuda/lib64/libnvrtc.so.13)"
  bool supports(int arch) const;
};

// Loads the located library once per process; the error (missing library or entry point) is kept.
const result<const nvrtc_lib*>& load_nvrtc();
// The library load_nvrtc() loaded; null before it has (or when it failed). Never loads. Once it is
// loaded, every compile of this process runs it, whatever file is at its path by then.
const nvrtc_lib* loaded_nvrtc();

struct nvrtc_input {
  std::string_view source;
  std::string_view program_name;
  std::vector<std::pair<std::string, std::string>> headers;  // include name, contents
  std::vector<std::string> options;                          // given to nvrtcCompileProgram as they are
  std::vector<std::string> name_expressions;
};

struct nvrtc_output {
  std::vector<std::uint8_t> code;  // the cubin, or the PTX (NUL-terminated) when ptx is set
  bool ptx = false;
  std::string log;                 // NVRTC's program log (warnings)
  std::vector<std::pair<std::string, std::string>> lowered;  // name expression, its symbol
  double wall_ms = 0;
};

// Compiles for `arch` ("sm_90": a cubin; "compute_90": PTX). A compile error is errc::jit_failed with
// NVRTC's log (file and line of each diagnostic) in error::log.
result<nvrtc_output> nvrtc_compile(const nvrtc_lib& lib, const nvrtc_input& in, const std::string& arch);

}  // namespace fatpack::detail
