// The plugin of fatpack_ctor_race (ctor_race.cpp): its constructor calls into the program's runtime
// while dlopen() holds the dynamic loader's lock.
extern "C" int ctor_race_init();  // defined and exported by the program

namespace {
int g_rc = -1;
__attribute__((constructor)) void at_load() { g_rc = ctor_race_init(); }
}  // namespace

extern "C" __attribute__((visibility("default"))) int ctor_race_plugin_rc() { return g_rc; }
