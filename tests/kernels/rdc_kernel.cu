// Separate compilation test (with rdc_device.cu): the kernel calls a __device__ function defined in
// the other file, so it needs -rdc=true and a device link (nvcc -dlink, or cuLink of both PTX).
__device__ float rdc_scale(float x);

extern "C" __global__ void rdc_saxpy(float alpha, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = rdc_scale(alpha * x[i]) + y[i];
}
