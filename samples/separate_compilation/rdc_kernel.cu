// The kernel: it calls rdc_scale, which rdc_device.cu defines. Compiled with -rdc=true, each file
// alone is incomplete; fatpack links them (nvcc -dlink for SASS, the driver's JIT for PTX).
__device__ float rdc_scale(float x);

extern "C" __global__ void rdc_saxpy(float alpha, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = rdc_scale(alpha * x[i]) + y[i];
}
