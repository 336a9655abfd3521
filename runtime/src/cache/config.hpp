// Cache settings from the environment (docs/cache.md §9), read once per process when the runtime
// first needs the cache.
//   FATPACK_CACHE_DISABLE=1         no disk cache (in-process memory only)
//   FATPACK_CACHE_PATH=dir          the per-user cache directory (default $XDG_CACHE_HOME/fatpack,
//                                   else $HOME/.cache/fatpack)
//   FATPACK_CACHE_READONLY=1        use the per-user cache without writing it
//   FATPACK_CACHE_MAXSIZE=bytes     size bound, suffixes K/M/G (KiB...); default 1 GiB; 0 = no bound
//   FATPACK_CACHE_PREBUILT_PATH=a:b read-only layers searched before the per-user cache
//   FATPACK_CACHE_OTHER_DRIVER=0    do not use entries another driver built (default: use them, and
//                                   re-JIT for this driver in the background)
//   FATPACK_CACHE_LOCK_WAIT_MS=n    how long a process waits for another one's compile of the same
//                                   key before compiling itself (default 120000)
//   FATPACK_CACHE_HOLDER_STALL_S=n  how long a waiter lets the holder's heartbeat stand still before
//                                   it compiles itself (2-3600, default 10; holders.hpp)
//   FATPACK_DRIVER_VERSION_FILE     test seam: read instead of /proc/driver/nvidia/version
#pragma once

#include "cache/entry.hpp"
#include "cache/holders.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

inline constexpr std::uint64_t default_max_bytes = 1ull << 30;

struct config {
  bool disabled = false;
  std::string path;                    // per-user directory; "" when no home can be found
  bool read_only = false;
  std::uint64_t max_bytes = default_max_bytes;
  std::vector<std::string> prebuilt;   // in search order
  bool use_other_driver = true;
  // How new entries store the cubin (FATPACK_CACHE_CODEC): as it is (the default: a hit reads it
  // straight into the buffer the driver loads) or LZ4 (about a quarter of the disk, a decode per hit).
  entry_codec codec = entry_codec::stored;
  int lock_wait_ms = 120000;
  int holder_stall_s = default_holder_stall_s;
  std::vector<std::string> warnings;   // unparsable values (reported once by the cache)
};

config config_from_env();
// The per-user cache directory: $FATPACK_CACHE_PATH, else $XDG_CACHE_HOME/fatpack, else
// $HOME/.cache/fatpack (it need not exist yet). Root whose $HOME is not its own home (the password
// database's) uses <its own home>/.cache/fatpack, never a directory under another user's home.
std::string default_user_dir();
// "256M" -> 268435456; false on garbage and on a value past 2^64 - 1 bytes (never wraps).
bool parse_size(const std::string& text, std::uint64_t& out);

}  // namespace fatpack::detail::cache
