// The one hex formatter of the tree (lower-case digits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fatpack::core {

// Two digits a byte, in order: {0xde, 0xad} -> "dead".
std::string hex_bytes(const std::uint8_t* p, std::size_t n);
// A number with a 0x prefix and no leading zeros: 0x1f, 0x0 (offsets and fields in error messages).
std::string hex(std::uint64_t v);
// A number as exactly 16 digits: 000000000000001f (hashes in keys and listings).
std::string hex16(std::uint64_t v);

}  // namespace fatpack::core
