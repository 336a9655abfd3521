// ELF build-id reader (build_id.hpp): pread on one descriptor, every read bounded and checked.
#include "platform/build_id.hpp"

#include "fatpack/core/hex.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::detail::os {

namespace {

constexpr std::size_t k_max_program_headers = 64;
constexpr std::size_t k_max_note_bytes = 64 * 1024;
constexpr std::uint32_t k_nt_gnu_build_id = 3;

// Reads exactly `n` bytes at `offset`; false on a short read or an error.
bool read_at(int fd, std::uint64_t offset, void* out, std::size_t n) {
  auto* p = static_cast<std::uint8_t*>(out);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // ELF64 little-endian, as the host (x86-64, aarch64)
  return v;
}

// The build-id in one note segment's bytes, or "".
std::string build_id_in_notes(const std::vector<std::uint8_t>& notes, std::size_t align) {
  align = align == 8 ? 8 : 4;
  auto round = [&](std::uint64_t n) { return (n + align - 1) / align * align; };
  std::size_t p = 0;
  while (notes.size() - p >= 12) {
    const auto name_size = load<std::uint32_t>(&notes[p]);
    const auto desc_size = load<std::uint32_t>(&notes[p + 4]);
    const auto type = load<std::uint32_t>(&notes[p + 8]);
    const std::uint64_t name_room = round(name_size), desc_room = round(desc_size);
    const std::size_t left = notes.size() - p - 12;
    if (name_room > left || desc_room > left - name_room) return {};
    if (type == k_nt_gnu_build_id && name_size == 4 && std::memcmp(&notes[p + 12], "GNU", 4) == 0 && desc_size > 0)
      return core::hex_bytes(&notes[p + 12 + name_room], desc_size);
    p += 12 + static_cast<std::size_t>(name_room + desc_room);
  }
  return {};
}

}  // namespace

namespace {

// An ELF file's descriptor, size and program headers, read and bounds-checked; fd < 0 with `why` set
// when the file cannot be read or is not a 64-bit little-endian ELF file.
struct elf_file {
  int fd = -1;
  std::uint64_t size = 0;
  std::size_t phentsize = 0, phnum = 0;
  std::vector<std::uint8_t> ph;
  elf_file() = default;
  elf_file(const elf_file&) = delete;
  elf_file& operator=(const elf_file&) = delete;
  ~elf_file() {
    if (fd >= 0) ::close(fd);
  }
  const std::uint8_t* header(std::size_t i) const { return &ph[i * phentsize]; }
};

bool open_elf(const std::string& path, elf_file& f, std::string& why) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) {
    why = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return false;
  }
  f.size = static_cast<std::uint64_t>(st.st_size);
  std::uint8_t eh[64];
  if (f.size < sizeof eh || !read_at(f.fd, 0, eh, sizeof eh) || std::memcmp(eh, "\x7f" "ELF", 4) != 0 ||
      eh[4] != 2 /* ELFCLASS64 */ || eh[5] != 1 /* little-endian */) {
    why = "not a 64-bit little-endian ELF file";
    return false;
  }
  const auto phoff = load<std::uint64_t>(eh + 32);
  f.phentsize = load<std::uint16_t>(eh + 54);
  f.phnum = load<std::uint16_t>(eh + 56);
  if (f.phentsize < 56 || f.phnum == 0 || f.phnum > k_max_program_headers || phoff > f.size ||
      std::uint64_t(f.phentsize) * f.phnum > f.size - phoff) {
    why = "its program headers are missing or out of bounds";
    return false;
  }
  f.ph.resize(f.phentsize * f.phnum);
  if (!read_at(f.fd, phoff, f.ph.data(), f.ph.size())) {
    why = "cannot read its program headers";
    return false;
  }
  return true;
}

// A loadable segment past the file's end: a truncated library (a copy cut short, a full disk).
// dlopen would map it and the process would die of SIGBUS at the first touch past the end.
std::string truncation_of(const elf_file& f) {
  for (std::size_t i = 0; i < f.phnum; ++i) {
    const std::uint8_t* h = f.header(i);
    if (load<std::uint32_t>(h) != 1 /* PT_LOAD */) continue;
    const auto off = load<std::uint64_t>(h + 8);
    const auto size = load<std::uint64_t>(h + 32);
    if (off > f.size || size > f.size - off)
      return "truncated: a loadable segment ends at byte " + std::to_string(off + size) + ", past the file's end (" +
             std::to_string(f.size) + " bytes)";
  }
  return {};
}

}  // namespace

std::string elf_build_id(const std::string& path, std::string& why) {
  elf_file f;
  if (!open_elf(path, f, why)) return {};
  // A truncated file still has an identity when its notes survive: a cache hit needs only that (it
  // never loads the library), and a miss is refused at load time by elf_truncation.
  std::size_t note_bytes = 0;
  for (std::size_t i = 0; i < f.phnum; ++i) {
    const std::uint8_t* h = f.header(i);
    if (load<std::uint32_t>(h) != 4 /* PT_NOTE */) continue;
    const auto off = load<std::uint64_t>(h + 8);
    const auto size = load<std::uint64_t>(h + 32);
    const auto align = load<std::uint64_t>(h + 48);
    if (off > f.size || size > f.size - off || size > k_max_note_bytes - note_bytes) continue;
    note_bytes += static_cast<std::size_t>(size);
    std::vector<std::uint8_t> notes(static_cast<std::size_t>(size));
    if (!read_at(f.fd, off, notes.data(), notes.size())) continue;
    std::string id = build_id_in_notes(notes, static_cast<std::size_t>(align));
    if (!id.empty()) return id;
  }
  why = "no build-id note (NT_GNU_BUILD_ID)";
  return {};
}

std::string elf_truncation(const std::string& path) {
  elf_file f;
  std::string why;
  if (!open_elf(path, f, why)) return {};  // dlopen says what is wrong with it
  return truncation_of(f);
}

}  // namespace fatpack::detail::os
