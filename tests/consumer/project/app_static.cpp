// Kernels in static libraries, linked without WHOLE_ARCHIVE: directly (static_direct), through
// another static library (static_outer <- static_inner), and inside a shared library that links a
// static one (shared_from_static <- static_for_shared; the shared library does not link the
// runtime). Each package must be registered and its module load on the fake driver's device.
#include <fatpack/fatpack.hpp>

#include <cstdio>

extern "C" int static_direct_version();
extern "C" int static_outer_version();
extern "C" int shared_from_static_version();

int main() {
  if (static_direct_version() != 1 || static_outer_version() != 3 || shared_from_static_version() != 5) return 1;
  struct want {
    const char* package;
    const char* module;
  };
  bool ok = true;
  for (want w : {want{"static_direct_kernels", "negate"}, want{"static_inner_kernels", "saxpy"},
                 want{"shared_static_kernels", "vadd"}}) {
    fatpack::load_options o;
    o.package = w.package;
    auto m = fatpack::load_module(w.module, o);
    if (!m) {
      std::fprintf(stderr, "app_static: %s\n", m.error().what());
      ok = false;
      continue;
    }
    std::printf("app_static: %s/%s: entry %s\n", w.package, w.module, m->report().target.c_str());
  }
  std::printf("app_static: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
