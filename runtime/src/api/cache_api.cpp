// The public cache API (fatpack.hpp, "JIT cache"): statistics, status, prebuilt layers, refreshes;
// and the wiring of the disk cache into the JIT service (wiring.hpp).
#include "api/wiring.hpp"

#include "cache/config.hpp"
#include "cache/fs.hpp"
#include "cache/stats.hpp"
#include "jit/service.hpp"

#include "fatpack/fatpack.hpp"

namespace fatpack::detail {

void wire_default_cache() { install_sass_cache_if_none([] { return cache::make_default_sass_cache(); }); }

std::shared_ptr<cache::disk_cache> active_disk_cache() {
  if (!sass_cache_installed()) return nullptr;
  return std::dynamic_pointer_cast<cache::disk_cache>(get_sass_cache());
}

}  // namespace fatpack::detail

namespace fatpack {

cache_statistics cache_stats() {
  const auto& j = detail::jit_service::instance().counters();
  const auto& c = detail::cache::stats();
  cache_statistics s;
  s.hits_exact = j.hits_exact;
  s.hits_other_driver = j.hits_other_driver;
  s.misses = j.misses;
  s.jits = j.jits;
  s.jit_ms = static_cast<double>(j.jit_us.load()) / 1000.0;
  s.refreshes = j.refreshes;
  s.upgrades = j.upgrades;
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
  if (!detail::sass_cache_installed()) {
    // Nothing has compiled yet: say what the environment configures, without opening (or creating)
    // any directory; the mode can still change when the cache opens at the first compile (a
    // directory that cannot be used makes it read-only or memory-only, docs/cache.md).
    const auto cfg = detail::cache::config_from_env();
    if (!cfg.disabled && detail::cache::current_fs().privileged_exec()) {
      i.mode = cache_mode::memory_only;  // a setuid/setgid process never uses a cache directory
      return i;
    }
    i.mode = cfg.disabled ? cache_mode::disabled
             : cfg.path.empty() ? cache_mode::memory_only
             : cfg.read_only    ? cache_mode::read_only
                                : cache_mode::read_write;
    if (!cfg.disabled) {
      i.path = cfg.path;
      i.prebuilt = cfg.prebuilt;
    }
    return i;
  }
  auto d = detail::active_disk_cache();
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
  detail::wire_default_cache();  // adding a layer is using the cache: open it now
  auto d = detail::active_disk_cache();
  if (!d)
    return error{errc::invalid_argument, 0,
                 "add_prebuilt_cache(" + std::string(directory) + "): the disk cache is disabled (FATPACK_CACHE_DISABLE)", {}};
  return d->add_prebuilt(std::string(directory));
}

void wait_cache_refresh() { detail::jit_service::instance().wait_refreshes(); }

}  // namespace fatpack
