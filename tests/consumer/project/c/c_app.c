/* consumer_pkgconfig: a C program (compiled and linked by cc, not c++) that loads module vadd of
 * package self_kernels through the C API, with the link line pkg-config --static gives. */
#include <fatpack/fatpack.h>
#include <stdio.h>

int main(void) {
  fatpack_module* m = NULL;
  if (fatpack_load_module("vadd", "self_kernels", -1, &m) != FATPACK_OK) {
    fprintf(stderr, "c_app: %s\n", fatpack_last_error());
    return 1;
  }
  fatpack_module_release(m);
  puts("c_app: loaded vadd from self_kernels");
  return 0;
}
