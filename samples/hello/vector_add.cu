// Vector addition: the kernel of the hello sample (see README.md in this folder). extern "C" keeps
// the kernel's name unmangled, so the host looks it up as "vector_add".
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
