// libFuzzer target: importing an nvcc fatbin (containers back to back, entries stored, LZ4- or
// ZSTD-compressed), which `fatpack pack` and the runtime's add_image() run on files nobody checked.
// Every entry's declared sizes are forgeable: a decompression that allocates more than
// -malloc_limit_mb (a zstd bomb) is a finding.
#include "fatpack/core/input.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)fatpack::core::import_fatbin(fatpack::core::byte_span(data, size), "fuzz");
  return 0;
}
