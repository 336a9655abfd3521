/* Compiled as C (not C++): the C header must be valid C and usable without any CUDA header. */
#include "fatpack/fatpack.h"

#include <stddef.h>

int fatpack_c_smoke(void) {
  fatpack_module* m = NULL;
  struct CUfunc_st* f = NULL;
  int n = 0;
  if (fatpack_device_count(&n) != FATPACK_OK || n < 1) return 1;
  if (fatpack_load_module("capi_vadd", NULL, -1, &m) != FATPACK_OK) return 2;
  if (fatpack_module_function(m, "saxpy", &f) != FATPACK_OK || f == NULL) return 3;
  fatpack_module_release(m);
  if (fatpack_load_module("capi_does_not_exist", NULL, -1, &m) != FATPACK_ERROR_NOT_FOUND) return 4;
  if (fatpack_last_error()[0] == '\0') return 5;
  return 0;
}
