// A library's constructor that calls fatpack while another thread loads the driver for the first
// time (docs/runtime.md "Threads and the dynamic loader"). The constructor runs inside dlopen(), which
// holds the dynamic loader's lock; the first driver load takes that lock too (dlopen of libcuda, and
// the driver's own initialisation). A first load that held a lock of fatpack's own across it (a
// function-local static's guard) left the two threads waiting for each other for ever.
//   fatpack_ctor_race PLUGIN
// The test sets FAKECUDA_INIT_DELAY_MS: the fake cuInit sleeps, then goes through the loader. This
// program starts fatpack::init() on a thread, and while that thread is inside cuInit dlopen()s
// PLUGIN, whose constructor calls ctor_race_init() below (exported from this program). A hang is
// ended by alarm() (SIGALRM: the test fails).
#include "fatpack/fatpack.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

extern "C" __attribute__((visibility("default"))) int ctor_race_init() {
  auto s = fatpack::init();
  if (!s) std::fprintf(stderr, "constructor's init: %s\n", s.error().what());
  return s ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fatpack_ctor_race PLUGIN\n");
    return 2;
  }
  alarm(30);
  int thread_rc = -1;
  std::thread first([&] { thread_rc = ctor_race_init(); });
  // The thread is inside the fake cuInit's sleep (FAKECUDA_INIT_DELAY_MS, longer than this).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  void* plugin = dlopen(argv[1], RTLD_NOW);  // its constructor calls ctor_race_init()
  if (!plugin) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    first.join();
    return 2;
  }
  auto rc = reinterpret_cast<int (*)()>(dlsym(plugin, "ctor_race_plugin_rc"));
  first.join();
  const int plugin_rc = rc ? rc() : -1;
  std::printf("thread init rc=%d, constructor init rc=%d\n", thread_rc, plugin_rc);
  return thread_rc == 0 && plugin_rc == 0 ? 0 : 1;
}
