// One cache directory (a "layer": the per-user cache or a prebuilt read-only one): its layout,
// reading and validating entries, publishing new ones, and its index (docs/cache.md §1, §3, §5).
//
// Layout under the cache root:
//   v1/                         format major version (0700)
//   v1/objects/<ab>/<code hex>-<driver hex>.fpc    entries, 256-way fan-out on the code key
//   v1/objects/<ab>/.<entry name>.<pid>.<n>.tmp    an entry being written (flock-ed by its writer)
//   v1/index.v1                 the mapped advisory index (index.hpp)
//   v1/index.lock, evict.lock   dedicated lock files (locks.hpp)
//   v1/inflight.lock            per-key single-flight byte locks
//   v1/inflight.holders         who holds them (holders.hpp; advisory)
//
// A hit opens one file (its name comes from the key): no scan, no other entry is touched. Only an
// other-driver lookup consults the index (or, without one, lists the one fan-out directory).
#pragma once

#include "cache/entry.hpp"
#include "cache/fs.hpp"
#include "cache/index.hpp"
#include "cache/key.hpp"
#include "cache/locks.hpp"
#include "cache/sass_cache.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

enum class read_status { ok, missing, invalid, io_error };

class cache_dir {
 public:
  // `root` is the cache root (the directory that holds v1/); the caller applied the directory policy
  // (directory.hpp). `label` names the layer in logs ("user", "prebuilt /opt/app/cache").
  // `codec`: how write() stores cubins (docs/cache.md §3); reads take either. `map_reads`: a large
  // stored cubin is mapped rather than read; only for a directory whose files nobody rewrites in
  // place (the per-user cache, not on a network file system: a mapping of a file another host
  // replaces, or of a prebuilt file someone copies over, faults when it shrinks).
  static std::shared_ptr<cache_dir> open(const std::string& root, bool writable, std::uint64_t max_bytes,
                                         std::string label, bool prebuilt, entry_codec codec = entry_codec::stored,
                                         bool map_reads = true);

  const std::string& root() const { return root_; }
  const std::string& dir() const { return dir_; }  // root/v1
  const std::string& label() const { return label_; }
  bool writable() const { return writable_; }
  bool prebuilt() const { return prebuilt_; }
  std::uint64_t max_bytes() const { return max_bytes_; }
  void set_max_bytes(std::uint64_t b) { max_bytes_ = b; }

  std::string fanout_dir(const std::array<std::uint8_t, 16>& code) const;
  std::string entry_path(const full_key& k) const;
  std::string entry_path(const std::array<std::uint8_t, 16>& code, std::uint64_t driver) const;
  std::string inflight_lock_path() const { return dir_ + "/inflight.lock"; }
  static std::uint64_t lock_hash(const full_key& k);

  // Reads and validates one entry file.
  read_status read_entry(const std::string& path, const expected_key& want, sass_bytes& cubin, entry_header& h,
                         std::string& driver_text, std::string& problem);
  // The entry for exactly this key.
  std::optional<sass_bytes> read_exact(const full_key& k, std::uint32_t target_arch);
  // An entry with this code key from another driver (most recently used first); `from` gets its
  // driver text.
  std::optional<sass_bytes> read_other_driver(const full_key& k, std::uint32_t target_arch, std::string& from);
  bool entry_exists(const full_key& k);

  // Publishes an entry: temp file in the fan-out directory, posix_fallocate, write, rename; then the
  // index. Returns 0, or the errno that stopped it (ENOSPC, EDQUOT, EROFS, ...) with `why`.
  int write(const full_key& k, core::byte_span cubin, std::string& why);
  // Removes an entry that failed validation, if it still fails under the key's lock (it may have
  // been replaced by a good one meanwhile).
  void quarantine(const full_key& k, std::uint32_t target_arch);

  // The current index mapping (remapped when another process replaced the file; rebuilt when a
  // writable directory has none or a damaged one, unless `may_rebuild` is false: the read paths,
  // which run on the loading thread, never rebuild, a scan of every entry; the next store, on the
  // store queue, does). May be null (read-only, no usable index).
  std::shared_ptr<index_file> index(bool may_rebuild = true);
  // Rebuilds the index from the entry files (header checks only). Takes the index lock; unless
  // `force`, a valid index (another process rebuilt it meanwhile) with enough capacity is kept.
  bool rebuild_index(std::string& why, std::uint32_t min_capacity = 0, bool force = false);
  std::shared_ptr<dir_lock> index_lock();
  std::shared_ptr<dir_lock> evict_lock();

  struct file_item {
    std::string path, name;
    file_stat st;
    bool temp = false;
  };
  // An item of objects/ that is not a fan-out directory of the cache's own: a symlink, a file, a
  // directory of another name or owner, or one writable by others (fan_out_problem).
  struct stray_item {
    std::string path, problem;
    bool directory = false;  // a real directory (not removable by unlink)
  };
  // Every file under objects/ (entries and temp files). No entry is read. Files are taken from every
  // item of objects/ that is a fan-out directory by the rules (fan_out_problem: two hex digits, a
  // real directory, this user's, or root's in a tree root owns, not writable by group or others);
  // any other item is skipped, a directory among them not descended into, by every scan: nothing
  // inside is indexed, evicted, cleared or counted. With `strays`, each one is also added there,
  // with why (the cache commands report them).
  std::vector<file_item> scan(std::vector<stray_item>* strays = nullptr);

  // Why the index is unusable ("" when fine); for stats/verify.
  std::string index_problem();

  // Warnings (docs/cache.md §7): one line per kind of trouble per directory, so per process for the
  // per-user cache (a process has one cache_dir per layer); a repeat goes to the debug log. Every I/O
  // error that changes what the cache does (a miss, an entry not stored or not indexed, an eviction
  // or temp-file cleaning skipped, a lock not taken) is kind "io": the process's first one is written.
  void warn_once(const std::string& kind, const std::string& text);
  // Kind "io": "JIT cache (<label>): <what> <path>: <errno text>; <effect>". Silent for the errors of
  // normal races (race_errno). Counts io_errors.
  void io_problem(const std::string& what, const std::string& path, int e, const std::string& effect);

 private:
  cache_dir() = default;
  bool index_insert(const full_key& k, std::uint64_t bytes);
  // The directory's lock file `name`, opened at first use (writable directories only).
  std::shared_ptr<dir_lock> lock_file(std::shared_ptr<dir_lock>& slot, const char* name);
  std::string root_, dir_, label_;
  bool writable_ = false, prebuilt_ = false;
  entry_codec codec_ = entry_codec::stored;
  bool map_reads_ = true;
  std::uint64_t max_bytes_ = 0;
  std::mutex mu_;  // guards index_ and the lock pointers
  std::shared_ptr<index_file> index_;
  std::string index_problem_;
  std::shared_ptr<dir_lock> index_lock_, evict_lock_;
  bool rebuild_failed_ = false;
  std::mutex warn_mu_;
  std::set<std::string> warned_;
};

// Errors of normal races, never warned about: ENOENT/ESTALE/ENOTDIR (another process removed or
// evicted the file), EAGAIN/EWOULDBLOCK (a lock someone else holds), EEXIST.
bool race_errno(int e);

std::uint32_t now_seconds();

}  // namespace fatpack::detail::cache
