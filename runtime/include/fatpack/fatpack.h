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
 */
#ifndef FATPACK_FATPACK_H
#define FATPACK_FATPACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUfunc_st;
struct CUmod_st;
struct CUctx_st;

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

typedef struct fatpack_device_info {
  int ordinal;
  int cc_major, cc_minor;
  int integrated;
  int driver_version;     /* 13000 = CUDA 13.0 */
  char max_ptx_isa[16];   /* "9.0" */
  char name[256];
  unsigned char uuid[16];
} fatpack_device_info;

/* "FATPACK_ERROR_NO_DRIVER", ... */
const char* fatpack_status_name(fatpack_status status);
/* The calling thread's last error message ("" if none). Includes the JIT log when there is one. */
const char* fatpack_last_error(void);
/* The CUresult behind the calling thread's last error (0 if none). */
int fatpack_last_cuda_status(void);

fatpack_status fatpack_init(void);
fatpack_status fatpack_driver_version(int* version);
fatpack_status fatpack_device_count(int* count);
fatpack_status fatpack_get_device_info(int ordinal, fatpack_device_info* info);
/* cuGetProcAddress through the driver fatpack loaded; cuda_version 12000 for cuda.h 13.0 signatures. */
fatpack_status fatpack_driver_entry_point(const char* symbol, int cuda_version, void** fn);

fatpack_status fatpack_add_package_file(const char* path);
/* copy != 0: fatpack copies the bytes; otherwise they must stay valid and unchanged. */
fatpack_status fatpack_add_package_memory(const void* data, size_t size, int copy);
/* A bare cubin / PTX / nvcc fatbin buffer; package_name may be NULL (then the module name). */
fatpack_status fatpack_add_image(const void* data, size_t size, const char* module_name, const char* package_name);

fatpack_status fatpack_set_policy(fatpack_policy policy);

/* package may be NULL (any package); device -1: the current context's device, else 0. */
fatpack_status fatpack_load_module(const char* module_name, const char* package, int device, fatpack_module** out);
fatpack_status fatpack_load_module_with_policy(const char* module_name, const char* package, int device,
                                               fatpack_policy policy, fatpack_module** out);
void fatpack_module_release(fatpack_module* module);
fatpack_status fatpack_module_function(const fatpack_module* module, const char* kernel, struct CUfunc_st** out);
struct CUmod_st* fatpack_module_handle(const fatpack_module* module);
struct CUctx_st* fatpack_module_context(const fatpack_module* module);
int fatpack_module_device(const fatpack_module* module);
/* The load report as FATPACK_LOG=info text; valid while the module handle lives. */
const char* fatpack_module_report(const fatpack_module* module);
/* Whether the loaded entry came through the JIT (1) or was SASS (0). */
int fatpack_module_jit(const fatpack_module* module);

/* Queues background compiles of every module every device needs (device -1: all devices) and
 * returns at once; fatpack_warm_wait() waits for everything queued so far. */
fatpack_status fatpack_warm_all(int device);
fatpack_status fatpack_warm_wait(void);

/* The JIT cache (docs/cache.md): this process's counters. */
typedef struct fatpack_cache_stats {
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
fatpack_status fatpack_get_cache_stats(fatpack_cache_stats* out);
/* The per-user cache directory ("" when none) and its mode ("read-write", "read-only",
 * "memory-only", "disabled"); valid until the next call from this thread. */
const char* fatpack_cache_path(void);
const char* fatpack_cache_mode(void);
/* A read-only cache layer searched before the per-user cache. */
fatpack_status fatpack_add_prebuilt_cache(const char* directory);
/* Waits for background re-JITs after other-driver hits. */
fatpack_status fatpack_cache_wait_refresh(void);

#ifdef __cplusplus
}
#endif

#endif /* FATPACK_FATPACK_H */
