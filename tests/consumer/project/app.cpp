// Loads a module of every package linked into this program (three from this executable, one from
// the carrier shared library) on the fake driver's device and checks the runtime found each by name.
#include <fatpack/fatpack.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

extern "C" int carrier_version();

static bool load(const char* package, const char* module, const char* kernel) {
  fatpack::load_options o;
  o.package = package;
  auto m = fatpack::load_module(module, o);
  if (!m) {
    std::fprintf(stderr, "app: %s\n", m.error().what());
    return false;
  }
  auto f = m->function(kernel);
  if (!f) {
    std::fprintf(stderr, "app: %s\n", f.error().what());
    return false;
  }
  const fatpack::load_report& r = m->report();
  std::printf("app: %s/%s: entry %s%s\n", package, module, r.target.c_str(),
              !r.jit ? "" : r.jit_reused ? " (JIT, SASS reused)" : " (JIT)");
  return true;
}

int main() {
  if (carrier_version() != 1) return 1;
  auto pkgs = fatpack::packages();
  if (!pkgs) {
    std::fprintf(stderr, "app: %s\n", pkgs.error().what());
    return 1;
  }
  for (const char* want : {"app_math", "app_more", "app_sub", "carrier_kernels"}) {
    bool found = std::any_of(pkgs->begin(), pkgs->end(), [&](const fatpack::package_info& p) { return p.name == want; });
    if (!found) {
      std::fprintf(stderr, "app: package '%s' is not registered\n", want);
      return 1;
    }
  }
  bool ok = load("app_math", "vadd", "vadd") && load("app_more", "scale", "scale") &&
            load("app_more", "saxpy", "saxpy") && load("carrier_kernels", "negate", "negate") &&
            load("app_sub", "saxpy", "saxpy");
  std::printf("app: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
