#include "scale_factor.h"  // from INCLUDE_DIRECTORIES; an edit to it rebuilds this module (nvcc depfile)
extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= SCALE_FACTOR * SCALE_EXTRA;
}
