// Keeping a cache directory bounded (docs/design.md §3.6): LRU eviction by one evictor at a time, and
// removal of temp files whose writer died.
//  - After a store, when the index's total exceeds the bound, the process that gets evict.lock
//    (try-lock: the others go on, someone is already evicting) removes least recently used entries
//    down to 90% of the bound, so eviction does not run on every store.
//  - A victim whose key lock is held (being re-published) is skipped.
//  - Temp files: a writer holds flock on its temp file until it renames it; a temp file whose flock
//    can be taken has no live writer and is removed (also any older than a day, for file systems
//    where flock is unreliable). Runs at most once an hour per directory, under evict.lock.
#pragma once

#include "cache/store.hpp"

#include <cstdint>

namespace fatpack::detail::cache {

struct evict_result {
  std::uint64_t removed = 0;
  std::uint64_t bytes_freed = 0;
  std::uint64_t bytes_left = 0;
  bool ran = false;  // false: another evictor was busy, or nothing to do
};

// Evicts LRU entries until the index total is <= target_bytes. wait: take evict.lock blocking
// (the CLI's prune) instead of try-lock.
evict_result evict_to(cache_dir& d, std::uint64_t target_bytes, bool wait);
// After a store: evicts to 90% of the bound if the bound is exceeded; cleans stray temp files when
// the last cleaning is more than an hour old.
void after_store(cache_dir& d);
// Whether a live writer holds flock on the temp file at `path` (its writer takes it right after
// creating the file and keeps it until the rename; the kernel drops it when the writer dies).
// `unknown` when the file cannot be opened or flock fails otherwise.
enum class temp_writer { alive, gone, unknown };
temp_writer temp_writer_of(const std::string& path);
// Not known to be gone (alive or unknown): what `cache clear` spares.
bool temp_writer_alive(const std::string& path);
// Removes temp files without a live writer (its flock free), and, where flock cannot tell, those
// older than max_age_s. A file whose flock is held is never removed. Returns how many.
std::uint64_t clean_temp_files(cache_dir& d, std::int64_t max_age_s);

}  // namespace fatpack::detail::cache
