// How many bytes an image handed over without a size spans (see input.hpp, image_extent).
//   - cubin (ELF64, e_machine 190): the end of the furthest of the ELF header, the section header
//     table, the program header table and every section with file contents (not SHT_NOBITS), each
//     read only after the bytes before it were found to be inside the image;
//   - nvcc fatbin: one container, u16 header size at 6 + u64 size of the entries at 8;
//   - PTX: up to and including the terminating NUL (the driver's rule), searched no further than
//     `limit` bytes.
// Every offset and size is checked against `limit` before anything beyond the header is read.
#include "fatpack/core/input.hpp"

#include <algorithm>
#include <cstring>

namespace fatpack::core {

namespace {

template <class T>
T get(const std::uint8_t* p, std::uint64_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

result<std::size_t> too_large(const char* what, std::uint64_t end, std::size_t limit) {
  return make_error(errc::malformed, std::string(what) + " extends to byte " + std::to_string(end) +
                                         ", beyond the limit of " + std::to_string(limit) + " bytes");
}

result<std::size_t> elf_extent(const std::uint8_t* p, std::size_t limit) {
  constexpr std::uint64_t header = 64;
  if (limit < header) return too_large("the ELF header", header, limit);
  std::uint64_t end = header;
  const auto shoff = get<std::uint64_t>(p, 0x28);
  const auto shentsize = get<std::uint16_t>(p, 0x3a);
  const auto shnum = get<std::uint16_t>(p, 0x3c);
  const auto phoff = get<std::uint64_t>(p, 0x20);
  const auto phentsize = get<std::uint16_t>(p, 0x36);
  const auto phnum = get<std::uint16_t>(p, 0x38);
  if (shnum && shentsize < 64) return make_error(errc::malformed, "ELF section header size " + std::to_string(shentsize));
  if (phnum && phentsize < 56) return make_error(errc::malformed, "ELF program header size " + std::to_string(phentsize));
  const std::uint64_t sh_end = shoff + std::uint64_t(shentsize) * shnum;
  const std::uint64_t ph_end = phoff + std::uint64_t(phentsize) * phnum;
  if (shoff > limit || sh_end > limit) return too_large("the ELF section header table", sh_end, limit);
  if (phoff > limit || ph_end > limit) return too_large("the ELF program header table", ph_end, limit);
  end = std::max({end, shnum ? sh_end : 0, phnum ? ph_end : 0});
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint8_t* sh = p + shoff + std::uint64_t(shentsize) * i;
    if (get<std::uint32_t>(sh, 4) == 8 /* SHT_NOBITS */) continue;
    const auto off = get<std::uint64_t>(sh, 24), size = get<std::uint64_t>(sh, 32);
    if (off > limit || size > limit - off) return too_large(("ELF section " + std::to_string(i)).c_str(), off + size, limit);
    end = std::max(end, off + size);
  }
  for (std::uint16_t i = 0; i < phnum; ++i) {
    const std::uint8_t* ph = p + phoff + std::uint64_t(phentsize) * i;
    const auto off = get<std::uint64_t>(ph, 8), size = get<std::uint64_t>(ph, 32);  // p_offset, p_filesz
    if (off > limit || size > limit - off) return too_large(("ELF segment " + std::to_string(i)).c_str(), off + size, limit);
    end = std::max(end, off + size);
  }
  return static_cast<std::size_t>(end);
}

}  // namespace

result<std::size_t> image_extent(const void* image, std::size_t limit) {
  if (!image) return make_error(errc::invalid_argument, "null image");
  const auto* p = static_cast<const std::uint8_t*>(image);
  // The magic is compared byte by byte, stopping at the first difference: a short PTX-like string
  // ("" or "x") ends with its NUL before 4 bytes, and memcmp may read all 4 (past the caller's memory).
  if (limit < 4) return make_error(errc::truncated, "an image needs at least 4 bytes");
  static const std::uint8_t elf[4] = {0x7f, 'E', 'L', 'F'};
  static const std::uint8_t fatbin[4] = {0x50, 0xED, 0x55, 0xBA};
  auto starts_with = [p](const std::uint8_t(&magic)[4]) {
    for (int i = 0; i < 4; ++i)
      if (p[i] != magic[i]) return false;
    return true;
  };
  if (starts_with(elf)) {
    if (limit < 20 || p[4] != 2 || p[5] != 1 || get<std::uint16_t>(p, 18) != 190)
      return make_error(errc::bad_magic, "an ELF file that is not a 64-bit little-endian CUDA cubin (e_machine 190)");
    return elf_extent(p, limit);
  }
  if (starts_with(fatbin)) {
    if (limit < 16) return too_large("the fatbin header", 16, limit);
    const auto header = get<std::uint16_t>(p, 6);
    const auto size = get<std::uint64_t>(p, 8);
    if (header < 16) return make_error(errc::malformed, "fatbin header size " + std::to_string(header));
    if (size > limit || header > limit - size) return too_large("the fatbin", header + size, limit);
    return static_cast<std::size_t>(header + size);
  }
  const void* nul = std::memchr(p, 0, limit);
  if (!nul) return make_error(errc::malformed, "no terminating NUL within " + std::to_string(limit) + " bytes (PTX text must end with one)");
  const std::size_t n = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - p) + 1;
  if (detect_input(byte_span(p, n)) != input_kind::ptx)
    return make_error(errc::unknown_kind, "neither a cubin (ELF), an nvcc fatbin (0xBA55ED50) nor PTX text (.version, .target)");
  return n;
}

}  // namespace fatpack::core
