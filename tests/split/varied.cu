// Varied device code for the PTX splitter's test with real nvcc output (split_test.cpp): templates,
// printf (vprintf), assert (__assertfail), device malloc (new), __device__ variables and __constant__
// shared by two kernels or used by one, function pointers (taken directly and through a __device__
// table), virtual functions (a vtable, a call through it), extern shared memory, texture and surface
// objects, and a __noinline__ call graph (helpers called from several kernels).
#include <cassert>
#include <cstdio>

__device__ int counter_shared;  // count_a, count_b
__device__ int counter_alone;   // alone
__constant__ float coeffs[16];  // count_a (through helper), count_b
__constant__ float coeff_alone[4];

__device__ __noinline__ float helper(float x) { return x * coeffs[0]; }
__device__ __noinline__ float leaf(float x) { return x + 1.0f; }
__device__ __noinline__ float twice(float x) { return leaf(x) * 2.0f; }

template <typename T>
__global__ void scale(T* p, T s) { p[threadIdx.x] *= s; }
template __global__ void scale<float>(float*, float);
template __global__ void scale<double>(double*, double);

__global__ void count_a(int* out) { atomicAdd(&counter_shared, 1); out[0] = int(helper(1.0f)); }
__global__ void count_b(int* out) { atomicAdd(&counter_shared, 2); out[1] = int(coeffs[1]); }
__global__ void alone(int* out) { atomicAdd(&counter_alone, 1); out[2] = int(twice(coeff_alone[0])); }
__global__ void says(int v) { printf("value %d\n", v); }
__global__ void checks(const int* p) { assert(p[0] > 0); }
__global__ void twice_k(float* p) { p[0] = twice(p[0]); }

typedef float (*unary)(float);
__device__ __noinline__ float neg(float x) { return -x; }
__device__ __noinline__ float sq(float x) { return x * x; }
__device__ unary table[2] = {neg, sq};
__global__ void via_table(float* p, int i) { p[0] = table[i](p[0]); }
__global__ void via_pointer(float* p, int i) {
  unary f = i ? neg : sq;
  p[0] = f(p[0]);
}

struct Shape {
  __device__ virtual float area() const = 0;
};
struct Square : Shape {
  float s;
  __device__ explicit Square(float v) : s(v) {}
  __device__ float area() const override { return s * s; }
};
__global__ void make_square(Shape** out, float v) { *out = new Square(v); }
__global__ void call_area(Shape* const* s, float* p) { p[0] = (*s)->area(); }

extern __shared__ float dyn[];
__global__ void ext_a(float* p) {
  dyn[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = dyn[0];
}
__global__ void ext_b(float* p) {
  dyn[threadIdx.x] = 2 * p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = dyn[1];
}

__global__ void tex_read(cudaTextureObject_t t, float* p) { p[0] = tex1Dfetch<float>(t, 0); }
__global__ void surf_write(cudaSurfaceObject_t s) { surf2Dwrite(1.0f, s, 0, 0); }
