// Cache statistics (stats.hpp) and the public cache API (fatpack.hpp, "JIT cache").
#include "cache/stats.hpp"

#include "cache/disk_cache.hpp"
#include "jit_service.hpp"

#include "fatpack/fatpack.hpp"

namespace fatpack::detail::cache {

counters& stats() {
  static auto* c = new counters();  // leaked: updated by pool threads until exit
  return *c;
}

}  // namespace fatpack::detail::cache

namespace fatpack {

cache_statistics cache_stats() {
  const auto& c = detail::cache::stats();
  cache_statistics s;
  s.hits_exact = c.hits_exact;
  s.hits_other_driver = c.hits_other_driver;
  s.misses = c.misses;
  s.jits = c.jits;
  s.jit_ms = static_cast<double>(c.jit_us.load()) / 1000.0;
  s.refreshes = c.refreshes;
  s.bytes_read = c.bytes_read;
  s.bytes_written = c.bytes_written;
  s.stores = c.stores;
  s.evictions = c.evictions;
  s.rejected = c.rejected;
  s.waited = c.lock_waits;
  s.lock_timeouts = c.lock_timeouts;
  s.io_errors = c.io_errors;
  return s;
}

const char* cache_mode_name(cache_mode m) noexcept {
  switch (m) {
    case cache_mode::read_write: return "read-write";
    case cache_mode::read_only: return "read-only";
    case cache_mode::memory_only: return "memory-only";
    case cache_mode::disabled: return "disabled";
  }
  return "unknown";
}

cache_info cache_status() {
  cache_info i;
  auto d = detail::cache::active_disk_cache();
  if (!d) {
    i.mode = cache_mode::disabled;
    return i;
  }
  i.path = d->user_path();
  i.mode = d->mode();
  i.prebuilt = d->prebuilt_paths();
  return i;
}

status add_prebuilt_cache(std::string_view directory) {
  auto d = detail::cache::active_disk_cache();
  if (!d)
    return error{errc::invalid_argument, 0,
                 "add_prebuilt_cache(" + std::string(directory) + "): the disk cache is disabled (FATPACK_CACHE_DISABLE)", {}};
  return d->add_prebuilt(std::string(directory));
}

void wait_cache_refresh() { detail::jit_service::instance().wait_refreshes(); }

}  // namespace fatpack
