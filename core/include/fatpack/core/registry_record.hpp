// The record `fatpack embed` writes next to an embedded package (docs/format.md §7), and the ELF
// note that leads to it.
//
// Each generated embedding file places one record in the section `fatpack_registry` (flags "awR",
// 8-byte aligned) and one note in `.note.fatpack` (SHT_NOTE, allocated, so the linker puts it in a
// PT_NOTE segment that the program headers reach): name "fatpack", type note_type_record, an 8-byte
// descriptor holding the signed distance from the descriptor to the record (`.quad record - .`,
// resolved by the static linker: no run-time relocation in a read-only segment). The runtime finds
// every loaded object's notes through the program headers (dl_iterate_phdr), so a shared library's
// packages need no constructor and no symbol of the program, and an unloaded library's packages are
// noticed (docs/runtime.md). The runtime itself places one note of type note_type_runtime with an
// empty descriptor: an object carrying it has its own runtime, which alone sees that object's
// packages. The runtime also walks __start_/__stop_fatpack_registry of its own link unit (records
// of files generated before the note existed, and the `.S` form), and still accepts records passed to
// fatpack_register_embedded(), which files generated before the note existed call from a constructor.
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

inline constexpr char note_name[] = "fatpack";          // the notes' name (8 bytes with its NUL)
inline constexpr std::uint32_t note_type_record = 1;   // descriptor: int64 distance to a registry_record
inline constexpr std::uint32_t note_type_runtime = 2;  // no descriptor: this object links the runtime

}  // namespace fatpack::core

// Called from a constructor by files `fatpack embed` generated before the note existed (a weak
// reference; runtime/ defines it). Records passed to it are used in place for the life of the process.
extern "C" void fatpack_register_embedded(const void* record);
