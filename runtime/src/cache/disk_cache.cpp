// The disk cache (disk_cache.hpp).
#include "cache/disk_cache.hpp"

#include "cache/directory.hpp"
#include "cache/eviction.hpp"
#include "cache/fs.hpp"
#include "cache/stats.hpp"
#include "platform/log.hpp"

#include <cerrno>

namespace fatpack::detail::cache {

namespace {

class key_guard final : public compile_guard {
 public:
  explicit key_guard(std::unique_ptr<key_lock> l) : l_(std::move(l)) {}

 private:
  std::unique_ptr<key_lock> l_;
};

}  // namespace

std::shared_ptr<disk_cache> disk_cache::create(const config& cfg) {
  std::shared_ptr<disk_cache> c(new disk_cache(cfg));
  for (const auto& w : cfg.warnings) c->warn_once(w, w);
  for (const auto& p : cfg.prebuilt) {
    if (auto s = c->add_prebuilt(p); !s) c->warn_once("prebuilt " + p, s.error().message);
  }
  dir_verdict v = prepare_user_dir(cfg.path, cfg.read_only);
  if (!v.warning.empty()) c->warn_once("user dir", "JIT cache: " + v.warning);
  if (v.access != dir_access::refused) {
    const bool rw = v.access == dir_access::read_write;
    c->user_ = cache_dir::open(cfg.path, rw, cfg.max_bytes, "user", false, cfg.codec, !v.network);
    c->user_writable_ = rw;
  }
  log_line(log_level::debug, "JIT cache: " + (cfg.path.empty() ? std::string("(no directory)") : cfg.path) + " " +
                                 cache_mode_name(c->mode()) + (cfg.prebuilt.empty() ? "" : ", " + std::to_string(c->prebuilt_.size()) + " prebuilt layer(s)"));
  return c;
}

std::shared_ptr<disk_cache> disk_cache::over(std::shared_ptr<cache_dir> dir) {
  config cfg;
  cfg.path = dir->root();
  cfg.use_other_driver = false;
  std::shared_ptr<disk_cache> c(new disk_cache(cfg));
  c->user_writable_ = dir->writable();
  c->user_ = std::move(dir);
  return c;
}

status disk_cache::add_prebuilt(const std::string& dir) {
  dir_verdict v = check_prebuilt_dir(dir);
  if (v.access == dir_access::refused)
    return error{errc::invalid_argument, 0, v.warning.empty() ? dir + ": not usable as a prebuilt cache" : v.warning, {}};
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& p : prebuilt_)
    if (p->root() == dir) return {};
  // Read, never mapped: a prebuilt layer is someone else's files, which may be rewritten in place
  // (`cp` over an entry truncates it first), and a mapping of a shrunk file faults (SIGBUS).
  prebuilt_.push_back(cache_dir::open(dir, false, 0, "prebuilt " + dir, true, entry_codec::stored, false));
  return {};
}

std::vector<std::shared_ptr<cache_dir>> disk_cache::layers() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::shared_ptr<cache_dir>> v = prebuilt_;
  if (user_) v.push_back(user_);
  return v;
}

std::shared_ptr<cache_dir> disk_cache::writable_user() const {
  if (!user_writable_.load()) return nullptr;
  std::lock_guard<std::mutex> g(mu_);
  return user_;
}

std::string disk_cache::user_path() const {
  std::lock_guard<std::mutex> g(mu_);
  return user_ ? user_->root() : std::string();
}

cache_mode disk_cache::mode() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!user_) return cache_mode::memory_only;
  return user_writable_.load() ? cache_mode::read_write : cache_mode::read_only;
}

std::vector<std::string> disk_cache::prebuilt_paths() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> v;
  for (const auto& p : prebuilt_) v.push_back(p->root());
  return v;
}

void disk_cache::warn_once(const std::string& what, const std::string& text) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!warned_.insert(what).second) return;
  }
  log_line(log_level::warn, text);
}

void disk_cache::degrade(const std::string& why) {
  if (!user_writable_.exchange(false)) return;
  warn_once("degrade", "JIT cache: " + why + "; the cache is read-only for the rest of this process");
}

std::optional<cache_hit> disk_cache::find(const jit_key& key, bool allow_other_driver) noexcept {
  try {
    const full_key k = make_full_key(key);
    const auto ls = layers();
    for (const auto& l : ls)
      if (auto c = l->read_exact(k, key.target_arch)) return cache_hit{std::move(*c), true, l->label()};
    if (!allow_other_driver || !cfg_.use_other_driver) return std::nullopt;
    for (const auto& l : ls) {
      std::string from;
      if (auto c = l->read_other_driver(k, key.target_arch, from)) {
        log_line(log_level::debug, "JIT cache (" + l->label() + "): using an entry built by driver " + from +
                                       " (this driver: " + k.driver.text + ")");
        return cache_hit{std::move(*c), false, l->label()};
      }
    }
  } catch (const std::exception& e) {
    warn_once("find", std::string("JIT cache: lookup failed: ") + e.what());
  }
  return std::nullopt;
}

std::string disk_cache::store(const jit_key& key, core::byte_span sass) noexcept {
  try {
    auto u = writable_user();
    if (!u) return user_path().empty() ? "the cache is memory-only" : "the cache is read-only";
    std::string why;
    int e = u->write(make_full_key(key), sass, why);
    if (e == 0) {
      after_store(*u);
      return {};
    }
    if (e == EINVAL) {
      log_line(log_level::debug, "JIT cache: not stored: " + why);
    } else if (e == EFBIG) {
      u->warn_once("too big", "JIT cache: not stored: " + why);
    } else if (e == ENOSPC || e == EDQUOT) {
      degrade("the disk is full or the quota exceeded (" + why + ")");
    } else if (e == EROFS || e == EACCES || e == EPERM) {
      degrade("cannot write (" + why + ")");
    } else {
      stats().io_errors++;
      // The directory's "io" kind: one line for this and its other I/O trouble (store.hpp).
      u->warn_once("io", "JIT cache: an entry could not be written: " + why + "; the cache stays writable");
    }
    return why.empty() ? errno_text(e) : why;
  } catch (const std::exception& ex) {
    warn_once("store", std::string("JIT cache: store failed: ") + ex.what());
    return std::string("store failed: ") + ex.what();
  }
}

std::unique_ptr<compile_guard> disk_cache::begin_compile(const jit_key& key) noexcept {
  try {
    auto u = writable_user();
    if (!u) return nullptr;  // read-only processes do not take locks (nor publish)
    const full_key k = make_full_key(key);
    key_lock::outcome result;
    std::string why;
    auto l = key_lock::acquire(u->inflight_lock_path(), cache_dir::lock_hash(k), cfg_.lock_wait_ms,
                               [&] { return u->entry_exists(k); }, result, why, cfg_.holder_stall_s);
    switch (result) {
      case key_lock::outcome::acquired: return std::make_unique<key_guard>(std::move(l));
      case key_lock::outcome::acquired_after_wait: stats().lock_waits++; return std::make_unique<key_guard>(std::move(l));
      case key_lock::outcome::ready: stats().lock_waits++; return nullptr;
      case key_lock::outcome::timed_out:
        stats().lock_timeouts++;
        if (!why.empty()) {  // the holder's record: it is stopped, gone or makes no progress
          warn_once("lock holder", "JIT cache: not waiting for the process compiling the same kernel: " + why +
                                       "; compiling it here");
          return nullptr;
        }
        warn_once("lock timeout", "JIT cache: another process has been compiling the same kernel for more than " +
                                      std::to_string(cfg_.lock_wait_ms) + " ms; compiling it here too");
        return nullptr;
      case key_lock::outcome::failed: degrade("the per-key lock failed (" + why + ")"); return nullptr;
    }
  } catch (const std::exception& e) {
    warn_once("lock", std::string("JIT cache: lock failed: ") + e.what());
  }
  return nullptr;
}

std::shared_ptr<sass_cache> make_default_sass_cache() {
  config cfg = config_from_env();
  if (cfg.disabled) return std::make_shared<null_sass_cache>();
  return disk_cache::create(cfg);
}

}  // namespace fatpack::detail::cache
