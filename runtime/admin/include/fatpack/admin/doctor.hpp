// `fatpack doctor`: what a program would meet when it starts on this machine, found by the runtime's
// own code (driver loading, device enumeration, the selector, the JIT service's cache key, the disk
// cache's lookup), never by a second implementation. Internal (fatpack_cache_admin); like
// cache_admin.hpp it includes only fatpack/error.hpp, so the CLI uses it without seeing runtime/src.
//
//   namespace fd = fatpack::detail::doctor;
//   std::vector<fd::package_bytes> pkgs = {{"app+0x4000", data, size}};  // the caller keeps the bytes
//   fd::report r = fd::diagnose(pkgs);
//
// Nothing is written: the cache is opened read-only and no directory is created; nothing is loaded
// into a device and nothing is compiled. Without a driver (or without devices) the report says why
// and still has the cache and the packages.
#pragma once

#include "fatpack/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::detail::doctor {

// One package's bytes (a package file, or one found inside a program) and where it came from.
struct package_bytes {
  std::string source;
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
};

struct driver_report {
  std::string library;      // what is (or would be) dlopen-ed: $FATPACK_LIBCUDA or libcuda.so.1
  bool loaded = false;
  std::string error;        // why there is no driver, or no device ("" when there are devices)
  int version = 0;          // cuDriverGetVersion (13000); 0 without a driver
  std::string version_text; // "13.0"
  std::string max_ptx_isa;  // the highest PTX ISA it JIT-compiles ("9.0")
  std::string cache_identity;  // how the cache names this driver: "13000|580.159.04"
};

struct device_report {
  int ordinal = 0;
  std::string name;
  std::uint32_t arch = 0;   // CC as major*10+minor
  bool tegra = false;       // no SASS minor-version compatibility
  std::string uuid;
};

// A cache directory in the runtime's search order (prebuilt layers, then the per-user cache).
struct layer_report {
  std::string role;         // "prebuilt" or "user"
  std::string path;
  std::string state;        // "present", "missing" (no entry yet), "refused"
  std::string problem;      // why refused ("" otherwise)
  std::uint64_t entries = 0, bytes = 0, cubin_bytes = 0, temp_files = 0;
  bool index_ok = false;
};

struct cache_report {
  // What a program gets: "read-write", "read-only", "memory-only" or "disabled" (fatpack::cache_mode
  // names), and why when it is not read-write.
  std::string mode;
  std::string why;
  std::uint64_t max_bytes = 0;       // FATPACK_CACHE_MAXSIZE (0: no bound)
  bool use_other_driver = true;      // FATPACK_CACHE_OTHER_DRIVER
  std::vector<layer_report> layers;  // search order
  std::vector<std::string> warnings; // environment values the cache would ignore, refused layers
};

struct package_report {
  std::string name, source;
  std::size_t entries = 0;
  std::vector<std::string> modules;
  std::vector<std::string> targets;  // every entry's target: "sm_90", "compute_80 (PTX ISA 9.0)"
};

// One module on one device: what the selector picks and, for PTX, whether the cache has its SASS.
struct module_report {
  std::string package, module;
  int device = 0;
  std::uint32_t arch = 0;
  bool fits = false;
  std::string loads;          // the chosen entry: "sm_90", "compute_80 (PTX ISA 9.0)"
  std::string reason;         // the selector's reason, or (nothing fits) its nothing_fits paragraph
  std::size_t fallbacks = 0;  // further usable entries the loader would try if the driver refused
  bool jit = false;           // the chosen entry is PTX
  // JIT only: "hit" (SASS by this driver), "other-driver" (used at once, re-JIT-ed for this driver in
  // the background), "miss" (compiled at the first load), "disabled" (no disk cache: compiled in
  // every process).
  std::string cache;
  std::string cache_layer;    // where the hit is: "user", "prebuilt /opt/app/jit"
  std::string jit_path;       // "culink", "nvjitlink-13.0"
  std::string code_key;       // the cache's code key text: "v1|culink|ptx=...|src=...|cc=90|opt=..."
  // Kernel-granular JIT: the pieces a load compiles the module in (0: whole), and how many of them
  // the cache has. `cache` is then "hit"/"other-driver" when it has all of them, "partial" when it
  // has some, "miss" when none; code_key is the first piece's.
  std::size_t pieces = 0, pieces_cached = 0;
};

struct report {
  driver_report driver;
  std::vector<device_report> devices;
  std::string policy;                    // the policy a load gets from the environment
  cache_report cache;
  std::vector<package_report> packages;
  std::vector<std::string> package_errors;  // a package the registry refuses (a name clash), and why
  std::vector<module_report> modules;    // per (package, module, device); empty without devices
};

// Registers `packages` in this process's registry (borrowed: the bytes must outlive the process's
// use of the runtime); call once per process.
report diagnose(const std::vector<package_bytes>& packages);

}  // namespace fatpack::detail::doctor
