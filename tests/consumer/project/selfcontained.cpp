// A library that uses fatpack internally: it links the runtime and loads its own package.
#include <fatpack/fatpack.hpp>

#include <cstdio>

extern "C" int selfcontained_check() {
  fatpack::load_options o;
  o.package = "self_kernels";
  auto m = fatpack::load_module("vadd", o);
  if (!m) {
    std::fprintf(stderr, "selfcontained: %s\n", m.error().what());
    return 1;
  }
  std::printf("selfcontained: self_kernels/vadd: entry %s\n", m->report().target.c_str());
  return m->function("vadd") ? 0 : 1;
}
