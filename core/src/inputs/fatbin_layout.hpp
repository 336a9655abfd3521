// The numbers of NVIDIA's fatbin container that both the reader (fatbin_reader.cpp) and the writer
// (fatbin_writer.cpp) use: one definition, so that the two cannot drift apart.
#pragma once

#include <cstdint>

namespace fatpack::core::fatbin_layout {

inline constexpr std::uint32_t container_magic = 0xBA55ED50u;
inline constexpr std::uint16_t container_version = 1;
inline constexpr std::uint16_t container_header_size = 16;
inline constexpr std::uint16_t kind_ptx = 1, kind_elf = 2, kind_ltoir = 8;
inline constexpr std::uint64_t flag_arch_specific = 0x100000, flag_family = 0x200000;

}  // namespace fatpack::core::fatbin_layout
