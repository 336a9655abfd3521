// A plugin that links its own runtime (as plugin.cpp) and embeds a PTX package of several kernels
// (varied.cu's PTX, package plugin_pieces, module varied): loading one kernel leaves the module's
// other pieces compiling on this runtime's JIT pool and their SASS queued for the cache
// (docs/runtime.md "Kernel-granular JIT"). plugin_unload.cpp dlclose()s it at once.
#include <fatpack/fatpack.hpp>

#include <cstdio>

// mode 0: load the module and one kernel, and return (the other pieces compile in the background);
// mode 1: warm() everything, and return without waiting. 0 when done, else 1 with msg set.
extern "C" __attribute__((visibility("default"))) int plugin_pieces_run(int mode, char* msg, std::size_t n) {
  if (mode == 1) {
    auto w = fatpack::warm();
    std::snprintf(msg, n, "warm(): %zu compiles queued", w.jobs());
    return w.jobs() > 0 ? 0 : 1;
  }
  fatpack::load_options o;
  o.device = 0;
  auto m = fatpack::load_module("varied", o);
  if (!m) {
    std::snprintf(msg, n, "load_module(varied): %s", m.error().what());
    return 1;
  }
  auto f = m->function("_Z7count_aPi");
  if (!f) {
    std::snprintf(msg, n, "function(count_a): %s", f.error().what());
    return 1;
  }
  std::snprintf(msg, n, "count_a loaded; %s", m->report().pieces.c_str());
  return 0;
}
