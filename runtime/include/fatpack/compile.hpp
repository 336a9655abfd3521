// fatpack runtime, run-time compilation: CUDA C++ source in, a loaded library per device out, through
// NVRTC and a source-keyed cache that skips NVRTC entirely on a hit (docs/nvrtc.md).
//
//   fatpack::compile_request req;
//   req.source = "template <class T> __global__ void scale(T* x, T a, int n) { ... }";
//   req.name_expressions = {"scale<float>"};
//   auto c = fatpack::compile(req);                       // result<compiled>: errors as values
//   if (!c) { std::cerr << c.error().what(); ... }   // what() ends with NVRTC's log (file:line)
//   fatpack::cu_kernel k = c->kernel("scale<float>").value();
//
// Per device: SASS for the device's exact architecture when NVRTC knows it, else PTX for the newest
// virtual architecture NVRTC knows that the device can run, which then goes through fatpack's JIT and
// JIT cache like packaged PTX. The SASS is kept in fatpack's cache (docs/cache.md: the same store,
// single flight, bounds, prebuilt layers) under a key of everything that decides it: the source,
// each header's contents, every file reachable through #include along the include paths (content
// hashes), the options, the name expressions, the target, NVRTC's identity (the ELF build-id of the
// library file, read without loading it) and the cache format; for the SASS the JIT made from PTX,
// also the JIT path and the driver (exact hits only: never another driver's). A hit loads the SASS
// without loading NVRTC (or running the JIT). NVRTC is dlopen-ed (FATPACK_LIBNVRTC, else
// libnvrtc.so.13, then libnvrtc.so.12).
//
// This header includes no CUDA header.
#pragma once

#include "fatpack/fatpack.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

FATPACK_BEGIN_HIDDEN
namespace fatpack {

struct compile_header {
  std::string name;      // as the source includes it: "params.h"
  std::string contents;
};

struct compile_request {
  std::string source;                          // CUDA C++ (at most 64 MiB)
  std::string name = "program.cu";             // NVRTC's program name: the file name in its log
  std::vector<compile_header> headers;         // headers given as contents (win over files)
  std::vector<std::string> include_paths;      // passed as -I<path>; their files are in the key
  std::vector<std::string> options;            // NVRTC options as they are ("-std=c++17", "-DN=4");
                                               // not -arch: fatpack picks the target per device
  std::vector<std::string> name_expressions;   // "scale<float>": instantiated, found by kernel()
};

struct compile_options {
  int device = -1;        // -1: the device of the calling thread's current context, else 0
  bool use_cache = true;  // false: compile (and store nothing) even when the cache has it
};

// How a device got its code.
enum class compile_path {
  // Same numbers as fatpack_compile_path_id (fatpack.h).
  cache_hit = 0,   // SASS from the source cache (NVRTC's, or the JIT's of this driver): NVRTC was not loaded for it
  nvrtc_sass = 1,  // NVRTC compiled SASS for the device's architecture
  nvrtc_ptx = 2,   // NVRTC compiled PTX (it does not know the device's architecture); fatpack's JIT made SASS
};
FATPACK_API const char* compile_path_name(compile_path p) noexcept;  // "cache hit", "NVRTC SASS", "NVRTC PTX + JIT"

struct compile_report {
  int device = -1;
  std::uint32_t arch = 0;        // the device's CC, major*10+minor
  std::string target;            // "sm_90", or "compute_90" for the PTX path
  compile_path path = compile_path::nvrtc_sass;
  std::string reason;            // why this path ("NVRTC 13.0 compiles sm_90", "cache hit (user)", ...)
  std::string compiler;          // NVRTC's identity: file and build-id
  std::string nvrtc_version;     // "13.0" when NVRTC was loaded ("" on a hit)
  std::string cache_key;         // the source cache's key (hex), "" when not cached
  bool stored = false;           // the SASS was written to the cache (not on a hit, nor read-only or memory-only)
  std::vector<std::string> dependencies;  // files from disk in the key (the manifest)
  std::string not_cached;        // why the result is not cached ("" when it is)
  std::vector<std::pair<std::string, std::string>> lowered_names;  // name expression, symbol (a miss only)
  std::string log;               // NVRTC's warnings ("" on a hit)
  double nvrtc_ms = 0, total_ms = 0;
  // Where total_ms went: locating NVRTC without loading it (its build-id), the include scan, the
  // source cache's lookups (on a miss, with the wait for another process compiling the same source),
  // making the registry's package, the driver's load (load_library).
  double locate_ms = 0, scan_ms = 0, lookup_ms = 0, register_ms = 0, load_ms = 0;
};

// A compiled program loaded on one device: the library (fatpack::library: context-independent
// kernels) and how it was made. Move-only.
struct compiled {
  fatpack::library library;
  compile_report report;
  // library.kernel(name): a name expression's lowered symbol when this compile lowered it, else the
  // symbol or C++ name ("scale<float>") through the library's kernel lookup (docs/runtime.md).
  FATPACK_API result<cu_kernel> kernel(std::string_view name) const;
};

// Compiles `request` for one device and loads it. Errors: errc::invalid_argument (an input over its
// bound, an -arch option), errc::no_driver (no NVRTC: the message names what to install; or no CUDA
// driver), errc::jit_failed (a compile error: error::log is NVRTC's log; or the driver refused
// NVRTC's PTX: the message names both versions).
FATPACK_API result<compiled> compile(const compile_request& request, const compile_options& options = {});

// The same for several devices (empty: every device), compiled in parallel (one compile per distinct
// architecture); one result per device, in order.
FATPACK_API std::vector<result<compiled>> compile_for_devices(const compile_request& request,
                                                              const std::vector<int>& devices = {});

}  // namespace fatpack
FATPACK_END_HIDDEN
