// dlclose() of a plugin whose own runtime still has threads (docs/runtime.md "Unloading"): the
// program knows nothing of fatpack. It dlopen()s plugin_pieces (which links the runtime), loads one
// kernel (the other pieces compile on the plugin's JIT pool, their SASS queued for the cache, a
// compile lock's heartbeat thread running), dlclose()s it at once; again (cache hits among the
// pieces); then with warm(). It sleeps past the pool's work and the heartbeat, and exits 0. A
// runtime whose threads ran in code the loader had unmapped crashed here (SIGSEGV, nearly every run).
// Then plugin_a, which starts no thread (one small SASS entry): it is still unloaded by dlclose.
//   fatpack_plugin_unload PLUGIN_PIECES PLUGIN_A
// FAKECUDA_JIT_DELAY_MS (set by the test) keeps the pieces compiling at the dlclose.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using run_fn = int (*)(int, char*, std::size_t);
using check_fn = const void* (*)(const char*, const char*, char*, std::size_t);

bool loaded(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fatpack_plugin_unload PLUGIN_PIECES PLUGIN_A\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // what ran is shown, also when a crash ends the run
  // A cache of this run's own: every piece a miss the first time (stores queued), hits after.
  char dir[] = "/tmp/fatpack_plugin_unload.XXXXXX";
  if (!mkdtemp(dir)) {
    std::perror("mkdtemp");
    return 2;
  }
  setenv("FATPACK_CACHE_PATH", dir, 1);
  unsetenv("FATPACK_CACHE_DISABLE");
  const int modes[] = {0, 0, 1};
  for (int mode : modes) {
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "dlopen(%s): %s\n", argv[1], dlerror());
      return 1;
    }
    auto run = reinterpret_cast<run_fn>(dlsym(h, "plugin_pieces_run"));
    if (!run) {
      std::fprintf(stderr, "dlsym(plugin_pieces_run): %s\n", dlerror());
      return 1;
    }
    char msg[4096] = "";
    const int rc = run(mode, msg, sizeof msg);
    std::printf("%s mode %d: %s\n", rc == 0 ? "ok" : "FAIL", mode, msg);
    if (rc != 0) return 1;
    dlclose(h);  // at once: the pieces are still compiling
    std::printf("plugin_pieces after dlclose: %s\n", loaded(argv[1]) ? "kept loaded (its runtime has threads)" : "unloaded");
  }
  usleep(1500 * 1000);  // past the pool's work and the compile lock's 1 s heartbeat
  std::printf("ok: no thread ran in unmapped code\n");

  void* a = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!a) {
    std::fprintf(stderr, "dlopen(%s): %s\n", argv[2], dlerror());
    return 1;
  }
  auto check = reinterpret_cast<check_fn>(dlsym(a, "plugin_check"));
  char msg[4096] = "";
  if (!check || !check("plugin_a", "plugin_b", msg, sizeof msg)) {
    std::printf("FAIL plugin_a: %s\n", msg);
    return 1;
  }
  dlclose(a);
  const bool kept = loaded(argv[2]);
  std::printf("%s: plugin_a (no thread started) %s by dlclose\n", kept ? "FAIL" : "ok", kept ? "not unloaded" : "unloaded");
  std::system((std::string("rm -rf ") + dir).c_str());
  return kept ? 1 : 0;
}
