// The public cache API (fatpack.hpp, "JIT cache"): statistics, status, prebuilt layers, refreshes;
// and the wiring of the disk cache into the JIT service (wiring.hpp).
#include "api/wiring.hpp"

#include "cache/config.hpp"
#include "cache/fs.hpp"
#include "cache/stats.hpp"
#include "cache/directory.hpp"
#include "jit/service.hpp"
#include "remote/remote_cache.hpp"
#include "remote/signature.hpp"

#include <mutex>
#include <optional>

#include "fatpack/fatpack.hpp"

namespace fatpack::detail {

namespace {

// set_cache_remote() before the cache is open: used instead of the environment's remote.
std::mutex& remote_override_mu() {
  static std::mutex m;
  return m;
}
std::optional<remote::remote_config>& remote_override() {
  static std::optional<remote::remote_config> c;
  return c;
}

// Where the breaker of a remote keeps its state: the per-user cache's format directory when the
// cache writes it; else the process's memory.
std::string remote_state_dir(const std::shared_ptr<sass_cache>& local) {
  auto d = std::dynamic_pointer_cast<cache::disk_cache>(local);
  if (!d || d->mode() != cache_mode::read_write || d->user_path().empty()) return {};
  return cache::format_dir(d->user_path());
}

std::shared_ptr<sass_cache> local_of(std::shared_ptr<sass_cache> c) {
  if (auto r = std::dynamic_pointer_cast<remote::remote_cache>(c)) return r->local();
  return c;
}

}  // namespace

namespace {

// The environment's disk cache, with the fleet layer the environment or set_cache_remote asks for.
std::shared_ptr<sass_cache> make_default_cache() {
  std::shared_ptr<sass_cache> local = cache::make_default_sass_cache();
  if (std::string_view(local->name()) == "none") return local;  // FATPACK_CACHE_DISABLE: no remote either
  std::lock_guard<std::mutex> g(remote_override_mu());
  if (auto& o = remote_override()) {
    if (o->store.url.empty()) return local;
    return std::shared_ptr<sass_cache>(remote::remote_cache::create(local, *o, remote_state_dir(local)));
  }
  return remote::with_remote_from_env(local, remote_state_dir(local));
}

}  // namespace

void wire_default_cache() { install_sass_cache_if_none(make_default_cache); }

void arm_default_cache() { arm_sass_cache(make_default_cache); }

std::shared_ptr<cache::disk_cache> active_disk_cache() {
  if (!sass_cache_installed()) return nullptr;
  return std::dynamic_pointer_cast<cache::disk_cache>(local_of(get_sass_cache()));
}

std::shared_ptr<remote::remote_cache> active_remote_cache() {
  if (!sass_cache_installed()) return nullptr;
  return std::dynamic_pointer_cast<remote::remote_cache>(get_sass_cache());
}

status set_remote(const remote_cache_options& o) {
  remote::remote_config c = remote::config_from_options(o);
  if (!c.problems.empty()) return error{errc::invalid_argument, 0, "set_cache_remote: " + c.problems.front(), {}};
  {
    std::lock_guard<std::mutex> g(remote_override_mu());
    remote_override() = c;
  }
  if (sass_cache_installed()) {
    auto local = local_of(get_sass_cache());
    if (std::string_view(local->name()) == "none") {
      if (c.store.url.empty()) return {};  // no remote to remove
      return error{errc::invalid_argument, 0, "set_cache_remote: the JIT cache is disabled (FATPACK_CACHE_DISABLE)", {}};
    }
    // Uploads queued by the layer being replaced finish first (bounded by their timeouts).
    get_sass_cache()->flush(-1);
    if (c.store.url.empty()) set_sass_cache(local);
    else set_sass_cache(remote::remote_cache::create(local, c, remote_state_dir(local)));
  }
  return {};
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
  const auto& r = detail::remote::counters();
  s.remote_hits = r.hits;
  s.remote_misses = r.misses;
  s.remote_uploads = r.uploads;
  s.remote_present = r.present;
  s.remote_rejected = r.rejected;
  s.remote_faults = r.faults;
  s.remote_skipped = r.skipped;
  s.remote_lease_waits = r.lease_waits;
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
  if (auto r = detail::active_remote_cache()) i.remote = r->describe();
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

status set_cache_remote(const remote_cache_options& options) { return detail::set_remote(options); }

}  // namespace fatpack
