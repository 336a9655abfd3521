/* fatpack runtime, C API: the same runtime as <fatpack/fatpack.hpp> for C products.
 *
 * Conventions: every function that can fail returns a fatpack_status (FATPACK_OK = 0); the message of
 * the calling thread's last failure is fatpack_last_error() (valid until that thread's next fatpack
 * call). Handles are opaque; fatpack_module_release(NULL) is a no-op. No CUDA header is included: the
 * handle types are cuda.h's own (`struct CUfunc_st*` is CUfunction), so a kernel obtained here can be
 * passed straight to cuLaunchKernel.
 *
 *   fatpack_module* m;
 *   if (fatpack_load_module("vadd", NULL, -1, &m) != FATPACK_OK) { fputs(fatpack_last_error(), stderr); }
 *   struct CUfunc_st* f;
 *   fatpack_module_function(m, "vadd", &f);
 *   ... cuLaunchKernel(f, ...) ...
 *   fatpack_module_release(m);
 *
 * Structs the caller passes in or out start with `size_t struct_size`, which the caller sets to
 * sizeof the struct it was compiled with (the *_INIT macros do that and zero the rest). The library
 * reads it and never writes it: it fills only the fields that fit in struct_size and leaves bytes
 * beyond its own struct untouched; a struct_size smaller than the first version of the struct is
 * refused with FATPACK_ERROR_INVALID_ARGUMENT. So a program built against an older or newer header
 * keeps working with this library.
 *
 *   fatpack_device_info info = FATPACK_DEVICE_INFO_INIT;
 *   fatpack_get_device_info(0, &info);
 *
 * Every function here is FATPACK_API (fatpack/export.h); a shared library that links the runtime
 * exports none of them unless it asks to (docs/runtime.md "Symbols").
 */
#ifndef FATPACK_FATPACK_H
#define FATPACK_FATPACK_H

#include "fatpack/export.h"
#include "fatpack/version.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUfunc_st;
struct CUmod_st;
struct CUctx_st;
struct CUlib_st;
struct CUkern_st;

/* Same numbers as fatpack::errc. */
typedef enum fatpack_status {
  FATPACK_OK = 0,
  FATPACK_ERROR_NO_DRIVER = 1,
  FATPACK_ERROR_DRIVER_TOO_OLD = 2,
  FATPACK_ERROR_DRIVER_SYMBOL_MISSING = 3,
  FATPACK_ERROR_NO_DEVICE = 4,
  FATPACK_ERROR_INVALID_DEVICE = 5,
  FATPACK_ERROR_NO_PACKAGES = 6,
  FATPACK_ERROR_NOT_FOUND = 7,
  FATPACK_ERROR_AMBIGUOUS = 8,
  FATPACK_ERROR_NO_COMPATIBLE_ENTRY = 9,
  FATPACK_ERROR_LOAD_FAILED = 10,
  FATPACK_ERROR_JIT_FAILED = 11,
  FATPACK_ERROR_BAD_PACKAGE = 12,
  FATPACK_ERROR_IO = 13,
  FATPACK_ERROR_INVALID_ARGUMENT = 14,
  FATPACK_ERROR_CUDA = 15
} fatpack_status;

typedef enum fatpack_policy {
  FATPACK_POLICY_PREFER_SASS = 0,
  FATPACK_POLICY_FORCE_PTX = 1,
  FATPACK_POLICY_SASS_ONLY = 2,
  FATPACK_POLICY_DEFAULT = -1 /* the process policy (set_policy + environment) */
} fatpack_policy;

typedef struct fatpack_module fatpack_module;

/* The cache's mode, as fatpack_cache_get_mode() reports it (same numbers as fatpack::cache_mode). */
typedef enum fatpack_cache_mode_id {
  FATPACK_CACHE_MODE_READ_WRITE = 0,  /* "read-write": the per-user cache is used and written */
  FATPACK_CACHE_MODE_READ_ONLY = 1,   /* "read-only": entries are read, nothing is written */
  FATPACK_CACHE_MODE_MEMORY_ONLY = 2, /* "memory-only": no usable directory; SASS is kept in memory */
  FATPACK_CACHE_MODE_DISABLED = 3     /* "disabled": FATPACK_CACHE_DISABLE */
} fatpack_cache_mode_id;

typedef struct fatpack_device_info {
  size_t struct_size;     /* set by the caller: sizeof(fatpack_device_info) (FATPACK_DEVICE_INFO_INIT) */
  int ordinal;
  int cc_major, cc_minor;
  int integrated;
  int driver_version;     /* 13000 = CUDA 13.0 */
  char max_ptx_isa[16];   /* "9.0" */
  char name[256];
  unsigned char uuid[16];
} fatpack_device_info;

/* Zero-initialized, struct_size set: `fatpack_device_info info = FATPACK_DEVICE_INFO_INIT;`. */
#ifdef __cplusplus
#define FATPACK_ZERO_INIT_ {}
#else
#define FATPACK_ZERO_INIT_ {0}
#endif
static inline fatpack_device_info fatpack_device_info_init(void) {
  fatpack_device_info info = FATPACK_ZERO_INIT_;
  info.struct_size = sizeof info;
  return info;
}
#define FATPACK_DEVICE_INFO_INIT fatpack_device_info_init()

/* The runtime's version: MAJOR*10000 + MINOR*100 + PATCH (100 for 0.1.0), the same as the
 * FATPACK_VERSION_NUMBER of the headers it was built with; compare with FATPACK_VERSION_NUMBER to find
 * a program compiled against other headers. fatpack_version_string(): "0.1.0" (static storage). */
FATPACK_API int fatpack_version(void);
FATPACK_API const char* fatpack_version_string(void);

/* "FATPACK_ERROR_NO_DRIVER", ... */
FATPACK_API const char* fatpack_status_name(fatpack_status status);
/* The calling thread's last error message ("" if none). Includes the JIT log when there is one. */
FATPACK_API const char* fatpack_last_error(void);
/* The CUresult behind the calling thread's last error (0 if none). */
FATPACK_API int fatpack_last_cuda_status(void);

FATPACK_API fatpack_status fatpack_init(void);
FATPACK_API fatpack_status fatpack_driver_version(int* version);
FATPACK_API fatpack_status fatpack_device_count(int* count);
/* info->struct_size must be set (FATPACK_DEVICE_INFO_INIT); below sizeof the first version of the
 * struct: FATPACK_ERROR_INVALID_ARGUMENT. */
FATPACK_API fatpack_status fatpack_get_device_info(int ordinal, fatpack_device_info* info);
/* cuGetProcAddress through the driver fatpack loaded; cuda_version: CUDA_VERSION of the cuda.h whose
 * declarations the result is cast to (13000 for cuda.h 13.0: 12000 gives cuCtxCreate's CUDA 12 ABI);
 * 0: 13000, or the driver's own version where the driver is older. */
FATPACK_API fatpack_status fatpack_driver_entry_point(const char* symbol, int cuda_version, void** fn);

FATPACK_API fatpack_status fatpack_add_package_file(const char* path);
/* copy != 0: fatpack copies the bytes; otherwise they must stay valid and unchanged. */
FATPACK_API fatpack_status fatpack_add_package_memory(const void* data, size_t size, int copy);
/* A bare cubin / PTX / nvcc fatbin buffer; package_name may be NULL (then the module name). */
FATPACK_API fatpack_status fatpack_add_image(const void* data, size_t size, const char* module_name, const char* package_name);

FATPACK_API fatpack_status fatpack_set_policy(fatpack_policy policy);
/* Newer code in the background (as fatpack::set_background_upgrade): on != 0 turns it on, 0 off. */
FATPACK_API fatpack_status fatpack_set_background_upgrade(int on);
/* Kernel-granular JIT (as fatpack::set_jit_pieces). */
typedef enum { FATPACK_JIT_PIECES_OFF = 0, FATPACK_JIT_PIECES_ON_DEMAND = 1, FATPACK_JIT_PIECES_BACKGROUND = 2 } fatpack_jit_pieces;
FATPACK_API fatpack_status fatpack_set_jit_pieces(int mode); /* a fatpack_jit_pieces value */

/* package may be NULL (any package); device -1: the current context's device, else 0. The module goes
 * into the calling thread's current context when it has one on that device (the application's own
 * context), else into the device's primary context, which then becomes current on a thread that had
 * no context. A thread that had one keeps it. */
FATPACK_API fatpack_status fatpack_load_module(const char* module_name, const char* package, int device, fatpack_module** out);
FATPACK_API fatpack_status fatpack_load_module_with_policy(const char* module_name, const char* package, int device,
                                                           fatpack_policy policy, fatpack_module** out);
FATPACK_API void fatpack_module_release(fatpack_module* module);
/* kernel: the symbol ("vadd", "_ZN5mylib5scaleEPff") or the C++ name ("mylib::scale(float*, float)",
 * "mylib::affine<float, 256>"); FATPACK_ERROR_AMBIGUOUS when several kernels have that name. */
FATPACK_API fatpack_status fatpack_module_function(const fatpack_module* module, const char* kernel, struct CUfunc_st** out);
FATPACK_API struct CUmod_st* fatpack_module_handle(const fatpack_module* module);
FATPACK_API struct CUctx_st* fatpack_module_context(const fatpack_module* module);
/* FATPACK_OK while the module's context exists; FATPACK_ERROR_CUDA (fatpack_last_cuda_status() 709,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED) once the application destroyed it: the module went with it.
 * fatpack_module_function then fails the same way; fatpack_module_release stays safe. */
FATPACK_API fatpack_status fatpack_module_check(const fatpack_module* module);
FATPACK_API int fatpack_module_device(const fatpack_module* module);
/* The load report as FATPACK_LOG=info text; valid while the module handle lives. */
FATPACK_API const char* fatpack_module_report(const fatpack_module* module);
/* Whether the loaded entry came through the JIT (1) or was SASS (0). */
FATPACK_API int fatpack_module_jit(const fatpack_module* module);

/* Which code a module loaded (the numbers of fatpack::variant_kind). */
typedef enum fatpack_variant_kind {
  FATPACK_VARIANT_NONE = 0,
  FATPACK_VARIANT_EXACT_SASS = 1,          /* SASS for exactly the device's CC */
  FATPACK_VARIANT_LOWER_MINOR_SASS = 2,    /* SASS of the same major, lower minor (sm_80 on CC 8.6) */
  FATPACK_VARIANT_ARCH_SPECIFIC_SASS = 3,  /* `a` SASS (sm_90a) */
  FATPACK_VARIANT_FAMILY_SASS = 4,         /* `f` SASS (sm_100f) */
  FATPACK_VARIANT_PTX_JIT = 5              /* PTX compiled by the JIT for the device */
} fatpack_variant_kind;

typedef struct fatpack_variant {
  size_t struct_size;     /* set by the caller: sizeof(fatpack_variant) (FATPACK_VARIANT_INIT) */
  int kind;               /* a fatpack_variant_kind */
  unsigned arch;          /* the entry's architecture: 80 for sm_80 and compute_80 */
  unsigned device_arch;   /* the device's CC, major*10+minor */
  char target[32];        /* "sm_90", "sm_90a", "compute_80" */
  char ptx_isa[16];       /* PTX: "9.0"; "" for SASS */
} fatpack_variant;
static inline fatpack_variant fatpack_variant_init(void) {
  fatpack_variant v = FATPACK_ZERO_INIT_;
  v.struct_size = sizeof v;
  return v;
}
#define FATPACK_VARIANT_INIT fatpack_variant_init()

/* The variant the module runs (kernel NULL), or the kernel's (its module's, after looking it up:
 * FATPACK_ERROR_NOT_FOUND when the module has no such kernel). out->struct_size as for
 * fatpack_get_device_info. */
FATPACK_API fatpack_status fatpack_module_variant(const fatpack_module* module, const char* kernel, fatpack_variant* out);
/* "exact SASS", "lower-minor SASS", "arch-specific SASS", "family SASS", "PTX through the JIT", "none". */
FATPACK_API const char* fatpack_variant_kind_name(int kind);

/* A __constant__ / __device__ variable: its device address (a CUdeviceptr) and size (either may be
 * NULL); set/get copy `size` bytes from/to host memory in the module's context after checking that
 * `size` is the variable's size (FATPACK_ERROR_INVALID_ARGUMENT naming both otherwise). */
FATPACK_API fatpack_status fatpack_module_global(const fatpack_module* module, const char* name,
                                                 unsigned long long* address, size_t* size);
FATPACK_API fatpack_status fatpack_module_set_global(const fatpack_module* module, const char* name, const void* data,
                                                     size_t size);
FATPACK_API fatpack_status fatpack_module_get_global(const fatpack_module* module, const char* name, void* data,
                                                     size_t size);

/* Queues background compiles of every module every device needs (device -1: all devices) and
 * returns at once; fatpack_warm_wait() waits for everything queued so far. */
FATPACK_API fatpack_status fatpack_warm_all(int device);
FATPACK_API fatpack_status fatpack_warm_wait(void);

/* The JIT cache (docs/cache.md): this process's counters. */
typedef struct fatpack_cache_stats {
  size_t struct_size;     /* set by the caller: sizeof(fatpack_cache_stats) (FATPACK_CACHE_STATS_INIT) */
  uint64_t hits_exact;
  uint64_t hits_other_driver;
  uint64_t misses;
  uint64_t jits;
  double jit_ms;
  uint64_t refreshes;
  uint64_t bytes_read;
  uint64_t bytes_written;
  uint64_t stores;
  uint64_t evictions;
  uint64_t rejected;
  uint64_t waited;
  uint64_t lock_timeouts;
  uint64_t io_errors;
} fatpack_cache_stats;

/* `fatpack_cache_stats s = FATPACK_CACHE_STATS_INIT;` */
static inline fatpack_cache_stats fatpack_cache_stats_init(void) {
  fatpack_cache_stats stats = FATPACK_ZERO_INIT_;
  stats.struct_size = sizeof stats;
  return stats;
}
#define FATPACK_CACHE_STATS_INIT fatpack_cache_stats_init()

/* out->struct_size as for fatpack_get_device_info. */
FATPACK_API fatpack_status fatpack_get_cache_stats(fatpack_cache_stats* out);
/* The per-user cache directory ("" when none); valid until this thread's next fatpack_cache_path(). */
FATPACK_API const char* fatpack_cache_path(void);
/* The cache's mode, and its name ("read-write", "read-only", "memory-only", "disabled"; static
 * storage). fatpack_cache_mode() is fatpack_cache_mode_name(fatpack_cache_get_mode()). */
FATPACK_API fatpack_cache_mode_id fatpack_cache_get_mode(void);
FATPACK_API const char* fatpack_cache_mode(void);
/* "read-write", ...; "unknown" for a number that is no fatpack_cache_mode_id. */
FATPACK_API const char* fatpack_cache_mode_name(int mode);
/* A read-only cache layer searched before the per-user cache. */
FATPACK_API fatpack_status fatpack_add_prebuilt_cache(const char* directory);
/* The fleet cache (as fatpack::set_cache_remote, docs/cache.md §12): `url` (NULL or "" removes the
 * remote), read_write != 0 to upload what this process compiles, `key_file` the signing key (NULL:
 * none; a read-write remote then needs trust_all_writers != 0). Timeouts and the rest: the defaults. */
FATPACK_API fatpack_status fatpack_set_cache_remote(const char* url, int read_write, const char* key_file,
                                                    int trust_all_writers);
/* Waits for background re-JITs after other-driver hits. */
FATPACK_API fatpack_status fatpack_cache_wait_refresh(void);

/* ---- One-line ports of driver-API code -------------------------------------------------------
 * The shape of cuModuleLoadData / cuModuleLoadDataEx / cuModuleUnload, for the same image bytes (a
 * cubin, PTX text, or an nvcc fatbin): replace `cuModuleLoadData` with `fatpackModuleLoadData` (and
 * `cuModuleUnload` with `fatpackModuleUnload`) and the image goes through fatpack's selection (a
 * fatbin's best entry for the device), JIT and cache. The module goes into the calling thread's current
 * context (a thread with none: the device's primary context, then current, as for
 * fatpack_load_module). Returns a CUresult value (0 = CUDA_SUCCESS); the message is in
 * fatpack_last_error() and, for the Ex form, in the caller's CU_JIT_ERROR_LOG_BUFFER.
 *
 * Like the driver's, these get no size: it is read from the image itself (the ELF headers of a
 * cubin; the header of an nvcc fatbin's first container; PTX up to its terminating NUL), never more
 * than 1 GiB. fatpack copies the image (once per distinct image, kept for the process), so the caller
 * may free it when the call returns. The module stays loaded until fatpackModuleUnload (one per
 * successful load) or the context's destruction; call fatpackModuleUnload, never cuModuleUnload,
 * on it. The Ex form's JIT options are ignored (fatpack chooses the JIT's), except
 * CU_JIT_ERROR_LOG_BUFFER(_SIZE_BYTES); a key the driver does not define, or a count without arrays,
 * is CUDA_ERROR_INVALID_VALUE. `options` is a CUjit_option* and `option_values` a void**. */
FATPACK_API int fatpack_cu_module_load_data(struct CUmod_st** module, const void* image);
FATPACK_API int fatpack_cu_module_load_data_ex(struct CUmod_st** module, const void* image, unsigned int num_options,
                                               void* options, void** option_values);
FATPACK_API int fatpack_cu_module_unload(struct CUmod_st* module);

/* The shape of cuLibraryLoadData / cuLibraryUnload (drivers for CUDA 12.0 and later), for the same
 * image bytes: the returned CUlibrary belongs to no context, and its kernels (cuLibraryGetKernel) run
 * in every context of the device. The entry is selected for one device: that of the calling thread's
 * current context, else device 0 (a GPU of another CC may have no binary in it; load one library
 * while a context of that device is current). Size, copy and errors as above; call
 * fatpackLibraryUnload, never cuLibraryUnload, on the handle (one per successful load).
 * `jit_options` is a CUjit_option*, `library_options` a CUlibraryOption*. JIT options: as for the Ex
 * form above (a key the driver does not define: CUDA_ERROR_INVALID_VALUE). Library options:
 * CU_LIBRARY_BINARY_IS_PRESERVED is accepted and changes nothing (fatpack hands the driver its own
 * copy, so the caller's bytes may go at once either way); CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE
 * is refused with CUDA_ERROR_NOT_SUPPORTED; any other key is CUDA_ERROR_INVALID_VALUE. Without
 * cuLibraryLoadData in the driver: CUDA_ERROR_NOT_SUPPORTED. */
FATPACK_API int fatpack_cu_library_load_data(struct CUlib_st** library, const void* code, void* jit_options,
                                             void** jit_option_values, unsigned int num_jit_options,
                                             void* library_options, void** library_option_values,
                                             unsigned int num_library_options);
FATPACK_API int fatpack_cu_library_unload(struct CUlib_st* library);

/* ---- run-time compilation (docs/nvrtc.md; the C++ API is fatpack/compile.hpp) ------------------
 * CUDA C++ source compiled with NVRTC (dlopen-ed: FATPACK_LIBNVRTC, else libnvrtc.so.13, then .12)
 * for one device and loaded as a library; the SASS is kept in fatpack's cache under a key of the
 * source, headers, files reachable through #include, options, name expressions, target and NVRTC's
 * identity, so a later process loads it without loading NVRTC.
 *
 *   const char* names[] = {"scale<float>"};
 *   fatpack_compile_args args = FATPACK_COMPILE_ARGS_INIT;
 *   args.source = src;  args.name_expressions = names;  args.num_name_expressions = 1;
 *   fatpack_program* p;
 *   if (fatpack_compile(&args, &p) != FATPACK_OK) fputs(fatpack_last_error(), stderr);  // with NVRTC's log
 *   struct CUkern_st* k;  fatpack_program_kernel(p, "scale<float>", &k);
 *   ... cuLaunchKernel((CUfunction)k, ...) ...;  fatpack_program_release(p);
 */
typedef enum fatpack_compile_path_id {
  FATPACK_COMPILE_CACHE_HIT = 0,   /* SASS from the source cache; NVRTC not loaded */
  FATPACK_COMPILE_NVRTC_SASS = 1,  /* NVRTC compiled SASS for the device */
  FATPACK_COMPILE_NVRTC_PTX = 2    /* NVRTC compiled PTX; fatpack's JIT made the SASS */
} fatpack_compile_path_id;

typedef struct fatpack_compile_args {
  size_t struct_size;                     /* set by the caller: sizeof(fatpack_compile_args) (FATPACK_COMPILE_ARGS_INIT) */
  const char* source;                     /* NUL-terminated CUDA C++ */
  const char* name;                       /* program name (file name in NVRTC's log); NULL: "program.cu" */
  const char* const* header_names;        /* num_headers headers given as contents */
  const char* const* header_contents;
  size_t num_headers;
  const char* const* include_paths;       /* passed as -I; their files are in the key */
  size_t num_include_paths;
  const char* const* options;             /* NVRTC options, without -arch */
  size_t num_options;
  const char* const* name_expressions;    /* "scale<float>" */
  size_t num_name_expressions;
  int device;                             /* -1: the current context's device, else 0 (the INIT macro sets -1) */
  int no_cache;                           /* 1: compile and store nothing even when the cache has it */
} fatpack_compile_args;
static inline fatpack_compile_args fatpack_compile_args_init(void) {
  fatpack_compile_args a = FATPACK_ZERO_INIT_;
  a.struct_size = sizeof a;
  a.device = -1;
  return a;
}
#define FATPACK_COMPILE_ARGS_INIT fatpack_compile_args_init()

typedef struct fatpack_program fatpack_program;

/* Compiles and loads; on failure fatpack_last_error() has the message and NVRTC's log (file:line).
 * FATPACK_ERROR_NO_DRIVER when NVRTC (or the driver) is missing: the message names what to install. */
FATPACK_API fatpack_status fatpack_compile(const fatpack_compile_args* args, fatpack_program** out);
FATPACK_API void fatpack_program_release(fatpack_program* program);
/* cuLibraryGetKernel by name expression, symbol or C++ name ("scale<float>"). */
FATPACK_API fatpack_status fatpack_program_kernel(const fatpack_program* program, const char* name,
                                                  struct CUkern_st** out);
FATPACK_API struct CUlib_st* fatpack_program_library(const fatpack_program* program);
FATPACK_API int fatpack_program_path(const fatpack_program* program);  /* a fatpack_compile_path_id, -1 for NULL */
/* "path=NVRTC SASS\ntarget=sm_90\nreason=...\n": one line per field (path, target, reason, compiler,
 * nvrtc_version, cache_key, stored, not_cached, dependencies (the count, then a "dependency=PATH" line
 * per file, control bytes shown as '?'), nvrtc_ms, total_ms, locate_ms, scan_ms, lookup_ms,
 * register_ms, load_ms), then, when NVRTC
 * warned, "log=" and its lines last; compile_report in <fatpack/compile.hpp> says what each means.
 * Valid while the handle lives. */
FATPACK_API const char* fatpack_program_report(const fatpack_program* program);

#ifdef __cplusplus
}

/* In C++ the result converts to CUresult (an enum, which this header cannot name) and to int, and
 * compares with CUresult values, so that `CUresult r = fatpackModuleLoadData(&m, image);`,
 * `if (fatpackModuleLoadData(&m, image) != CUDA_SUCCESS)` and checkCudaErrors(...) compile unchanged. */
#include <type_traits>
namespace fatpack {
struct cu_result {
  int value;
  template <class E, class = typename std::enable_if<std::is_enum<E>::value>::type>
  operator E() const { return static_cast<E>(value); }
  operator int() const { return value; }
  template <class E, class = typename std::enable_if<std::is_enum<E>::value>::type>
  friend bool operator==(cu_result a, E b) { return a.value == static_cast<int>(b); }
  template <class E, class = typename std::enable_if<std::is_enum<E>::value>::type>
  friend bool operator==(E b, cu_result a) { return a.value == static_cast<int>(b); }
  template <class E, class = typename std::enable_if<std::is_enum<E>::value>::type>
  friend bool operator!=(cu_result a, E b) { return a.value != static_cast<int>(b); }
  template <class E, class = typename std::enable_if<std::is_enum<E>::value>::type>
  friend bool operator!=(E b, cu_result a) { return a.value != static_cast<int>(b); }
};
}  /* namespace fatpack */
inline fatpack::cu_result fatpackModuleLoadData(struct CUmod_st** module, const void* image) {
  return {fatpack_cu_module_load_data(module, image)};
}
inline fatpack::cu_result fatpackModuleLoadDataEx(struct CUmod_st** module, const void* image, unsigned int num_options,
                                                  void* options, void** option_values) {
  return {fatpack_cu_module_load_data_ex(module, image, num_options, options, option_values)};
}
inline fatpack::cu_result fatpackModuleUnload(struct CUmod_st* module) { return {fatpack_cu_module_unload(module)}; }
inline fatpack::cu_result fatpackLibraryLoadData(struct CUlib_st** library, const void* code, void* jit_options,
                                                 void** jit_option_values, unsigned int num_jit_options,
                                                 void* library_options, void** library_option_values,
                                                 unsigned int num_library_options) {
  return {fatpack_cu_library_load_data(library, code, jit_options, jit_option_values, num_jit_options, library_options,
                                       library_option_values, num_library_options)};
}
inline fatpack::cu_result fatpackLibraryUnload(struct CUlib_st* library) { return {fatpack_cu_library_unload(library)}; }
#else
static inline int fatpackModuleLoadData(struct CUmod_st** module, const void* image) {
  return fatpack_cu_module_load_data(module, image);
}
static inline int fatpackModuleLoadDataEx(struct CUmod_st** module, const void* image, unsigned int num_options,
                                          void* options, void** option_values) {
  return fatpack_cu_module_load_data_ex(module, image, num_options, options, option_values);
}
static inline int fatpackModuleUnload(struct CUmod_st* module) { return fatpack_cu_module_unload(module); }
static inline int fatpackLibraryLoadData(struct CUlib_st** library, const void* code, void* jit_options,
                                         void** jit_option_values, unsigned int num_jit_options, void* library_options,
                                         void** library_option_values, unsigned int num_library_options) {
  return fatpack_cu_library_load_data(library, code, jit_options, jit_option_values, num_jit_options, library_options,
                                      library_option_values, num_library_options);
}
static inline int fatpackLibraryUnload(struct CUlib_st* library) { return fatpack_cu_library_unload(library); }
#endif

#endif /* FATPACK_FATPACK_H */
