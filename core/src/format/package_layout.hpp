// Byte offsets of the package format v1 (docs/format.md §3-§4) and little-endian accessors.
// Reader and writer share these so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <cstring>

namespace fatpack::core::layout {

// Header (header_size_v1 = 128 bytes in v1.0).
inline constexpr std::size_t h_magic = 0x00;         // u8[8]
inline constexpr std::size_t h_major = 0x08;         // u16
inline constexpr std::size_t h_minor = 0x0A;         // u16
inline constexpr std::size_t h_header_size = 0x0C;   // u32
inline constexpr std::size_t h_total_size = 0x10;    // u64
inline constexpr std::size_t h_entry_offset = 0x18;  // u64
inline constexpr std::size_t h_entry_count = 0x20;   // u32
inline constexpr std::size_t h_entry_size = 0x24;    // u32
inline constexpr std::size_t h_string_offset = 0x28; // u64
inline constexpr std::size_t h_string_size = 0x30;   // u64
inline constexpr std::size_t h_name_offset = 0x38;   // u32
inline constexpr std::size_t h_name_size = 0x3C;     // u32
inline constexpr std::size_t h_flags = 0x40;         // u64
inline constexpr std::size_t h_tables_xxh3 = 0x48;   // u64
inline constexpr std::size_t h_reserved = 0x50;      // up to header_size: zero in v1.0

// Entry record (entry_size_v1 = 128 bytes in v1.0).
inline constexpr std::size_t e_kind = 0x00;           // u8
inline constexpr std::size_t e_variant = 0x01;        // u8
inline constexpr std::size_t e_codec = 0x02;          // u8
inline constexpr std::size_t e_reserved0 = 0x03;      // u8
inline constexpr std::size_t e_arch = 0x04;           // u32
inline constexpr std::size_t e_isa_major = 0x08;      // u16
inline constexpr std::size_t e_isa_minor = 0x0A;      // u16
inline constexpr std::size_t e_toolkit = 0x0C;        // u32
inline constexpr std::size_t e_payload_offset = 0x10; // u64
inline constexpr std::size_t e_stored_size = 0x18;    // u64
inline constexpr std::size_t e_raw_size = 0x20;       // u64
inline constexpr std::size_t e_raw_xxh3 = 0x28;       // u64
inline constexpr std::size_t e_stored_xxh3 = 0x30;    // u64
inline constexpr std::size_t e_block_size = 0x38;     // u32
inline constexpr std::size_t e_module_offset = 0x3C;  // u32
inline constexpr std::size_t e_module_size = 0x40;    // u32
inline constexpr std::size_t e_options_offset = 0x44; // u32
inline constexpr std::size_t e_options_size = 0x48;   // u32
inline constexpr std::size_t e_kernels_offset = 0x4C; // u32
inline constexpr std::size_t e_kernels_size = 0x50;   // u32
inline constexpr std::size_t e_kernel_count = 0x54;   // u32
inline constexpr std::size_t e_reserved = 0x58;       // up to entry_size: zero in v1.0

inline std::uint16_t get16(const std::uint8_t* p) { return std::uint16_t(p[0] | p[1] << 8); }
inline std::uint32_t get32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}
inline std::uint64_t get64(const std::uint8_t* p) { return get32(p) | std::uint64_t(get32(p + 4)) << 32; }
inline void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = std::uint8_t(v);
  p[1] = std::uint8_t(v >> 8);
}
inline void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, std::uint16_t(v));
  put16(p + 2, std::uint16_t(v >> 16));
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
  put32(p, std::uint32_t(v));
  put32(p + 4, std::uint32_t(v >> 32));
}
inline std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace fatpack::core::layout
