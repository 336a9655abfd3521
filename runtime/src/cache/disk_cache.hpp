// The disk cache: the sass_cache the runtime installs by default (docs/cache.md). Layers, searched
// in order: prebuilt read-only directories (FATPACK_CACHE_PREBUILT_PATH, add_prebuilt_cache), then
// the per-user cache. Exact hits are looked for in every layer before entries of another driver.
//
// Degradation (docs/design.md §3.7): nothing here fails a load. A directory that cannot be used gives one
// warning and the cache goes on read-only (EROFS, EACCES, network file system, lock errors, a full
// disk or quota: ENOSPC/EDQUOT while writing) or memory-only (no usable directory, refused for
// security, setuid). Other I/O errors skip that one entry.
#pragma once

#include "cache/config.hpp"
#include "cache/store.hpp"
#include "cache/sass_cache.hpp"

#include "fatpack/error.hpp"
#include "fatpack/fatpack.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

class disk_cache final : public sass_cache {
 public:
  static std::shared_ptr<disk_cache> create(const config& cfg);
  // A cache over one directory already opened (`fatpack warm`): it is the only layer, read-write
  // when `dir` is, exact hits only (an entry of another driver is no reason not to compile).
  static std::shared_ptr<disk_cache> over(std::shared_ptr<cache_dir> dir);

  std::optional<cache_hit> find(const jit_key& key, bool allow_other_driver) noexcept override;
  std::string store(const jit_key& key, core::byte_span sass) noexcept override;
  std::unique_ptr<compile_guard> begin_compile(const jit_key& key) noexcept override;
  // Only when the result can be kept (a read-only or memory-only cache would compile for nothing).
  bool refresh_other_driver() const noexcept override { return cfg_.use_other_driver && user_writable_.load(); }
  const char* name() const noexcept override { return "disk"; }

  status add_prebuilt(const std::string& dir);
  std::string user_path() const;               // the per-user cache root ("" when none)
  cache_mode mode() const;                     // read_write, read_only, memory_only (never disabled)
  std::vector<std::string> prebuilt_paths() const;

 private:
  explicit disk_cache(config cfg) : cfg_(std::move(cfg)) {}
  std::vector<std::shared_ptr<cache_dir>> layers() const;
  std::shared_ptr<cache_dir> writable_user() const;
  // Warns once per `what` (one warning per kind of trouble, not one per entry).
  void warn_once(const std::string& what, const std::string& text);
  // The per-user cache becomes read-only for the rest of the process.
  void degrade(const std::string& why);

  config cfg_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<cache_dir>> prebuilt_;
  std::shared_ptr<cache_dir> user_;
  std::atomic<bool> user_writable_{false};
  std::set<std::string> warned_;
};

// The cache the public API installs: disk_cache::create(config_from_env()), or null_sass_cache when
// FATPACK_CACHE_DISABLE is set.
std::shared_ptr<sass_cache> make_default_sass_cache();

}  // namespace fatpack::detail::cache
