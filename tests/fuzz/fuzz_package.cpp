// libFuzzer target: the package reader (docs/format.md), the only code that parses package bytes.
// Any input must give packages or an error value, never a crash; every entry of a package that
// parses must decompress or give an error value. Declared sizes are not skipped: a forged raw_size
// that makes the reader allocate more than -malloc_limit_mb is a finding (scripts/fuzz.sh).
#include "fatpack/core/package.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fatpack::core;
  // The walker, as `fatpack verify` and the registry read a file: every package back to back.
  (void)for_each_package(byte_span(data, size), "fuzz", [](package_view&& pv) -> status {
    for (const auto& e : pv.entries()) {
      (void)pv.decompress(e.index, 2);
      (void)pv.stored_payload(e.index);
    }
    return pv.verify();
  });
  return 0;
}
