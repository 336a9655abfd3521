// libFuzzer target: recognising and importing nvcc output (cubin ELF, PTX text, nvcc fatbins with
// LZ4/ZSTD entries), which `fatpack pack` and the runtime's add_image() run on untrusted files.
#include "fatpack/core/input.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)fatpack::core::import_input(fatpack::core::byte_span(data, size), "fuzz", "m");
  return 0;
}
