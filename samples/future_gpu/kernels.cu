// The future-gpu sample's kernels. poly evaluates a degree-24 polynomial per element (Horner), so
// there is a little more code for the JIT than in a vector add.
extern "C" __global__ void poly(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i], acc = 0.0f;
#pragma unroll
  for (int k = 24; k >= 0; --k) acc = acc * v + 1.0f / float(k + 1);
  y[i] = acc;
}
