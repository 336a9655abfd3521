// libFuzzer target: the package reader (docs/format.md), the only code that parses package bytes.
// Any input must give a package or an error value, never a crash; every entry of a package that
// parses must decompress or give an error value.
#include "fatpack/core/package.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fatpack::core;
  auto pv = package_view::parse(byte_span(data, size), "fuzz");
  if (!pv) return 0;
  for (const auto& e : pv->entries()) {
    if (e.raw_size > (64u << 20)) continue;  // a forged size would only exhaust memory, not test code
    std::vector<std::uint8_t> out(static_cast<std::size_t>(e.raw_size));
    (void)pv->decompress_into(e.index, out.data(), 2);
  }
  return 0;
}
