// The packages the sweeps damage: real nvcc output (tests/CMakeLists.txt artifacts) written by
// today's writer, as `fatpack pack` does.
#pragma once

#include "sweep.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/core/package_writer.hpp"

namespace sweep {

inline bytes package_of(const std::string& name, const std::vector<std::string>& artifacts, fatpack::core::codec c) {
  std::vector<fatpack::core::entry_input> entries;
  for (const auto& a : artifacts) {
    const bytes b = read_file(artifact(a));
    auto in = fatpack::core::import_input(fatpack::core::byte_span(b), a, "vadd");
    REQUIRE_MESSAGE(in, in.error().message);
    for (auto& e : *in) entries.push_back(std::move(e));
  }
  fatpack::core::pack_options opt;
  opt.codec = c;
  auto pkg = fatpack::core::write_package(name, entries, opt);
  REQUIRE_MESSAGE(pkg, pkg.error().message);
  return *pkg;
}

inline const std::vector<std::string>& all_vadd() {
  static const std::vector<std::string> v = {"vadd.sm_75.cubin",  "vadd.sm_80.cubin",  "vadd.sm_86.cubin",
                                             "vadd.sm_89.cubin",  "vadd.sm_90.cubin",  "vadd.sm_90a.cubin",
                                             "vadd.sm_100f.cubin", "vadd.compute_80.ptx", "vadd.compute_90.ptx"};
  return v;
}

}  // namespace sweep
