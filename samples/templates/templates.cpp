// templates: a function template in a namespace (demo::affine<T, Block>, affine.cu), instantiated for
// float and double, reading its coefficients from __constant__ memory. The program sets the
// coefficients through fatpack (set_global, which checks the host object's size against the
// variable's), looks each instantiation up with its argument types (checked against the kernel's
// real parameters) and launches it with values; the results are checked against the CPU. It also
// prints which variant of the code this GPU runs (exact SASS, lower-minor SASS, `a`/`f` SASS, or PTX
// through the JIT). See README.md.
#include "sample.hpp"

#include <cmath>
#include <vector>

namespace {

// The same layout as affine.cu's affine_coefficients.
struct affine_coefficients {
  double scale;
  double offset;
};

// ---- kernel names --------------------------------------------------------------------------------
// The instantiations by their C++ names; the runtime finds the symbols nvcc gave them
// (_ZN4demo6affineIfLi256EEEvPKT_PS1_i, ...), which would be accepted as well.
constexpr const char* k_affine_float_256 = "demo::affine<float, 256>";
constexpr const char* k_affine_double_128 = "demo::affine<double, 128>";

// Runs demo::affine<T, Block> over n elements and compares with the CPU; "" when they match.
template <class T, unsigned Block>
std::string run(const fatpack::module& m, const char* name, const sample::driver& cu, const affine_coefficients& c,
                int n) {
  auto kernel = m.kernel<const T*, T*, int>(name);
  if (!kernel) return kernel.error().what();
  std::string err;
  std::vector<T> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<T>(i % 1000) * static_cast<T>(0.125) - static_cast<T>(40);
  const std::size_t bytes = sizeof(T) * n;
  sample::device_buffer dx(cu, bytes, err), dy(cu, bytes, err);
  if (!dx || !dy) return err;
  if (!cu.check(cu.memcpy_htod(dx.get(), x.data(), bytes), "cuMemcpyHtoD", err)) return err;
  if (fatpack::status s = kernel->launch((n + Block - 1) / Block, Block, 0, nullptr, dx.as<const T>(), dy.as<T>(), n); !s)
    return s.error().what();
  if (!cu.check(cu.ctx_synchronize(), "cuCtxSynchronize", err) ||
      !cu.check(cu.memcpy_dtoh(y.data(), dy.get(), bytes), "cuMemcpyDtoH", err))
    return err;
  for (int i = 0; i < n; ++i) {
    const T want = static_cast<T>(x[i] * c.scale + c.offset);
    if (std::fabs(double(y[i]) - double(want)) > 1e-6 * std::fmax(1.0, std::fabs(double(want))))
      return "mismatch at " + std::to_string(i) + ": GPU " + std::to_string(double(y[i])) + ", CPU " +
             std::to_string(double(want));
  }
  std::printf("ok: %s, %d results match the CPU\n", name, n);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  sample::options opt;
  if (!sample::parse(argc, argv, opt)) return 2;

  fatpack::load_options where;
  where.package = "templates";
  auto module = fatpack::load_module("affine", where);
  if (!module) return sample::fail(opt, module.error());
  sample::print_report(module->report());
  const fatpack::code_variant v = module->variant();
  std::printf("  variant: %s (%s%s%s)\n", fatpack::variant_kind_name(v.kind), v.target.c_str(),
              v.ptx_isa.empty() ? "" : ", PTX ISA ", v.ptx_isa.c_str());

  // The coefficients, in __constant__ memory: set, then read back.
  const affine_coefficients c{2.5, -1.0};
  if (fatpack::status s = module->set_global("c_affine", c); !s) return sample::fail(opt, s.error());
  auto back = module->get_global<affine_coefficients>("c_affine");
  if (!back) return sample::fail(opt, back.error());
  if (back->scale != c.scale || back->offset != c.offset) return sample::fail(opt, "c_affine: read back other values");
  std::printf("c_affine: set to scale %g, offset %g (read back)\n", back->scale, back->offset);

  // Both instantiations, looked up with their argument types (checked against their parameters).
  auto f256 = module->kernel<const float*, float*, int>(k_affine_float_256);
  if (!f256) return sample::fail(opt, f256.error());
  auto d128 = module->kernel<const double*, double*, int>(k_affine_double_128);
  if (!d128) return sample::fail(opt, d128.error());
  std::printf("kernels: %s, %s (arguments %s)\n", f256->name().c_str(), d128->name().c_str(),
              f256->checked() ? "checked against their parameters" : f256->check_note().c_str());
  if (opt.load_only) {
    std::printf("loaded; --load-only: not running the kernels\n");
    return 0;
  }

  auto drv = sample::driver_for(module.value());
  if (!drv) return sample::fail(opt, drv.error());
  const int n = 1 << 20;
  std::string err = run<float, 256>(module.value(), k_affine_float_256, drv.value(), c, n);
  if (err.empty()) err = run<double, 128>(module.value(), k_affine_double_128, drv.value(), c, n);
  if (!err.empty()) return sample::fail(opt, err.c_str());
  return 0;
}
