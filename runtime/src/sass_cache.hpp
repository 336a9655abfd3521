// The seam where the JIT cache (issue 4) plugs in: before compiling PTX the JIT service asks the cache
// for SASS bytes; after compiling it hands the bytes to the cache. The default is a cache that never
// hits and stores nothing (null_sass_cache); within one process the JIT service keeps every result in
// memory anyway, so a module is compiled at most once per process whatever the cache does.
//
// The key carries everything that decides the output (design.md §3, two tiers): the code key (PTX
// bytes' XXH3 and size, PTX target and ISA, target CC with a/f variant, JIT options, JIT path) and the
// driver identity (cuDriverGetVersion; the driver build string is the cache's to add).
//
// Contract for implementations: lookup() and store() may be called from several threads at once;
// neither may throw; a lookup must never return bytes for another key (validate, then miss).
#pragma once

#include "fatpack/core/error.hpp"
#include "fatpack/core/target.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fatpack::detail {

struct jit_key {
  std::uint64_t ptx_xxh3 = 0;       // of the raw PTX bytes (the package's raw_xxh3)
  std::uint64_t ptx_size = 0;
  core::target ptx_target;          // compute_80
  core::ptx_isa ptx_isa;            // 9.0
  std::uint32_t target_arch = 0;    // the SASS to produce: device CC as major*10+minor
  core::arch_variant target_variant = core::arch_variant::plain;
  std::string options;              // the entry's ptxas options as stored in the package
  std::string backend = "culink";   // JIT path
  int driver_version = 0;           // cuDriverGetVersion

  // Canonical text of every field ("culink|ptx=...|..."): the in-process single-flight key.
  std::string str() const;
};

class sass_cache {
 public:
  virtual ~sass_cache() = default;
  // SASS for `key`, or nullopt on a miss.
  virtual std::optional<std::vector<std::uint8_t>> lookup(const jit_key& key) noexcept = 0;
  // Offers freshly compiled SASS for `key` (the cache may ignore it).
  virtual void store(const jit_key& key, core::byte_span sass) noexcept = 0;
  virtual const char* name() const noexcept = 0;
};

class null_sass_cache final : public sass_cache {
 public:
  std::optional<std::vector<std::uint8_t>> lookup(const jit_key&) noexcept override { return std::nullopt; }
  void store(const jit_key&, core::byte_span) noexcept override {}
  const char* name() const noexcept override { return "none"; }
};

// The cache the JIT service uses (default: null_sass_cache). Set it before the first load.
void set_sass_cache(std::shared_ptr<sass_cache> cache);
std::shared_ptr<sass_cache> get_sass_cache();

}  // namespace fatpack::detail
