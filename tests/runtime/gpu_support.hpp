// Helpers shared by the stand-alone runtime test programs that also run on a real GPU
// (gpu_test.cpp, context_test.cpp): failure counting without a test framework, artifacts, packages.
#pragma once

#include "fatpack/fatpack.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/core/package_writer.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fatpack_gpu_test {

inline std::string g_artifacts = FATPACK_TEST_ARTIFACTS;
inline int g_failures = 0;

#define EXPECT(cond, ...)                                           \
  do {                                                              \
    if (!(cond)) {                                                  \
      ++::fatpack_gpu_test::g_failures;                             \
      std::printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                     \
      std::printf("\n");                                            \
    }                                                               \
  } while (0)

inline std::vector<std::uint8_t> read_file(const std::string& name) {
  std::ifstream f(g_artifacts + "/" + name, std::ios::binary);
  if (!f) {
    std::printf("FAIL: cannot read %s/%s\n", g_artifacts.c_str(), name.c_str());
    std::exit(1);
  }
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline std::vector<std::uint8_t> with_version(std::vector<std::uint8_t> ptx, const std::string& isa) {
  std::string s(ptx.begin(), ptx.end());
  auto pos = s.find(".version ");
  auto end = s.find('\n', pos);
  s.replace(pos, end - pos, ".version " + isa);
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

// Writes `entries` as package `name` and registers it (a failure ends the test run).
inline void register_package(const std::string& name, const std::vector<fatpack::core::entry_input>& entries) {
  auto pkg = fatpack::core::write_package(name, entries, fatpack::core::pack_options{});
  if (!pkg) {
    std::printf("FAIL: write_package %s: %s\n", name.c_str(), pkg.error().message.c_str());
    std::exit(1);
  }
  auto s = fatpack::add_package_memory(pkg->data(), pkg->size(), name);
  if (!s) {
    std::printf("FAIL: %s\n", s.error().what());
    std::exit(1);
  }
}

// Registers package `name` holding module `module` (default: `name`) built from artifacts ("file" or
// "file@isa": PTX with its .version rewritten); its PTX entries record `ptx_options` (ptxas syntax).
inline void add_package(const std::string& name, const std::vector<std::string>& items, std::string module = {},
                        const std::string& ptx_options = {}) {
  if (module.empty()) module = name;
  std::vector<fatpack::core::entry_input> entries;
  for (const auto& item : items) {
    auto at = item.find('@');
    auto bytes = read_file(item.substr(0, at));
    if (at != std::string::npos) bytes = with_version(bytes, item.substr(at + 1));
    auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), item, module);
    if (!r) {
      std::printf("FAIL: import %s: %s\n", item.c_str(), r.error().message.c_str());
      std::exit(1);
    }
    for (auto& e : r.value()) {
      if (e.target.kind == fatpack::core::entry_kind::ptx) e.options = ptx_options;
      entries.push_back(std::move(e));
    }
  }
  register_package(name, entries);
}

// Registers package `name` with module `name`: the link group of rdc_kernel.cu's and rdc_device.cu's
// relocatable compute_90 PTX (docs/format.md §4.1), after (with `relocatable_cubin`) rdc_kernel.cu's
// relocatable sm_90 cubin stored as it is, which import and pack refuse and the runtime must skip.
// The compute_90 relocatable PTX of rdc_kernel.cu and rdc_device.cu as one link group of `module`.
inline std::vector<fatpack::core::entry_input> rdc_ptx_group(const std::string& module) {
  std::vector<fatpack::core::entry_input> entries;
  std::uint16_t part = 0;
  for (const char* f : {"rdc_kernel.compute_90.rdc.ptx", "rdc_device.compute_90.rdc.ptx"}) {
    auto bytes = read_file(f);
    auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), f, module);
    if (!r) {
      std::printf("FAIL: import %s: %s\n", f, r.error().message.c_str());
      std::exit(1);
    }
    for (auto& e : r.value()) {
      e.link_part = part++;
      e.link_parts = 2;
      entries.push_back(std::move(e));
    }
  }
  return entries;
}

inline void add_rdc_package(const std::string& name, bool relocatable_cubin) {
  std::vector<fatpack::core::entry_input> entries;
  if (relocatable_cubin) {
    fatpack::core::entry_input e;
    e.target = {fatpack::core::entry_kind::sass, 90, fatpack::core::arch_variant::plain};
    e.module_name = name;
    e.kernels = {"rdc_saxpy"};
    e.raw = read_file("rdc_kernel.sm_90.rdc.cubin");
    entries.push_back(std::move(e));
  }
  for (auto& e : rdc_ptx_group(name)) entries.push_back(std::move(e));
  register_package(name, entries);
}

// rdc_kernel.cu + rdc_device.cu as `fatpack build --arch 90-virtual -- -rdc=true -dlto` packs them:
// the compute_90 relocatable PTX group and the lto_90 LTO-IR group (nvcc -ltoir -dlto output).
inline void add_lto_package(const std::string& name) {
  std::vector<fatpack::core::entry_input> entries = rdc_ptx_group(name);
  std::uint16_t part = 0;
  for (const char* f : {"rdc_kernel.lto_90.ltoir", "rdc_device.lto_90.ltoir"}) {
    fatpack::core::entry_input e;
    e.target = {fatpack::core::entry_kind::ltoir, 90, fatpack::core::arch_variant::plain};
    e.module_name = name;
    if (part == 0) e.kernels = {"rdc_saxpy"};
    e.raw = read_file(f);
    e.link_part = part++;
    e.link_parts = 2;
    entries.push_back(std::move(e));
  }
  register_package(name, entries);
}

}  // namespace fatpack_gpu_test
