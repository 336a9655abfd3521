// Test kernels for typed launches and globals (tests/runtime/context_test.cpp): parameters of mixed
// sizes and alignments, a __constant__ struct and a __device__ counter. Small on purpose.
struct affine_params {
  float scale;
  float offset;
  int count;
};

__constant__ affine_params c_affine;
__device__ unsigned d_launches;

// y[i] = x[i] * scale + offset over c_affine.count elements; counts its launches.
extern "C" __global__ void affine(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) atomicAdd(&d_launches, 1u);
  if (i < c_affine.count) y[i] = x[i] * c_affine.scale + c_affine.offset;
}

// out[i] = a[i] * c + d over n elements: offsets 0, 8, 16, 24, 32 (a char and a double in between).
extern "C" __global__ void mix(const float* a, char c, double d, int n, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(a[i] * c + d);
}
