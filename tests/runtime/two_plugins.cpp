// Two shared libraries that each embed a package and link the static runtime, in one process
// (docs/runtime.md "Symbols"). The program knows nothing of fatpack: it dlopen()s both plugins
// with RTLD_GLOBAL (the harshest case: the first plugin's exports would interpose the second's)
// and checks that each finds its own package and module against the fake driver, that their
// registries are distinct, and that neither exports the runtime's API.
//   fatpack_two_plugins PLUGIN_A PLUGIN_B
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>

using check_fn = const void* (*)(const char*, const char*, char*, std::size_t);

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fatpack_two_plugins PLUGIN_A PLUGIN_B\n");
    return 2;
  }
  const char* packages[2] = {"plugin_a", "plugin_b"};
  const void* registries[2] = {nullptr, nullptr};
  int failures = 0;
  for (int i = 0; i < 2; ++i) {
    void* h = dlopen(argv[1 + i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      std::fprintf(stderr, "dlopen(%s): %s\n", argv[1 + i], dlerror());
      return 1;
    }
    for (const char* sym : {"fatpack_load_module", "fatpack_register_embedded", "fatpack_version"}) {
      if (dlsym(h, sym)) {
        std::fprintf(stderr, "FAIL: %s exports %s\n", argv[1 + i], sym);
        ++failures;
      }
    }
    auto check = reinterpret_cast<check_fn>(dlsym(h, "plugin_check"));
    if (!check) {
      std::fprintf(stderr, "dlsym(plugin_check) in %s: %s\n", argv[1 + i], dlerror());
      return 1;
    }
    // The two plugins run after both are loaded (the second's symbols are in place then).
    (void)check;
  }
  for (int i = 0; i < 2; ++i) {
    void* h = dlopen(argv[1 + i], RTLD_NOW | RTLD_NOLOAD);
    auto check = reinterpret_cast<check_fn>(dlsym(h, "plugin_check"));
    char msg[4096] = "";
    registries[i] = check(packages[i], packages[1 - i], msg, sizeof msg);
    std::printf("%s %s: %s\n", registries[i] ? "ok" : "FAIL", packages[i], msg);
    if (!registries[i]) ++failures;
  }
  if (registries[0] && registries[0] == registries[1]) {
    std::printf("FAIL: both plugins use one registry (%p)\n", registries[0]);
    ++failures;
  } else if (registries[0] && registries[1]) {
    std::printf("ok: distinct registries %p and %p\n", registries[0], registries[1]);
  }
  return failures == 0 ? 0 : 1;
}
