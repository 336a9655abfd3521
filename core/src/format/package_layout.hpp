// Byte offsets of the package format v1 (docs/format.md §3-§4), with the tree's little-endian
// accessors (fatpack/core/le_bytes.hpp).
// Reader and writer share these so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <cstring>

#include "fatpack/core/le_bytes.hpp"

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
inline constexpr std::size_t e_link_part = 0x58;      // u16, v1.1: this entry's part of its link group
inline constexpr std::size_t e_link_parts = 0x5A;     // u16, v1.1: parts in the group; 0 = standalone
inline constexpr std::size_t e_reserved = 0x58;       // up to entry_size: zero in v1.0
inline constexpr std::size_t e_reserved_v1_1 = 0x5C;  // up to entry_size: zero in v1.1
inline constexpr std::size_t e_plan_offset = 0x5C;     // u32, v1.2: piece plan, a string-table reference (§4.2)
inline constexpr std::size_t e_plan_size = 0x60;       // u32, v1.2: its bytes; 0 = no plan
inline constexpr std::size_t e_reserved_v1_2 = 0x64;  // up to entry_size: zero in v1.2

using le::get16;
using le::get32;
using le::get64;
using le::put16;
using le::put32;
using le::put64;
inline std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace fatpack::core::layout
