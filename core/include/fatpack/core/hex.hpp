// The one hex formatter of the tree (lower-case digits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fatpack::core {

// Two digits a byte, in order: {0xde, 0xad} -> "dead".
std::string hex_bytes(const std::uint8_t* p, std::size_t n);
// A number with a 0x prefix and no leading zeros: 0x1f, 0x0 (offsets and fields in error messages).
std::string hex(std::uint64_t v);
// A number as exactly 16 digits: 000000000000001f (hashes in keys and listings).
std::string hex16(std::uint64_t v);
// Text from outside (a package's options, a name) as a message or a terminal may show it: printable
// ASCII as is, every other byte as \xNN; past `limit` bytes, "..." instead of the rest.
std::string printable_text(std::string_view s, std::size_t limit = SIZE_MAX);
// A line for a terminal that keeps well-formed UTF-8 (a path in the user's language) but writes '?'
// for every control character: C0 (but tab), DEL, C1 (U+0080..U+009F: some terminals take U+009B as
// an escape sequence's start) and every byte that is not part of a well-formed UTF-8 sequence.
std::string terminal_text(std::string_view s);

}  // namespace fatpack::core
