// The dynamic loader's cache (/etc/ld.so.cache, written by glibc's ldconfig), read without the
// loader: which file dlopen("libnvrtc.so.13") would take from the cache, so that fatpack can locate
// NVRTC (and read its build-id) before loading anything (jit/nvrtc.cpp, docs/nvrtc.md §3).
//
// The file is hostile input. Only glibc's "new" format is read ("glibc-ld.so.cache" + version "1.1",
// 48-byte header, 24-byte entries, string offsets relative to that header), alone or after the old
// "ld.so-1.7.0" table that ldconfig before glibc 2.32 wrote in front of it; a file of the old format
// alone is not read. The file is at most 16 MiB and read with one bounded read; every entry's key and
// path offsets must lie inside the header's string table, which must end with a NUL, so every string
// ends inside the file; entry count times entry size must fit. Anything else is `malformed`, which a
// caller treats like no cache at all. Only entries for this process's ABI are taken (x86-64:
// FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 = 0x0303, aarch64: FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64 = 0x0a03,
// which is what glibc's _dl_cache_check_flags accepts there) and only those without a hwcap
// requirement (hwcap 0: the entry for any CPU, not a glibc-hwcaps or legacy hwcap subdirectory);
// among those, the first in the file's order, as the loader takes them. Other hosts (and big-endian
// ones) read no cache: `absent`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fatpack::detail::os {

inline constexpr const char* k_ld_cache_path = "/etc/ld.so.cache";
inline constexpr std::size_t k_max_ld_cache_bytes = std::size_t(16) << 20;
inline constexpr std::size_t k_max_ld_cache_path_bytes = 4096;  // a listed path, NUL included

enum class ld_cache_status {
  found,       // `path` is the file the cache lists for the name
  not_listed,  // a well-formed cache without a usable entry for the name
  absent,      // no file, unreadable, not a regular file, or a host whose cache is not read
  malformed,   // the file is not a cache this reader accepts (`why` says what): treat as absent
};

struct ld_cache_answer {
  ld_cache_status status = ld_cache_status::absent;
  std::string path;  // found: the path the entry names (absolute, < 4 KiB)
  std::string why;   // absent, malformed: the reason, for a debug log and the tests
};

// The cache's bytes (at most k_max_ld_cache_bytes, else malformed) and the name to look up
// ("libnvrtc.so.13"; an empty name or one with a NUL or '/' is never listed).
ld_cache_answer ld_cache_lookup(std::string_view bytes, std::string_view name);

// A cache file, read whole with a bounded read.
struct ld_cache_file {
  ld_cache_status status = ld_cache_status::absent;  // absent, malformed (too large, short read), or found: `bytes` read
  std::string bytes;
  std::string why;
};
ld_cache_file read_ld_cache(const std::string& cache_path);

// read_ld_cache, then ld_cache_lookup (the path is injectable for tests; fatpack reads k_ld_cache_path).
ld_cache_answer ld_cache_find(const std::string& cache_path, std::string_view name);

}  // namespace fatpack::detail::os
