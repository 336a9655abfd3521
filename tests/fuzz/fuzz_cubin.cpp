// libFuzzer target: the cubin reader (ELF headers, section and symbol tables, .nv.compat, the
// toolkit note), which `fatpack pack`, add_image() and the cache (a cubin's SM) run on nvcc output
// and on whatever a JIT or a file handed them.
#include "fatpack/core/input.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)fatpack::core::parse_cubin(fatpack::core::byte_span(data, size), "fuzz");
  return 0;
}
