// The storage's statistics in this process (docs/cache.md §9), updated by the disk cache. The JIT
// service counts hits, misses and compiles itself (jit_counters); fatpack::cache_stats() shows both.
#pragma once

#include <atomic>
#include <cstdint>

namespace fatpack::detail::cache {

struct counters {
  std::atomic<std::uint64_t> bytes_read{0};      // entry file bytes read
  std::atomic<std::uint64_t> bytes_written{0};   // entry file bytes written
  std::atomic<std::uint64_t> stores{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> rejected{0};        // invalid entries found (never served)
  std::atomic<std::uint64_t> lock_waits{0};      // compiles another process was already doing
  std::atomic<std::uint64_t> lock_timeouts{0};
  std::atomic<std::uint64_t> io_errors{0};
};

counters& stats();

}  // namespace fatpack::detail::cache
