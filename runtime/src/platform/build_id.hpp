// A shared library's identity without loading it: the GNU build-id note (NT_GNU_BUILD_ID) of an ELF
// file, read with a few small bounded reads (the ELF header, the program headers, the PT_NOTE
// segments), never the whole file. NVRTC is a 105 MB library with no version in its file name; its
// build-id names the exact build, so a source-cache hit can know which compiler made an entry
// without dlopen-ing the compiler (docs/nvrtc.md).
#pragma once

#include <string>

namespace fatpack::detail::os {

// The build-id of the ELF file at `path` as lowercase hex ("65be0db3..."); "" with `why` set when the
// file cannot be read, is not a 64-bit little-endian ELF file, or has no build-id note (in the part
// of the file that exists: a truncated library keeps its identity; elf_truncation refuses to load
// it). Bounded: at
// most 64 program headers and 64 KiB of notes are read; every offset and size is checked against
// the file's size.
std::string elf_build_id(const std::string& path, std::string& why);

// Why the ELF file at `path` must not be dlopen-ed: "truncated: ..." when a loadable segment lies past
// its end (dlopen would map it, and the first touch past the end is SIGBUS); "" otherwise, also when
// it cannot be read or is not ELF (dlopen then says why itself).
std::string elf_truncation(const std::string& path);

}  // namespace fatpack::detail::os
