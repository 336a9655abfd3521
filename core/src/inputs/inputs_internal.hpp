// Helpers the input readers and writers share (ptx.cpp, fatbin_reader.cpp, fatbin_writer.cpp,
// input.cpp); private to core.
#pragma once

#include "fatpack/core/error.hpp"

#include <cstddef>

namespace fatpack::core::detail {

// Size of PTX text without its trailing NUL padding (ptx.cpp).
std::size_t ptx_text_size(byte_span bytes);
// True when the bytes are PTX text: `.version` first (after whitespace and comments), then `.target` (ptx.cpp).
bool is_ptx_text(byte_span bytes);
// True when the bytes are a well-formed fatbin whose entries are all LTO-IR (fatbin_reader.cpp).
bool fatbin_is_ltoir_only(byte_span bytes);

}  // namespace fatpack::core::detail
