// A plugin: a shared library that embeds its own package (`fatpack embed`) and links the static
// runtime, as two independent products might. The test program (two_plugins.cpp) dlopen()s two of
// them (plugin_a, plugin_b: this file with a different package each, both holding a module "vadd")
// into one process. Each must find its own package and module through its own copy of the runtime:
// with interposed runtime symbols they would share one registry, each would see both packages, and
// "vadd" would be ambiguous.
#include "registry/registry.hpp"  // runtime/src: the address of this copy's registry

#include <fatpack/fatpack.hpp>

#include <cstdio>
#include <string>

namespace {

const void* failed(char* msg, std::size_t n, const std::string& why) {
  std::snprintf(msg, n, "%s", why.c_str());
  return nullptr;
}

}  // namespace

// The plugin's one export. own: this plugin's package; other: the other plugin's. Returns this
// copy's registry (to compare with the other plugin's), or null with msg set.
extern "C" __attribute__((visibility("default"))) const void* plugin_check(const char* own, const char* other, char* msg,
                                                                          std::size_t n) {
  auto ps = fatpack::packages();
  if (!ps) return failed(msg, n, std::string("packages(): ") + ps.error().what());
  std::string names;
  for (const auto& p : *ps) names += (names.empty() ? "" : ", ") + p.name;
  if (names != own) return failed(msg, n, std::string("packages(): [") + names + "], expected [" + own + "]");
  auto m = fatpack::load_module("vadd");  // any package: "vadd" must be unambiguous
  if (!m) return failed(msg, n, std::string("load_module(vadd): ") + m.error().what());
  if (m->package_name() != own) return failed(msg, n, "vadd came from package " + m->package_name());
  if (!m->function("vadd")) return failed(msg, n, "function(vadd) failed");
  fatpack::load_options o;
  o.package = other;
  auto x = fatpack::load_module("vadd", o);
  if (x || x.error().code != fatpack::errc::not_found)
    return failed(msg, n, std::string("load_module(vadd) from package ") + other + " was not refused as not_found");
  std::snprintf(msg, n, "%s: vadd loaded, entry %s", own, m->report().target.c_str());
  return &fatpack::detail::registry::instance();
}
