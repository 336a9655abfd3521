// A caller of the runtime's entry points, so that whatever links this links the loader, the JIT
// service, the cache and the codecs (tests/shipping/CMakeLists.txt). Nothing here runs a GPU.
#include <fatpack/fatpack.hpp>

extern "C" __attribute__((visibility("default"))) int shipping_probe() {
  auto m = fatpack::load_module("shipping_probe_module");  // no such package: an error, never a crash
  return m ? 0 : 1;
}
