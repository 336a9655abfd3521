// The templates sample's kernels: a function template in a namespace, instantiated for two element
// types and block sizes, reading its coefficients from __constant__ memory that the host sets
// through fatpack (module::set_global).

// At global scope, so that its symbol is its plain name ("c_affine"); a variable inside a namespace
// gets a mangled symbol (_ZN4demo8c_affineE), which global() would need instead.
struct affine_coefficients {
  double scale;
  double offset;
};
__constant__ affine_coefficients c_affine;

namespace demo {

// y[i] = x[i] * scale + offset for i < n, Block threads per block.
template <class T, int Block>
__global__ void __launch_bounds__(Block) affine(const T* x, T* y, int n) {
  const int i = blockIdx.x * Block + threadIdx.x;
  if (i < n) y[i] = static_cast<T>(x[i] * c_affine.scale + c_affine.offset);
}

// The instantiations the program launches.
template __global__ void affine<float, 256>(const float*, float*, int);
template __global__ void affine<double, 128>(const double*, double*, int);

}  // namespace demo
