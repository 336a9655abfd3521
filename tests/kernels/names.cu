// Kernels with C++ names, for finding kernels by name (core/src/inputs/kernel_names.cpp, the
// runtime's module::function): templates in a namespace (type, non-type and nested template
// arguments), overloads, pointers/references/cv, an anonymous namespace, a kernel templated on a
// lambda's type, and extern "C" kernels. Compiled with --extended-lambda.
namespace mylib {
template <class T, int N>
__global__ void affine(const T* in, T* out, int n) {
  int i = threadIdx.x;
  if (i < n && i < N) out[i] = in[i] * T(2) + T(1);
}
template __global__ void affine<float, 256>(const float*, float*, int);
template __global__ void affine<double, 128>(const double*, double*, int);

template <class T>
struct vec {
  T x, y;
};
template <class V>
__global__ void nested(V* v, unsigned long n) {
  if (threadIdx.x < n) v[threadIdx.x].x = v[threadIdx.x].y;
}
template __global__ void nested<vec<vec<float>>>(vec<vec<float>>*, unsigned long);

__global__ void scale(float* p, float s) { p[threadIdx.x] *= s; }
__global__ void scale(double* p, double s) { p[threadIdx.x] *= s; }
__global__ void fill(volatile int* p, const int& v) { p[threadIdx.x] = 0; }
}  // namespace mylib

namespace {
__global__ void hidden(int* p) { p[0] = 1; }
}  // namespace
void launch_hidden(int* p) { hidden<<<1, 1>>>(p); }

template <class F>
__global__ void apply(F f, float* p) { p[threadIdx.x] = f(p[threadIdx.x]); }
void launch_apply(float* p) {
  auto twice = [] __device__(float x) { return 2 * x; };
  apply<<<1, 1>>>(twice, p);
}

extern "C" __global__ void plain_c(float* p) { p[0] = 0; }
extern "C" __global__ void scale_c(float* p, float s) { p[threadIdx.x] *= s; }
