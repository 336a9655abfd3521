// Unloading (docs/runtime.md "Unloading"): libraries that carry a package (`fatpack embed` output,
// no runtime of their own) are dlopen()ed and dlclose()d in a loop, alternating two different ones,
// so that one is often mapped where the other was. This process's runtime must see each while it
// is loaded, forget it once it is unloaded, never read the unloaded bytes (the ASan job runs this),
// and keep a library mapped while a module or library handle loaded from it lives (a library of
// unload_b's uncompressed SASS is loaded in place, CU_LIBRARY_BINARY_IS_PRESERVED, and first used
// in a context after dlclose).
#include <doctest/doctest.h>

#include "fatpack/fatpack.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include <dlfcn.h>

#if defined(UNLOAD_A_PATH) && defined(UNLOAD_B_PATH) && defined(PLUGIN_A_PATH)

namespace {

bool listed(const std::string& package) {
  auto ps = fatpack::packages();
  if (!ps) return false;
  return std::any_of(ps->begin(), ps->end(), [&](const fatpack::package_info& p) { return p.name == package; });
}

// Whether `path` is loaded, without loading it (a NOLOAD reference is given back at once).
bool loaded(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

// Where the library behind `h` is mapped: dladdr of a function it exports.
std::uintptr_t base_of(void* h) {
  void* f = dlsym(h, "fatpack_test_dso_anchor");
  REQUIRE(f != nullptr);
  Dl_info info{};
  REQUIRE(dladdr(f, &info) != 0);
  return reinterpret_cast<std::uintptr_t>(info.dli_fbase);
}

// A counter of the fake driver (tests/fakecuda); -1 on a real driver.
int fake_count(const char* name) {
  void* h = dlopen(fatpack::driver_library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<int (*)()>(dlsym(h, name)) : nullptr;
  const int v = f ? f() : -1;
  if (h) dlclose(h);
  return v;
}

}  // namespace

TEST_CASE("unloading: a dlclose()d library's package is forgotten, a library mapped at its address later is seen") {
  struct library {
    const char* path;
    const char* package;
  };
  const library libs[2] = {{UNLOAD_A_PATH, "unload_a"}, {UNLOAD_B_PATH, "unload_b"}};
  // a, b, a, b, b, a, a, b: each library after the other and after itself, each with the module
  // handle given back before dlclose (even rounds) and held across it (odd rounds).
  const int order[] = {0, 1, 0, 1, 1, 0, 0, 1};
  std::uintptr_t previous_base = 0;
  int previous = -1, reused_by_other = 0, reused_by_same = 0;
  std::string bases;
  for (int round = 0; round < int(sizeof order / sizeof order[0]); ++round) {
    const library& l = libs[order[round]];
    const library& other = libs[1 - order[round]];
    CAPTURE(round);
    INFO(l.package);
    REQUIRE_FALSE(loaded(l.path));
    void* h = dlopen(l.path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(h != nullptr, dlerror());
    const std::uintptr_t base = base_of(h);
    char hex[32];
    std::snprintf(hex, sizeof hex, "%#zx", static_cast<std::size_t>(base));
    bases += std::string(bases.empty() ? "" : " ") + l.package + "@" + hex;
    if (base == previous_base) (previous == order[round] ? reused_by_same : reused_by_other) += 1;
    previous_base = base;
    previous = order[round];

    CHECK(listed(l.package));
    CHECK_FALSE(listed(other.package));
    fatpack::load_options o;
    o.package = l.package;
    {
      auto m = fatpack::load_module("unload_vadd", o);
      INFO((m.has_value() ? std::string() : std::string(m.error().what())));
      REQUIRE(m.has_value());
      CHECK(m->package_name() == l.package);
      CHECK(m->function("vadd").has_value());
      // A CUlibrary too: unload_b is uncompressed, so its SASS is given to the driver in place
      // (CU_LIBRARY_BINARY_IS_PRESERVED) and read again at the library's first use in a context.
      const int preserved = fake_count("fakecuda_preserved_libraries");
      auto lib = fatpack::load_library("unload_vadd", o);
      INFO((lib.has_value() ? std::string() : std::string(lib.error().what())));
      REQUIRE(lib.has_value());
      if (preserved >= 0)
        CHECK(fake_count("fakecuda_preserved_libraries") == preserved + (l.package == std::string("unload_b") ? 1 : 0));
      const int stale = fake_count("fakecuda_stale_uses");
      if (round % 2 == 0) CHECK(lib->function("vadd").has_value());
      if (round % 2 == 1) {
        // Held across dlclose: the handles' pin keeps the library mapped, and its package listed.
        REQUIRE(dlclose(h) == 0);
        h = nullptr;
        CHECK(loaded(l.path));
        CHECK(listed(l.package));
        CHECK(m->function("vadd").has_value());
        // The library's first use in a context, after dlclose: the driver reads the bytes now.
        CHECK(lib->function("vadd").has_value());
      }
      if (stale >= 0) CHECK(fake_count("fakecuda_stale_uses") == stale);
    }  // the handles go (with them the pin: an odd round's library is unloaded here)
    if (h) REQUIRE(dlclose(h) == 0);
    CHECK_FALSE(loaded(l.path));
    CHECK_FALSE(listed(l.package));
    auto gone = fatpack::load_module("unload_vadd", o);
    REQUIRE_FALSE(gone.has_value());
    // not_found, or no_packages when this test runs alone (-tc): both name the forgotten package.
    CHECK((gone.error().code == fatpack::errc::not_found || gone.error().code == fatpack::errc::no_packages));
    INFO(gone.error().what());
    CHECK(std::string(gone.error().what()).find(std::string("'") + l.package + "' (from ") != std::string::npos);
    CHECK(std::string(gone.error().what()).find("unloaded") != std::string::npos);
  }
  // Each library was unloaded 4 times: the message names each once, with the count (before, once
  // per unload, the list repeating one package and the count saying "8 packages").
  {
    fatpack::load_options o;
    o.package = "unload_a";
    const std::string what = fatpack::load_module("unload_vadd", o).error().what();
    INFO(what);
    for (const char* p : {"'unload_a' (from ", "'unload_b' (from "}) {
      const std::size_t at = what.find(p);
      REQUIRE(at != std::string::npos);
      CHECK(what.find(p, at + 1) == std::string::npos);
    }
    CHECK(what.find(".so) 4 times") != std::string::npos);
  }
  // Whether the loader mapped a library where the previous one had been is the loader's choice;
  // it is reported, so a run shows whether the same-address case was exercised.
  MESSAGE("unload loop: " << bases << "; the same address as the previous library: " << reused_by_other
                          << " times for the other library, " << reused_by_same << " for the same one");
  std::printf("unload loop: %s; same address as the previous library: %d times the other library, %d the same\n",
              bases.c_str(), reused_by_other, reused_by_same);
}

#if defined(TWIN_A_PATH)
// Two libraries that carry different packages of one name (two plugins built from different
// versions of one kernel library): the module is ambiguous while both are loaded, and the error names
// both libraries (before: the one kept was only "(from embedded)"); once one is unloaded, the
// other's package loads again.
TEST_CASE("two libraries carrying different packages of one name: ambiguous naming both, then one unloaded") {
  const std::string a_path = UNLOAD_A_PATH, twin_path = TWIN_A_PATH;
  auto file_name = [](const std::string& p) { return p.substr(p.rfind('/') + 1); };
  REQUIRE_FALSE(loaded(UNLOAD_A_PATH));
  void* a = dlopen(UNLOAD_A_PATH, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(a != nullptr, dlerror());
  void* twin = dlopen(TWIN_A_PATH, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(twin != nullptr, dlerror());
  fatpack::load_options o;
  o.package = "unload_a";
  for (const char* package : {"unload_a", ""}) {
    o.package = package;
    auto m = fatpack::load_module("unload_vadd", o);
    REQUIRE_FALSE(m.has_value());
    const std::string what = m.error().what();
    INFO(what);
    CHECK(m.error().code == fatpack::errc::ambiguous);
    CHECK(what.find(file_name(a_path)) != std::string::npos);
    CHECK(what.find(file_name(twin_path)) != std::string::npos);
  }
  REQUIRE(dlclose(twin) == 0);
  o.package = "unload_a";
  {
    auto m = fatpack::load_module("unload_vadd", o);
    INFO((m.has_value() ? std::string() : std::string(m.error().what())));
    REQUIRE(m.has_value());
    CHECK(m->function("vadd").has_value());
  }
  REQUIRE(dlclose(a) == 0);
  CHECK_FALSE(listed("unload_a"));
}
#endif

TEST_CASE("a library with its own runtime keeps its packages to itself") {
  // plugin_a links the runtime (and carries the runtime's note): this process's runtime must not list
  // its package, and says why when asked for it. RTLD_NODELETE: its runtime stays (never unloaded).
  void* h = dlopen(PLUGIN_A_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  REQUIRE_MESSAGE(h != nullptr, dlerror());
  CHECK_FALSE(listed("plugin_a"));
  fatpack::load_options o;
  o.package = "plugin_a";
  auto m = fatpack::load_module("vadd", o);
  REQUIRE_FALSE(m.has_value());
  const std::string what = m.error().what();
  INFO(what);
  CHECK((m.error().code == fatpack::errc::not_found || m.error().code == fatpack::errc::no_packages));
  CHECK(what.find("libfatpack_runtime_plugin_a.so") != std::string::npos);
  CHECK(what.find("its own fatpack runtime") != std::string::npos);
  dlclose(h);
}

#endif

#if defined(LYING_NOTES_PATH)
// A library whose .note.fatpack notes lie (lying_notes.cpp): 23 notes, none valid. Each is skipped,
// nothing outside the library is read, and a lookup's message names the first few and counts the
// rest (it held every one: a library with 100000 such notes made an 11 MB message).
TEST_CASE("a library whose fatpack notes lie: every note skipped, the message bounded and printable") {
  void* h = dlopen(LYING_NOTES_PATH, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(h != nullptr, dlerror());
  auto m = fatpack::load_module("no_module_is_named_this");
  REQUIRE_FALSE(m.has_value());
  const std::string what = m.error().message;
  INFO(what);
  CHECK(what.find("4-byte descriptor") != std::string::npos);
  CHECK(what.find("points outside it") != std::string::npos);
  CHECK(what.find("magic/version 0x5a5a5a5a") != std::string::npos);
  // 23 notes, 8 shown: at least 15 counted (packages skipped earlier in this process come first).
  const std::size_t more = what.find(" more");
  REQUIRE(more != std::string::npos);
  const std::size_t and_at = what.rfind("and ", more);
  REQUIRE(and_at != std::string::npos);
  CHECK(std::stoul(what.substr(and_at + 4, more - and_at - 4)) >= 15);
  CHECK(what.find("embedded package 'evil\\x1b[7m'") != std::string::npos);
  CHECK(what.find('\x1b') == std::string::npos);
  CHECK(what.size() < 4000);
  dlclose(h);
  auto after = fatpack::load_module("no_module_is_named_this");
  REQUIRE_FALSE(after.has_value());
  CHECK(after.error().message.find("lying") == std::string::npos);
}
#endif
