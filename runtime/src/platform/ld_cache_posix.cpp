// The dynamic loader's cache reader (ld_cache.hpp). Layout (glibc's dl-cache.h), little-endian:
//   old format (optional): "ld.so-1.7.0" (11 bytes), pad to 12, u32 nlibs, nlibs x 12-byte entries;
//     the new header follows at the next multiple of 8;
//   new format: "glibc-ld.so.cache" (17) "1.1" (3), u32 nlibs @20, u32 len_strings @24, u8 flags @28
//     (bits 0-1: 0 unset, 1 invalid, 2 little-endian, 3 big-endian), pad, u32 extension_offset @32,
//     u32 unused[3]; then nlibs entries of { i32 flags, u32 key, u32 value, u32 osversion, u64 hwcap },
//     then the string table (len_strings bytes). key and value are offsets from the new header.
#include "platform/ld_cache.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::detail::os {

namespace {

constexpr std::string_view k_old_magic = "ld.so-1.7.0";
constexpr std::string_view k_new_magic = "glibc-ld.so.cache1.1";
constexpr std::uint64_t k_old_header = 16, k_old_entry = 12;
constexpr std::uint64_t k_new_header = 48, k_new_entry = 24;
constexpr std::uint8_t k_endian_mask = 3, k_endian_invalid = 1, k_endian_big = 3;

#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__LP64__) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define FATPACK_LD_CACHE_READ 1
#  if defined(__x86_64__)
constexpr std::int32_t k_host_flags = 0x0303;  // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
#  else
constexpr std::int32_t k_host_flags = 0x0a03;  // FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
#  endif
#else
#  define FATPACK_LD_CACHE_READ 0
#endif

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the file is little-endian, as the hosts that read it
  return v;
}

ld_cache_answer malformed(std::string why) {
  return {ld_cache_status::malformed, {}, "malformed: " + std::move(why)};
}

}  // namespace

ld_cache_answer ld_cache_lookup(std::string_view bytes, std::string_view name) {
#if !FATPACK_LD_CACHE_READ
  (void)bytes;
  (void)name;
  return {ld_cache_status::absent, {}, "the loader's cache is not read on this architecture"};
#else
  if (bytes.size() > k_max_ld_cache_bytes)
    return malformed("larger than " + std::to_string(k_max_ld_cache_bytes >> 20) + " MiB");
  const std::uint64_t size = bytes.size();
  const char* const data = bytes.data();

  // Where the new-format header is: at 0, or after the old format's table.
  std::uint64_t base = 0;
  if (size >= k_old_magic.size() && std::memcmp(data, k_old_magic.data(), k_old_magic.size()) == 0) {
    if (size < k_old_header) return malformed("truncated old-format header");
    const std::uint64_t old_entries = load<std::uint32_t>(data + 12);
    const std::uint64_t old_end = k_old_header + old_entries * k_old_entry;  // < 2^36: no overflow
    base = (old_end + 7) & ~std::uint64_t(7);
    if (base > size || size - base < k_new_header) return malformed("old format only, or its table runs past the end");
  }
  if (size - base < k_new_header) return malformed("truncated header");
  const char* const hdr = data + base;
  if (std::memcmp(hdr, k_new_magic.data(), k_new_magic.size()) != 0)
    return malformed("no glibc-ld.so.cache1.1 header");
  const std::uint64_t region = size - base;  // offsets are relative to hdr
  const std::uint64_t count = load<std::uint32_t>(hdr + 20);
  const std::uint64_t len_strings = load<std::uint32_t>(hdr + 24);
  const std::uint8_t endian = static_cast<std::uint8_t>(hdr[28]) & k_endian_mask;
  if (endian == k_endian_invalid || endian == k_endian_big) return malformed("marked invalid or big-endian");
  const std::uint64_t strings_begin = k_new_header + count * k_new_entry;  // < 2^37: no overflow
  if (strings_begin > region) return malformed(std::to_string(count) + " entries do not fit in the file");
  if (len_strings > region - strings_begin) return malformed("the string table runs past the end");
  const std::uint64_t strings_end = strings_begin + len_strings;
  // Every string starts in the table and the table ends with a NUL: every string ends in the file.
  if (count > 0 && (len_strings == 0 || hdr[strings_end - 1] != '\0'))
    return malformed("the string table does not end with a NUL");

  const bool plain_name = !name.empty() && name.find('\0') == std::string_view::npos &&
                          name.find('/') == std::string_view::npos && name.size() < k_max_ld_cache_path_bytes;
  ld_cache_answer answer{ld_cache_status::not_listed, {}, {}};
  // Every entry is checked, not only those before a match: a damaged file is rejected whatever it lists.
  // The work is bounded: per entry, constant checks plus at most name.size() + 1 bytes compared.
  for (std::uint64_t i = 0; i < count; ++i) {
    const char* e = hdr + k_new_header + i * k_new_entry;
    const std::int32_t flags = load<std::int32_t>(e);
    const std::uint64_t key = load<std::uint32_t>(e + 4);
    const std::uint64_t value = load<std::uint32_t>(e + 8);
    const std::uint64_t hwcap = load<std::uint64_t>(e + 16);
    if (key < strings_begin || key >= strings_end || value < strings_begin || value >= strings_end)
      return malformed("entry " + std::to_string(i) + " points outside the string table");
    if (answer.status == ld_cache_status::found || !plain_name || flags != k_host_flags || hwcap != 0) continue;
    if (strings_end - key <= name.size() || std::memcmp(hdr + key, name.data(), name.size()) != 0 ||
        hdr[key + name.size()] != '\0')
      continue;
    const std::uint64_t room = std::min<std::uint64_t>(strings_end - value, k_max_ld_cache_path_bytes);
    const void* nul = std::memchr(hdr + value, '\0', static_cast<std::size_t>(room));
    if (!nul) return malformed("entry " + std::to_string(i) + ": a path of 4 KiB or more");
    const std::size_t length = static_cast<std::size_t>(static_cast<const char*>(nul) - (hdr + value));
    if (length == 0 || hdr[value] != '/') return malformed("entry " + std::to_string(i) + ": a path that is not absolute");
    answer.status = ld_cache_status::found;
    answer.path.assign(hdr + value, length);
  }
  return answer;
#endif
}

ld_cache_file read_ld_cache(const std::string& cache_path) {
  ld_cache_file out;
#if !FATPACK_LD_CACHE_READ
  out.why = "the loader's cache is not read on this architecture";
  (void)cache_path;
  return out;
#else
  const int fd = ::open(cache_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    out.why = cache_path + ": " + std::strerror(errno);
    return out;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    out.why = cache_path + ": not a regular file";
    return out;
  }
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > k_max_ld_cache_bytes) {
    ::close(fd);
    out.status = ld_cache_status::malformed;
    out.why = cache_path + ": malformed: larger than " + std::to_string(k_max_ld_cache_bytes >> 20) + " MiB";
    return out;
  }
  out.bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.bytes.size()) {
    const ssize_t r = ::pread(fd, &out.bytes[got], out.bytes.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  if (got != out.bytes.size()) {
    out.bytes.clear();
    out.status = ld_cache_status::malformed;
    out.why = cache_path + ": malformed: shorter than its size (changed while read?)";
    return out;
  }
  out.status = ld_cache_status::found;
  return out;
#endif
}

ld_cache_answer ld_cache_find(const std::string& cache_path, std::string_view name) {
  ld_cache_file f = read_ld_cache(cache_path);
  if (f.status != ld_cache_status::found) return {f.status, {}, std::move(f.why)};
  ld_cache_answer a = ld_cache_lookup(f.bytes, name);
  if (!a.why.empty()) a.why = cache_path + ": " + a.why;
  return a;
}

}  // namespace fatpack::detail::os
