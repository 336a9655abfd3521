// fatpack runtime, C++ API: pick the right code for each GPU, load it, JIT PTX when nothing else fits.
//
//   auto m = fatpack::load_module("vadd");            // result<module>: errors as values
//   if (!m) { std::cerr << m.error().what(); ... }
//   CUfunction f = m->function("vadd").value();       // value() throws fatpack::exception on error
//   cuLaunchKernel(f, ...);                           // in the context the module was loaded in
//
// What happens on load (docs/runtime.md): the driver is dlopen-ed (libcuda.so.1 or FATPACK_LIBCUDA),
// the module's entries in the registered packages are ranked by the same pure selector as
// `fatpack plan`, the best one is decompressed (only that one) and loaded with cuModuleLoadDataEx into
// the calling thread's current context when it has one on the device, else into the device's primary
// context, which then becomes current on a thread that had none (so a launch right after the load
// works); if the driver refuses it, the next candidate is tried. PTX is compiled
// to SASS through the driver's JIT (cuLink) once per process: on the loading thread when a load needs
// it (other threads loading the same module wait for that compile), on a thread pool for warm().
//
// Thread safety: every function here may be called from any thread. Loading the same module on the
// same device from many threads compiles and loads it once; all callers share the loaded module.
//
// This header includes no CUDA header. The handle types below are the ones cuda.h declares
// (`typedef struct CUfunc_st* CUfunction;`), so a fatpack::cu_function *is* a CUfunction.
//
// Every function here is FATPACK_API (fatpack/export.h), the types are hidden; a shared library that
// links the runtime exports none of them unless it asks to (docs/runtime.md "Symbols").
#pragma once

#include "fatpack/error.hpp"
#include "fatpack/export.h"
#include "fatpack/launch.hpp"
#include "fatpack/version.h"
#include "fatpack/policy.hpp"
#include "fatpack/verdict.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

struct CUfunc_st;
struct CUmod_st;
struct CUctx_st;
struct CUlib_st;
struct CUkern_st;

FATPACK_BEGIN_HIDDEN
namespace fatpack {

using cu_function = ::CUfunc_st*;  // CUfunction
using cu_module = ::CUmod_st*;     // CUmodule
using cu_context = ::CUctx_st*;    // CUcontext
using cu_library = ::CUlib_st*;    // CUlibrary (CUDA 12.0)
using cu_kernel = ::CUkern_st*;    // CUkernel, the same handle as cudart's cudaKernel_t

// Which entries may be used (docs/design.md §2). The process default comes from set_policy() and the
// environment: FATPACK_FORCE_PTX_JIT=1 or CUDA_FORCE_PTX_JIT=1 -> force_ptx, CUDA_DISABLE_PTX_JIT=1 ->
// sass_only. A policy given in load_options wins over both.
// fatpack::policy and policy_name() are in fatpack/policy.hpp (shared with core's selector).

enum class log_level { off = 0, error = 1, warn = 2, info = 3, debug = 4 };

// The runtime's version: MAJOR*10000 + MINOR*100 + PATCH (100 for 0.1.0), as fatpack_version() and
// FATPACK_VERSION_NUMBER (the headers' version, fatpack/version.h); version_string(): "0.1.0".
FATPACK_API int version() noexcept;
FATPACK_API const char* version_string() noexcept;

// ---- driver and devices ----------------------------------------------------------------------

// Loads the driver and enumerates devices now (otherwise this happens on first use). Idempotent; the
// result of the first attempt is kept (a process without a driver gets the same error every time).
FATPACK_API status init();

// cuDriverGetVersion(): 13000 for CUDA 13.0.
FATPACK_API result<int> driver_version();
// The path the driver was loaded from ("libcuda.so.1" or $FATPACK_LIBCUDA).
FATPACK_API std::string driver_library();

struct device_info {
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  std::uint32_t arch = 0;         // cc_major*10 + cc_minor: 90 for CC 9.0
  bool integrated = false;        // Tegra/Jetson (no SASS minor-version compatibility)
  int driver_version = 0;         // 13000
  std::string max_ptx_isa;        // highest PTX ISA this driver accepts, "9.0" ("" when unknown)
  std::string name;               // "NVIDIA H200"
  std::array<std::uint8_t, 16> uuid{};
  std::string uuid_str;           // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
};
FATPACK_API result<int> device_count();
FATPACK_API result<device_info> device(int ordinal);

// A driver entry point through the driver fatpack loaded (cuGetProcAddress), so an application that
// does not link libcuda can call e.g. cuLaunchKernel or cuMemAlloc. cuda_version selects the ABI:
// pass CUDA_VERSION from the cuda.h whose declarations you cast to. The default, 0, is cuda.h 13.0's
// (the toolkit fatpack is built with), or the driver's own ABI where the driver is older than 13.0
// (a 12.x driver has no 13.0 entry points). Before, the default 12000 gave cuCtxCreate's CUDA 12
// entry point, which a cast to cuda.h 13.0's cuCtxCreate (cuCtxCreate_v4) called with the wrong
// arguments.
FATPACK_API result<void*> driver_entry_point(const char* symbol, int cuda_version = 0);

// ---- registry ----------------------------------------------------------------------------------

// Packages linked into the program by `fatpack embed` / fatpack_add_kernels are found automatically.
// These add more. Every package is validated when it is added.
// A file is read once into memory the runtime owns (at most 4 GiB), never mapped: rewriting it
// later cannot affect or crash the process.
FATPACK_API status add_package_file(const std::string& path);
enum class ownership { copy, borrow };  // borrow: the caller keeps the bytes alive and unchanged
FATPACK_API status add_package_memory(const void* data, std::size_t size, std::string_view source = "memory",
                                      ownership own = ownership::copy);
// A bare cubin, PTX (text, NUL optional) or nvcc fatbin the application would have passed to
// cuModuleLoadData: it becomes module `module_name` of package `package_name` (default: the module
// name) and goes through the same selection, JIT and cache as packaged kernels.
FATPACK_API status add_image(const void* data, std::size_t size, std::string_view module_name,
                             std::string_view package_name = {});

struct package_info {
  std::string name;
  std::string source;   // "embedded", a file path, "memory", ...
  std::size_t entries = 0;
  std::vector<std::string> modules;
};
// Every registered package (embedded ones included). Empty with errc::no_packages when none.
FATPACK_API result<std::vector<package_info>> packages();

// ---- loading -------------------------------------------------------------------------------------

// One try of one entry, in the order the loader went.
struct attempt_info {
  std::size_t entry = 0;
  std::string target;        // "sm_90", "compute_80 (PTX ISA 9.0)"
  bool jit = false;          // this try went through PTX -> SASS
  bool jit_reused = false;   // the SASS came from an earlier JIT in this process (or the cache)
  // Reused SASS that the JIT cache gave this process (the per-user cache, a prebuilt layer, the fleet
  // cache), for this load or an earlier one it shares; false for one compiled in this process. For a
  // module in pieces (kernel-granular JIT), both say what the piece compiled at load had.
  bool jit_from_cache = false;
  std::string jit_path;      // "culink", "nvjitlink 13.0", "nvjitlink 13.0 (LTO)" for LTO-IR (JIT tries only)
  bool ok = false;
  int cuda_status = 0;       // the CUresult of the failing call
  std::string message;       // why it failed ("" when ok)
  std::string log;           // JIT info/error log
  double decompress_ms = 0, jit_ms = 0, load_ms = 0;
};

// fatpack::verdict and verdict_name() are in fatpack/verdict.hpp (shared with core's selector).

// One ranked entry, as the selector saw it.
struct candidate_info {
  std::size_t entry = 0;
  std::string target;
  fatpack::verdict verdict = verdict::rejected;
  std::string reason;
};

struct load_report {
  std::string package, module;
  int device = -1;
  std::string device_name;
  std::uint32_t arch = 0;          // device CC as major*10+minor
  int driver_version = 0;
  std::string max_ptx_isa;
  fatpack::policy policy = policy::prefer_sass;
  std::vector<candidate_info> candidates;  // the selector's ranking, then the rejected entries
  std::vector<attempt_info> attempts;      // what the loader tried, in order
  bool loaded = false;
  std::size_t entry = 0;                   // the entry that loaded
  std::string target;                      // its target
  std::string reason;                      // why it was chosen
  bool jit = false;                        // it went through the JIT
  bool jit_reused = false;
  bool jit_from_cache = false;             // as attempt_info::jit_from_cache: the reused SASS is the JIT cache's
  std::string jit_path;                    // "culink", "nvjitlink 13.0", "nvjitlink 13.0 (LTO)"
  // Background upgrade (set_background_upgrade): "" when it did not apply; else what it did, e.g.
  // "queued: compute_80 JIT for CC 8.6 in the background (sm_80 SASS runs now); used from the next
  // start" or "used: compute_80 JIT for CC 8.6 from the cache, instead of sm_80 SASS".
  std::string upgrade;
  // Kernel-granular JIT (set_jit_pieces): "" when the chosen entry needed no JIT or pieces are off;
  // else how the PTX was split ("400 pieces (per kernel), compiled in the background; ...") or why it
  // was compiled whole ("not split: relocatable PTX ..."). split_ms: the split's time.
  std::string pieces;
  double split_ms = 0;
  // Milliseconds per phase. context: choosing the context (the primary context's creation, the first
  // time a process uses the device: 100-300 ms, not fatpack's own cost).
  double select_ms = 0, context_ms = 0, decompress_ms = 0, jit_ms = 0, load_ms = 0, total_ms = 0;

  // The FATPACK_LOG=info trace of this load (several lines, docs/runtime.md §FATPACK_LOG).
  FATPACK_API std::string trace() const;
};

// Kernel-granular JIT: see set_jit_pieces.
enum class jit_pieces { off, on_demand, background };

struct load_options {
  int device = -1;                        // -1: the device of the calling thread's current context, else 0
  std::string package;                    // "" : any registered package holding the module
  std::optional<fatpack::policy> policy;  // overrides the process policy for this load
  // Kernel-granular JIT for this load (set_jit_pieces): off gives a module with one CUmodule, as
  // module::handle() users need (the one-line ports load with it off).
  std::optional<jit_pieces> pieces;
};

namespace detail {
struct module_state;
struct module_access;
}  // namespace detail

// What a module and a library handle share: the loaded entry of a module on one device and its
// description. Move-only; the last handle to the loaded code unloads it.
class loaded_code {
 public:
  bool valid() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }
  FATPACK_API int device() const noexcept;
  FATPACK_API const std::string& package_name() const noexcept;
  FATPACK_API const std::string& name() const noexcept;
  FATPACK_API std::vector<std::string> kernels() const;  // entry functions of the loaded entry (symbols)
  FATPACK_API const load_report& report() const noexcept;
  // Which code was loaded: exact SASS, lower-minor SASS, `a` or `f` SASS, or PTX through the JIT
  // (with its target and PTX ISA), derived from report(). kind none for an empty handle.
  FATPACK_API code_variant variant() const;
  // Drops this handle (unloads the code if it was the last one).
  void reset() noexcept { state_.reset(); }

  // __constant__ / __device__ variables (docs/runtime.md "Globals"). global(): cuModuleGetGlobal (a
  // library: cuLibraryGetGlobal, the address in the calling thread's current context on the device,
  // else in the device's primary context). set/get copy host bytes to and from the variable
  // (cuMemcpyHtoD / DtoH, synchronous) in that context, after checking that the host size equals
  // the variable's; a mismatch is errc::invalid_argument naming the variable, both sizes, the
  // module, package, device and driver. errc::not_found names the variable when there is none.
  FATPACK_API result<global_info> global(std::string_view name) const;
  FATPACK_API status set_global_bytes(std::string_view name, const void* data, std::size_t size) const;
  FATPACK_API status get_global_bytes(std::string_view name, void* data, std::size_t size) const;
  template <class T>
  status set_global(std::string_view name, const T& value) const {
    static_assert(std::is_trivially_copyable_v<T>, "a global is copied as bytes: T must be trivially copyable");
    return set_global_bytes(name, &value, sizeof(T));
  }
  template <class T>
  result<T> get_global(std::string_view name) const {
    static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                  "a global is copied as bytes: T must be trivially copyable and default-constructible");
    T value{};
    if (auto s = get_global_bytes(name, &value, sizeof(T)); !s) return s.error();
    return value;
  }

 protected:
  loaded_code() noexcept = default;
  explicit loaded_code(std::shared_ptr<detail::module_state> s) noexcept : state_(std::move(s)) {}
  loaded_code(loaded_code&&) noexcept = default;
  loaded_code& operator=(loaded_code&&) noexcept = default;
  loaded_code(const loaded_code&) = delete;
  loaded_code& operator=(const loaded_code&) = delete;
  ~loaded_code() = default;
  std::shared_ptr<detail::module_state> state_;
};

// A module loaded on one device, in one context: the calling thread's current context when it had
// one on that device (an application's own cuCtxCreate context), else the device's primary context
// (shared with cudart). Move-only; holds the module (and, for the primary context, a reference on
// it) alive: the last handle to a module unloads it. Functions obtained from it are valid while a
// handle lives and its context exists. Handles of the same (package, module, context, policy) share
// one loaded CUmodule; contexts are told apart by cuCtxGetId, so a new context at a destroyed one's
// address gets its own module.
class module : public loaded_code {
 public:
  module() noexcept = default;

  // cuModuleGetFunction, cached. `kernel` is the symbol ("vadd", "_ZN5mylib6affineIfLi256EEEvPKT_PS1_i")
  // or the C++ name ("mylib::affine<float, 256>", with or without its parameter list; see
  // docs/runtime.md, "Kernels by name"). errc::not_found names the kernels the module has;
  // errc::ambiguous (a name several overloads or instantiations have) names the candidates.
  FATPACK_API result<cu_function> function(std::string_view kernel) const;
  FATPACK_API cu_module handle() const noexcept;
  FATPACK_API cu_context context() const noexcept;     // the context the module lives in
  FATPACK_API bool primary_context() const noexcept;   // context() is the device's primary context
  // ok while the module's context exists; when the application destroyed it (cuCtxDestroy), an error
  // (errc::cuda, cuda_status CUDA_ERROR_CONTEXT_IS_DESTROYED) naming package, module, device and
  // driver; function() returns the same. Releasing such a handle is safe (nothing is unloaded).
  FATPACK_API status check() const;

  // A kernel with its argument types, for typed_kernel::launch (fatpack/launch.hpp): looked up with
  // function(name), its parameters checked once against Args (errc::invalid_argument naming the
  // argument on a mismatch).
  template <class... Args>
  result<typed_kernel<Args...>> kernel(std::string_view name) const {
    auto b = bind(name, typed_kernel<Args...>::shapes, sizeof...(Args));
    if (!b) return std::move(b).error();
    return typed_kernel<Args...>(std::move(b.value()));
  }
  // The variant a kernel runs: its module's (one entry holds every kernel of a module), after
  // function(name) found it.
  FATPACK_API result<code_variant> variant(std::string_view kernel) const;
  using loaded_code::variant;

 private:
  friend struct detail::module_access;
  explicit module(std::shared_ptr<detail::module_state> s) noexcept : loaded_code(std::move(s)) {}
  FATPACK_API result<std::shared_ptr<const detail::kernel_binding>> bind(std::string_view name,
                                                                         const detail::arg_shape* args,
                                                                         std::size_t count) const;
};

// Loads `module_name` (a module of a registered package) on a device.
FATPACK_API result<module> load_module(std::string_view module_name, const load_options& options = {});

// A module loaded as a context-independent library (cuLibraryLoadData, drivers for CUDA 12.0 and
// later) for one device: the same selection, JIT and cache as a module, and its kernels (CUkernel)
// are valid in every context of that device, the primary one and the application's own, present and
// future; cuLaunchKernel takes a CUkernel in place of a CUfunction, cudart's cudaLaunchKernel takes
// it as a cudaKernel_t. One library per (package, module, device, policy), shared by the handles;
// the last handle unloads it. Move-only.
class library : public loaded_code {
 public:
  library() noexcept = default;

  // cuLibraryGetKernel. `name` as for module::function (the symbol or the C++ name).
  // errc::not_found names the kernels the library has; errc::ambiguous the candidates.
  FATPACK_API result<cu_kernel> kernel(std::string_view name) const;
  // cuKernelGetFunction: the kernel's CUfunction in the calling thread's current context.
  FATPACK_API result<cu_function> function(std::string_view name) const;
  FATPACK_API cu_library handle() const noexcept;

  // A kernel with its argument types (as module::kernel<Args...>), looked up with kernel(name); its
  // launches take the CUkernel in the calling thread's current context on the device, else in the
  // device's primary context.
  template <class... Args>
  result<typed_kernel<Args...>> kernel(std::string_view name) const {
    auto b = bind(name, typed_kernel<Args...>::shapes, sizeof...(Args));
    if (!b) return std::move(b).error();
    return typed_kernel<Args...>(std::move(b.value()));
  }
  FATPACK_API result<code_variant> variant(std::string_view kernel) const;  // as module::variant(kernel)
  using loaded_code::variant;

 private:
  friend struct detail::module_access;
  explicit library(std::shared_ptr<detail::module_state> s) noexcept : loaded_code(std::move(s)) {}
  FATPACK_API result<std::shared_ptr<const detail::kernel_binding>> bind(std::string_view name,
                                                                         const detail::arg_shape* args,
                                                                         std::size_t count) const;
};

// Loads `module_name` as a library on a device (-1: the current context's device, else 0).
// errc::driver_symbol_missing when the driver has no cuLibraryLoadData (older than CUDA 12.0).
FATPACK_API result<library> load_library(std::string_view module_name, const load_options& options = {});

// The selector's answer for a module on a device, without loading anything (what `fatpack plan`
// says for this process's device and driver).
FATPACK_API result<load_report> plan_module(std::string_view module_name, const load_options& options = {});

// ---- background warm-up --------------------------------------------------------------------------

// Compiles ahead of use: every module of every registered package (or of `package`) that needs the
// JIT on a device (all devices, or `device`) is queued on the JIT pool. Loads later find the SASS.
// Without warm-up a module is compiled only when it is first loaded.
struct warm_options {
  int device = -1;      // -1: every device
  std::string package;  // "": every package
};
class warm_handle {
 public:
  warm_handle() = default;
  FATPACK_API bool done() const;
  // Waits for every queued compile; the first error (if any) is returned, the rest are logged. When
  // nothing could be queued (no driver, no packages), that error.
  FATPACK_API status wait() const;
  FATPACK_API std::size_t jobs() const;  // how many compiles were queued

  struct state;  // opaque

 private:
  friend struct detail::module_access;
  std::shared_ptr<state> state_;
};
FATPACK_API warm_handle warm(const warm_options& options = {});

// ---- JIT cache (docs/cache.md) -------------------------------------------------------------------

// The disk cache is on by default: SASS compiled from PTX is kept in the per-user cache
// ($FATPACK_CACHE_PATH, else $XDG_CACHE_HOME/fatpack, else ~/.cache/fatpack), so the next process
// (and every other process of the machine) loads it instead of compiling again. Configured by the
// environment when the first JIT happens: FATPACK_CACHE_DISABLE, FATPACK_CACHE_READONLY,
// FATPACK_CACHE_MAXSIZE, FATPACK_CACHE_PREBUILT_PATH.

// This process's cache counters.
struct cache_statistics {
  std::uint64_t hits_exact = 0;         // SASS from the cache, built by this driver
  std::uint64_t hits_other_driver = 0;  // built by another driver for the same code: used at once
  std::uint64_t misses = 0;             // compiles the cache could not spare
  std::uint64_t jits = 0;               // compiles this process ran (refreshes included)
  double jit_ms = 0;                    // their total time
  std::uint64_t refreshes = 0;          // background re-JITs for this driver after other-driver hits
  std::uint64_t upgrades = 0;           // background upgrades compiled (set_background_upgrade)
  std::uint64_t bytes_read = 0;         // entry bytes read from disk
  std::uint64_t bytes_written = 0;      // entry bytes written
  std::uint64_t stores = 0;             // entries written
  std::uint64_t evictions = 0;          // entries this process evicted (LRU, size bound)
  std::uint64_t rejected = 0;           // invalid entries found (never served)
  std::uint64_t waited = 0;             // waits for another process compiling the same key
  std::uint64_t lock_timeouts = 0;      // waits that gave up (then compiled here too)
  std::uint64_t io_errors = 0;
  // The fleet cache (set_cache_remote, FATPACK_CACHE_REMOTE; docs/cache.md §12).
  std::uint64_t remote_hits = 0;         // entries served by the remote (then copied locally)
  std::uint64_t remote_misses = 0;       // lookups the remote did not answer with a usable entry
  std::uint64_t remote_uploads = 0;      // entries this process published to the remote
  std::uint64_t remote_present = 0;      // uploads not needed: the remote had the key already
  std::uint64_t remote_rejected = 0;     // remote entries refused (signature, key text, checksums)
  std::uint64_t remote_faults = 0;       // requests that failed (each one a miss)
  std::uint64_t remote_skipped = 0;      // lookups not sent: the remote is skipped after faults
  std::uint64_t remote_lease_waits = 0;  // compiles left to another node holding the lease
};
FATPACK_API cache_statistics cache_stats();

// Same numbers as fatpack_cache_mode_id (fatpack.h).
enum class cache_mode {
  read_write = 0,   // the per-user cache is used and written
  read_only = 1,    // entries are read, nothing is written (FATPACK_CACHE_READONLY, or not writable)
  memory_only = 2,  // no usable directory: SASS is kept for this process only
  disabled = 3,     // FATPACK_CACHE_DISABLE
};
FATPACK_API const char* cache_mode_name(cache_mode m) noexcept;  // "read-write", "read-only", "memory-only", "disabled"

struct cache_info {
  std::string path;                   // the per-user cache directory ("" when there is none)
  cache_mode mode = cache_mode::disabled;
  std::vector<std::string> prebuilt;  // read-only layers, in search order
  std::string remote;                 // the fleet cache: "https://host/base (read-write, signed, key id ...)"; "" none
};
FATPACK_API cache_info cache_status();

// Adds a read-only cache directory (e.g. prebuilt at install with `fatpack warm --path DIR`),
// searched before the per-user cache. An error names the directory and why it is refused (missing,
// owned by another user, writable by group/others).
FATPACK_API status add_prebuilt_cache(std::string_view directory);

// The fleet cache (docs/cache.md §12): a remote store behind the local cache, shared by every node
// of a cluster. Lookups go to the prebuilt layers, the local cache, then the remote; a remote hit is
// checked like a local entry and copied into the local cache in the background; a read-write remote
// gets what this process compiles, uploaded in the background. Faults are one warning and a miss.
// The environment configures the same (FATPACK_CACHE_REMOTE, _MODE, _KEY, ...); once called, this
// wins. An empty url removes the remote. Errors: an unreadable key or credentials file, a
// read-write remote without a key (unless trust_all_writers), an unsupported URL.
struct remote_cache_options {
  std::string url;                  // https://host/base, http://..., redis://[:password@]host:port/db
  bool read_write = false;          // upload what this process compiles
  std::string key_file;             // HMAC-SHA256 signing key (>= 32 bytes, mode 0600): uploads are
                                    // signed, and unsigned or badly signed entries are refused
  // A read-write remote without a key: whoever can write the store can run code on this machine.
  bool trust_all_writers = false;
  unsigned connect_timeout_ms = 500;
  unsigned timeout_ms = 3000;       // per request, connect included
  unsigned lease_ms = 0;            // Redis: nodes compiling the same key wait for one (0: off)
  std::string credentials_file;     // HTTP: one line "bearer TOKEN" or "basic USER:PASSWORD"
  std::string ca_file;              // HTTPS: a CA bundle instead of the system's
};
FATPACK_API status set_cache_remote(const remote_cache_options& options);

// Waits for the background re-JITs queued by other-driver hits (they make the next start an exact
// hit), the stores, and a fleet cache's uploads and local copies; a process may exit without
// waiting (a re-JIT cut short stores nothing; uploads get FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS).
FATPACK_API void wait_cache_refresh();

// ---- settings ------------------------------------------------------------------------------------

FATPACK_API void set_policy(policy p);       // process default (the environment still wins, see `policy`)

// PTX -> SASS: the driver's cuLink (default; the only one that knows GPUs newer than the toolkit) or
// nvJitLink (dlopen-ed libnvJitLink.so.13 / FATPACK_NVJITLINK; used where it knows the device's
// architecture, cuLink otherwise). Default: FATPACK_JIT_BACKEND=culink|nvjitlink, else culink.
enum class jit_backend { culink, nvjitlink };
FATPACK_API void set_jit_backend(jit_backend b);
FATPACK_API policy effective_policy();       // what a load without an explicit policy uses now
// Newer code in the background (opt-in; docs/runtime.md §4, "Newer code in the background"): where
// the SASS chosen for a device is not its own (sm_80 SASS on an sm_86 device, `f` SASS of another
// CC) and the module has PTX, the load runs that SASS now and JIT-compiles the PTX for the device in
// the background into the JIT cache; a later load (the next start) uses the JIT's SASS from the
// cache. load_report::upgrade says which happened. Default: FATPACK_BACKGROUND_UPGRADE=1|0, else
// off; set_background_upgrade() wins once called. Needs the JIT cache (without one nothing is
// queued, and the report says so). wait_cache_refresh() waits for the upgrades queued so far.
FATPACK_API void set_background_upgrade(bool on);
FATPACK_API bool background_upgrade();
// Kernel-granular JIT (docs/runtime.md "Kernel-granular JIT"): a module whose PTX must be JIT-compiled
// is split into independent pieces (docs/splitting.md), each compiled, cached and loaded on its own;
// asking for a kernel waits only for its own piece. background (the default): load_module queues
// every piece's compile on the JIT pool and returns; on_demand: a piece compiles when one of its
// kernels or globals is first asked for; off: the module compiles whole, in load_module. Default:
// FATPACK_JIT_PIECES=off|on_demand|background, else background; set_jit_pieces() wins once called.
// A module loaded in pieces has no single CUmodule: module::handle() is null for it (load_options::pieces
// = off for one that has). enum class jit_pieces is declared above load_options.
FATPACK_API void set_jit_pieces(jit_pieces mode);
FATPACK_API jit_pieces get_jit_pieces();
// JIT threads (default: hardware threads, or FATPACK_JIT_THREADS). Takes effect before the first JIT.
FATPACK_API void set_jit_threads(unsigned n);

// Log level: FATPACK_LOG=off|error|warn|info|debug. Default (unset, and never set here): off, except
// one line for the first warning of the process, naming how to see all (warn) or none (off); an
// explicit level, `off` included, replaces that. Lines go to stderr, or to the
// callback when one is set (then nothing goes to stderr). The callback is called with the log's own
// lock held (one line at a time), so it must not call back into fatpack; no other fatpack lock is
// held then, and a JIT pool thread calls it only after its task is done, so it may take the
// application's locks, even ones the application holds while calling fatpack (docs/runtime.md §6).
// A callback that throws loses the lines held back meanwhile. set_log_callback(nullptr) restores stderr.
FATPACK_API void set_log_level(log_level level);
FATPACK_API log_level get_log_level();
FATPACK_API void set_log_callback(std::function<void(log_level, std::string_view line)> callback);

}  // namespace fatpack
FATPACK_END_HIDDEN
