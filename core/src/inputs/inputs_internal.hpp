// Helpers the input readers and writers share (ptx.cpp, fatbin_reader.cpp, fatbin_writer.cpp,
// input.cpp); private to core.
#pragma once

#include "fatpack/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fatpack::core::detail {

// The PTX text fatpack stores (ptx.cpp): without a leading UTF-8 byte order mark (editors add one;
// ptxas refuses it, so a packed text with one would fail every JIT) and without trailing NUL padding.
byte_span ptx_text(byte_span bytes);
// True when the bytes are PTX text: `.version` first (after whitespace and comments), then `.target` (ptx.cpp).
bool is_ptx_text(byte_span bytes);
// "Cuda compilation tools, release 13.0, V13.0.88" -> 13000; 0 if not found (ptx.cpp; the PTX
// header comment and the cubin's tkinfo note both carry it).
std::uint32_t release_version(std::string_view s);
// True when [off, off+len) lies inside [0, size), without overflow.
inline bool in_range(std::uint64_t off, std::uint64_t len, std::uint64_t size) { return off <= size && len <= size - off; }
// True when the bytes are a well-formed fatbin whose entries are all LTO-IR (fatbin_reader.cpp).
bool fatbin_is_ltoir_only(byte_span bytes);

}  // namespace fatpack::core::detail
