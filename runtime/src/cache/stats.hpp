// Cache statistics of this process (docs/cache.md §9): counters updated by the JIT service and the
// disk cache, read through fatpack::cache_stats() / fatpack_cache_stats().
#pragma once

#include <atomic>
#include <cstdint>

namespace fatpack::detail::cache {

struct counters {
  std::atomic<std::uint64_t> hits_exact{0};
  std::atomic<std::uint64_t> hits_other_driver{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> jits{0};
  std::atomic<std::uint64_t> jit_us{0};
  std::atomic<std::uint64_t> refreshes{0};       // background re-JITs after other-driver hits
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
