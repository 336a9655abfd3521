/* Compiled as C (not C++): the C header must be valid C and usable without any CUDA header. */
#include "fatpack/fatpack.h"

#include <stddef.h>
#include <string.h>

int fatpack_c_smoke(void) {
  fatpack_module* m = NULL;
  struct CUfunc_st* f = NULL;
  int n = 0;
  if (fatpack_set_background_upgrade(0) != FATPACK_OK) return 1;
  /* The fleet cache: an unknown scheme and a read-write remote without a key are refused. */
  if (fatpack_set_cache_remote("ftp://host/x", 0, NULL, 0) != FATPACK_ERROR_INVALID_ARGUMENT) return 40;
  if (fatpack_set_cache_remote("http://127.0.0.1:9/x", 1, NULL, 0) != FATPACK_ERROR_INVALID_ARGUMENT) return 41;
  if (fatpack_set_cache_remote(NULL, 0, NULL, 0) != FATPACK_OK) return 42;
  if (fatpack_device_count(&n) != FATPACK_OK || n < 1) return 1;
  if (fatpack_load_module("capi_vadd", NULL, -1, &m) != FATPACK_OK) return 2;
  if (fatpack_module_function(m, "saxpy", &f) != FATPACK_OK || f == NULL) return 3;
  fatpack_module_release(m);
  if (fatpack_load_module("capi_does_not_exist", NULL, -1, &m) != FATPACK_ERROR_NOT_FOUND) return 4;
  if (fatpack_last_error()[0] == '\0') return 5;
  /* Versioned structs through the C initializers. */
  {
    fatpack_device_info info = FATPACK_DEVICE_INFO_INIT;
    fatpack_cache_stats stats = FATPACK_CACHE_STATS_INIT;
    if (info.struct_size != sizeof info || info.name[0] != '\0') return 6;
    if (fatpack_get_device_info(0, &info) != FATPACK_OK || info.name[0] == '\0' || info.cc_major < 1) return 7;
    info.struct_size = sizeof info - 1;
    if (fatpack_get_device_info(0, &info) != FATPACK_ERROR_INVALID_ARGUMENT) return 8;
    if (stats.struct_size != sizeof stats) return 9;
    if (fatpack_get_cache_stats(&stats) != FATPACK_OK) return 10;
    stats.struct_size = 0;
    if (fatpack_get_cache_stats(&stats) != FATPACK_ERROR_INVALID_ARGUMENT) return 11;
  }
  /* The version macros and functions. */
  if (fatpack_version() != FATPACK_VERSION_NUMBER) return 12;
  if (strcmp(fatpack_version_string(), FATPACK_VERSION_STRING) != 0) return 13;
  /* The cache mode as a number and as a name. */
  if (strcmp(fatpack_cache_mode(), fatpack_cache_mode_name(fatpack_cache_get_mode())) != 0) return 14;
  return 0;
}
