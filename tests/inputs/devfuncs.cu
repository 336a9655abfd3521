// Kernels and non-kernels for the symbol tests: only __global__ functions are kernels. Device
// functions (noinline, C and C++ linkage), a static kernel (a LOCAL symbol in the cubin) and
// template instantiations (mangled names).
__device__ __noinline__ float helper(float x) { return x * 2.0f + 1.0f; }
extern "C" __device__ __noinline__ float chelper(float x) { return x * 3.0f; }

__global__ void kern_cpp(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); }
extern "C" __global__ void kern_c(float* p) { p[threadIdx.x] = chelper(p[threadIdx.x]); }
static __global__ void kern_static(float* p) { p[0] = 1.0f; }
void launch_static(float* p) { kern_static<<<1, 1>>>(p); }

template <class T>
__global__ void kern_tmpl(T* p) { p[0] = T(1); }
template __global__ void kern_tmpl<float>(float*);
template __global__ void kern_tmpl<int>(int*);
