// libFuzzer target: the PTX header parser (.version, .target, comments, .entry names, nvcc's
// toolkit comment), run by `fatpack pack` and add_image() on text nobody checked.
#include "fatpack/core/input.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)fatpack::core::parse_ptx(fatpack::core::byte_span(data, size), "fuzz");
  return 0;
}
