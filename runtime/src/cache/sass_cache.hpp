// The seam where the JIT cache plugs in: before compiling PTX the JIT service asks the cache for SASS
// bytes; on a miss it takes the cache's cross-process compile lock, asks again, compiles, and hands
// the bytes to the cache. The public API installs the disk cache (docs/cache.md); within one process the JIT
// service keeps every result in memory anyway, so a module is compiled at most once per process
// whatever the cache does.
//
// The key carries everything that decides the output (docs/design.md §3, two tiers): the code key (PTX
// bytes' XXH3 and size, PTX target and ISA, target CC with a/f variant, JIT options, JIT path) and the
// driver identity (cuDriverGetVersion; the driver build string is the cache's to add).
//
// Contract for implementations: every call may come from several threads at once; none may throw;
// a lookup must never return bytes for another key (validate, then miss).
#pragma once

#include "fatpack/core/error.hpp"
#include "fatpack/core/target.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fatpack::detail {

struct jit_key {
  std::uint64_t ptx_xxh3 = 0;       // of the raw PTX bytes (the package's raw_xxh3; a piece's: its text's)
  std::uint64_t ptx_size = 0;
  // A piece of a PTX entry (kernel-granular JIT, load/pieces.hpp): "<xxh3>:<size>" of the whole
  // entry's raw PTX as the package declares them (raw_xxh3, raw_size), so a piece's key names the
  // entry it is made from as well as its own text; empty for a whole entry (whose key is then what
  // it was before pieces existed).
  std::string piece_of;
  core::target ptx_target;          // compute_80
  core::ptx_isa ptx_isa;            // 9.0
  std::uint32_t target_arch = 0;    // the SASS to produce: device CC as major*10+minor
  core::arch_variant target_variant = core::arch_variant::plain;
  std::string options;              // the options the JIT applies (core::jit_options::canonical)
  std::string backend = "culink";   // JIT path
  int driver_version = 0;           // cuDriverGetVersion
  // A link group's other parts (docs/format.md §4.1): "<xxh3>:<size>" of parts 1..n-1, comma-separated,
  // so the key covers every PTX that goes into the link; empty for a standalone entry (whose keys
  // are then what they were before link groups existed).
  std::string link_parts;

  // Canonical text of every field ("culink|ptx=...|..."): the in-process single-flight key.
  std::string str() const;
};

// SASS bytes: owned, or a view into memory that `keep` holds (a large stored cache entry is mapped
// read-only instead of read into a fresh buffer: no copy, and no page of new memory to fault in).
class sass_bytes {
 public:
  sass_bytes() = default;
  sass_bytes(std::vector<std::uint8_t> owned) : owned_(std::move(owned)) {}  // NOLINT: a vector is SASS bytes
  sass_bytes(std::shared_ptr<const void> keep, core::byte_span view) : keep_(std::move(keep)), view_(view) {}
  // A view with writable room around it: `before` bytes before view.data and `after` bytes after
  // its end that are this process's own (a mapped hit's copy-on-write pages and its anonymous room,
  // fs.hpp map_read), for the one caller that takes them (take_room).
  // `xxh3`: the bytes' XXH3, checked as they were read (0: not known).
  sass_bytes(std::shared_ptr<const void> keep, core::byte_span view, std::size_t before, std::size_t after,
             std::uint64_t xxh3)
      : keep_(std::move(keep)), view_(view), room_(std::make_shared<room>()), xxh3_(xxh3) {
    room_->before = before;
    room_->after = after;
  }
  std::uint64_t checked_xxh3() const { return xxh3_; }
  // The writable room around the bytes, {before, after}, to the first caller among all copies of
  // this object (copies share the mapping: two writers would race); {0, 0} to later callers and
  // where there is none.
  std::pair<std::size_t, std::size_t> take_room() const {
    if (!room_ || room_->taken.exchange(true)) return {0, 0};
    return {room_->before, room_->after};
  }
  const std::shared_ptr<const void>& keeper() const { return keep_; }
  const std::uint8_t* data() const { return keep_ ? view_.data : owned_.data(); }
  std::size_t size() const { return keep_ ? view_.size : owned_.size(); }
  bool empty() const { return size() == 0; }
  core::byte_span span() const { return core::byte_span(data(), size()); }
  bool mapped() const { return keep_ != nullptr; }
  // The bytes as a vector: moved out when owned, copied from a view.
  std::vector<std::uint8_t> take() && {
    if (!keep_) return std::move(owned_);
    return std::vector<std::uint8_t>(view_.data, view_.data + view_.size);
  }
  bool operator==(const sass_bytes& o) const { return equal(o.data(), o.size()); }
  bool operator!=(const sass_bytes& o) const { return !(*this == o); }
  bool operator==(const std::vector<std::uint8_t>& v) const { return equal(v.data(), v.size()); }
  bool operator!=(const std::vector<std::uint8_t>& v) const { return !(*this == v); }

 private:
  bool equal(const std::uint8_t* p, std::size_t n) const { return n == size() && (n == 0 || std::memcmp(p, data(), n) == 0); }
  std::vector<std::uint8_t> owned_;
  struct room {
    std::size_t before = 0, after = 0;
    std::atomic<bool> taken{false};
  };
  std::shared_ptr<const void> keep_;
  core::byte_span view_;
  std::shared_ptr<room> room_;
  std::uint64_t xxh3_ = 0;
};

// A cache hit. `exact`: built by this very driver. Otherwise an entry with the same code key that
// another driver built (an older driver on this machine, or a cache prebuilt elsewhere with
// `fatpack warm --target`): valid SASS for this GPU, used at once; the JIT service then re-JITs it
// for this driver in the background (when refresh_other_driver() says so).
struct cache_hit {
  sass_bytes sass;
  bool exact = true;
  std::string where;  // the layer: "user", "prebuilt /opt/app/jit-cache"
};

// Held while this process compiles a key (cross-process single flight); released on destruction.
class compile_guard {
 public:
  virtual ~compile_guard() = default;
};

class sass_cache {
 public:
  virtual ~sass_cache() = default;
  // SASS for `key`, or nullopt on a miss. allow_other_driver=false: exact hits only.
  virtual std::optional<cache_hit> find(const jit_key& key, bool allow_other_driver) noexcept = 0;
  std::optional<cache_hit> lookup(const jit_key& key) noexcept { return find(key, true); }
  // Offers freshly compiled SASS for `key` (the cache may ignore it). Returns why it was not written
  // ("" when it was): fatpack::compile's report must not say "stored" of an entry a failed write lost.
  virtual std::string store(const jit_key& key, core::byte_span sass) noexcept = 0;
  // Cross-process single flight, called after a miss and before compiling: waits (bounded) for the
  // per-key lock, or until another process has published the key. Returns the lock to hold until
  // store() has run, or null (no lock: disabled, timed out, entry ready, error). The caller looks
  // the key up again after this returns, whatever it returned.
  virtual std::unique_ptr<compile_guard> begin_compile(const jit_key&) noexcept { return nullptr; }
  // Whether an other-driver hit should be re-JIT-ed for this driver in the background.
  virtual bool refresh_other_driver() const noexcept { return false; }
  // Called once per compile the JIT service runs (statistics).
  virtual void note_jit(double /*ms*/) noexcept {}
  // Waits (at most `timeout_ms`; < 0: until done) for the cache's own background work, such as a
  // remote layer's uploads (remote/remote_cache.hpp). True when none is left.
  virtual bool flush(long /*timeout_ms*/) noexcept { return true; }
  // The process is exiting (after the JIT service's own stores): waits for that work within the
  // cache's own bound, and says so when some is lost.
  virtual void flush_at_exit() noexcept {}
  virtual const char* name() const noexcept = 0;
};

class null_sass_cache final : public sass_cache {
 public:
  std::optional<cache_hit> find(const jit_key&, bool) noexcept override { return std::nullopt; }
  std::string store(const jit_key&, core::byte_span) noexcept override { return "the cache is disabled"; }
  const char* name() const noexcept override { return "none"; }
};

}  // namespace fatpack::detail
