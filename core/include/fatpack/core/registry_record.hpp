// The record `fatpack embed` writes next to an embedded package (docs/format.md §7).
//
// Each generated embedding file places one record in the section `fatpack_registry` (flags "awR",
// 8-byte aligned); the runtime walks the records of its own link unit through the linker-made
// symbols __start_fatpack_registry / __stop_fatpack_registry (weak, hidden). Because a shared
// library's records are not visible through the executable's symbols, the generated file also
// registers its record from a static constructor by calling fatpack_register_embedded() if the
// runtime is linked (a weak reference). The runtime deduplicates records by address.
#pragma once

#include <cstdint>

namespace fatpack::core {

inline constexpr std::uint32_t registry_record_magic = 0x52504B46u;  // "FKPR" little-endian
inline constexpr std::uint32_t registry_record_version = 1;

struct registry_record {
  std::uint32_t magic;        // registry_record_magic
  std::uint32_t version;      // registry_record_version
  const char* name;           // package name, NUL-terminated
  const std::uint8_t* begin;  // first byte of the embedded package (64-byte aligned)
  const std::uint8_t* end;    // one past its last byte
};
static_assert(sizeof(registry_record) == 32, "the embed generator writes 32-byte records");

}  // namespace fatpack::core

// Called by generated embedding files from a constructor (weak reference; runtime/ defines it).
extern "C" void fatpack_register_embedded(const void* record);
