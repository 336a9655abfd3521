// The cache index (docs/cache.md §5): a fixed-size file, opened through the fs seam and mapped
// MAP_SHARED (the per-user cache's own index) or copied into memory (a prebuilt layer's), holding one slot per entry (code-key hash, driver
// hash, bytes on disk, last use: time and a use counter for exact LRU order) and the total size. It is advisory: it decides LRU order,
// the size bound and which drivers' entries exist for a code key, never whether bytes are served
// (entries validate themselves). Damaged -> rebuilt from the entry files.
//
// Protocol:
//  - Writers (insert/erase/rebuild) hold the directory's index lock (locks.hpp). Each slot has a
//    sequence number, odd while being written, and an XXH3 of its fields; readers take no lock,
//    copy a slot, and ignore it unless the sequence is even and unchanged and the check matches.
//  - last use is a relaxed store, outside the check: a torn or lost touch only reorders eviction.
//    The use counter is one atomic in the header (fetch_add per hit or store).
//  - The file is created complete (temp file, posix_fallocate so a full disk is ENOSPC and never a
//    SIGBUS in the mapping, then rename) and never truncated or resized in place: growing or
//    rebuilding writes a new file and renames it over, then marks the old one retired so other
//    processes remap. No Boost managed_mapped_file and no mutex inside the file: a process killed at
//    any point leaves at worst one odd slot, which readers skip and writers repair.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

struct index_slot {
  std::array<std::uint8_t, 16> code{};
  std::uint64_t driver = 0;
  std::uint32_t disk_bytes = 0;
  std::uint32_t last_use_s = 0;    // seconds since the Unix epoch (for display)
  std::uint32_t tick = 0;          // the index's use counter at the last use: exact LRU order
};

// Slots of a new index (48 bytes each: 52 KiB with the header). Up to 80% full, so ~820 entries; a
// fuller table is rebuilt into a new file of twice the size, as often as needed (a rebuild reads
// every entry's header once, so growing to N entries reads about 2N headers in all). It was 65,536
// slots (3 MiB), which made a fresh cache with one 280 KB entry a 3.4 MB directory (issue 13); the
// file is created complete (fallocate), so a small start costs nothing but the rare rebuild.
inline constexpr std::uint32_t default_index_capacity = 1u << 10;
inline constexpr std::size_t index_header_bytes = 4096;
inline constexpr std::size_t index_slot_bytes = 48;
// Largest index file read (a copy of 64 MiB holds ~1.1 million slots; ours are 3-6 MiB).
inline constexpr std::uint64_t max_index_bytes = 64ull << 20;
// Most slots an index has, made or read (48 MiB): the capacity is the file's own word, which any
// writer of the directory can forge with a valid header checksum, so a larger one is a damaged
// index (rebuilt), never a table that lookups, rebuilds and eviction walk or allocate. ~840,000
// entries; an index made for more keeps the first that fit (the others are still found by name).
inline constexpr std::uint32_t max_index_capacity = 1u << 20;
static_assert(index_header_bytes + std::uint64_t(max_index_capacity) * index_slot_bytes <= max_index_bytes);

class index_file {
 public:
  // Maps `path` (read-only or read-write), or, read-only with `copy` or when the file is not owned
  // by this user, reads a private copy (at most max_index_bytes): a mapping of a file that someone
  // else rewrites in place would kill this process with SIGBUS, a copy cannot. A copy is never
  // written and never sees `retired` (a prebuilt layer's index is replaced only by whoever installs
  // the layer; the copy stays as it was read, which only ages its advisory use order). nullptr with
  // `why` when missing or damaged (bad magic, version, size, header check); `err` (if given) gets the
  // errno when a call failed (ENOENT: missing), 0 when the file is damaged.
  static std::unique_ptr<index_file> map(const std::string& path, bool writable, std::string& why, bool copy = false,
                                         int* err = nullptr);
  // Writes a complete new index holding `slots` to `path` (through a temp file in the same
  // directory and rename; the caller holds the index lock). Returns 0 or an errno.
  static int create(const std::string& path, const std::vector<index_slot>& slots, std::uint32_t capacity,
                    std::int64_t now_s);
  ~index_file();

  // Lock-free reads.
  bool find(const std::array<std::uint8_t, 16>& code, std::uint64_t driver, index_slot* out) const;
  std::vector<index_slot> find_code(const std::array<std::uint8_t, 16>& code) const;
  void touch(const std::array<std::uint8_t, 16>& code, std::uint64_t driver, std::uint32_t now_s);
  std::uint32_t next_tick();
  std::vector<index_slot> live_slots() const;
  std::uint64_t total_bytes() const;
  std::uint64_t live() const;
  std::uint32_t capacity() const { return capacity_; }
  std::uint64_t file_bytes() const { return size_; }
  bool retired() const;                 // replaced by a rebuild: remap
  std::uint64_t inode() const { return inode_; }  // of the file when it was mapped
  std::int64_t last_clean_s() const;    // when stray temp files were last cleaned

  // Writers: the caller holds the index lock.
  // False when the table is too full (rebuild with a larger capacity).
  bool insert(const index_slot& s);
  // Bytes the slot accounted for (0 if absent).
  std::uint64_t erase(const std::array<std::uint8_t, 16>& code, std::uint64_t driver);
  // Sets the header's byte total to what the live slots account for, when it says otherwise (a
  // counter nobody checks: a bit flip, a writer killed between its slot and the total); the total.
  std::uint64_t repair_total();
  void set_retired();
  void set_last_clean(std::int64_t s);
  // Slots that fail their check or are stuck odd (a writer killed mid-update): counted by verify.
  std::uint64_t damaged_slots() const;

 private:
  index_file() = default;
  struct impl;
  std::unique_ptr<impl> impl_;
  std::uint8_t* base_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint32_t capacity_ = 0;
  bool writable_ = false;
  std::uint64_t inode_ = 0;
};

}  // namespace fatpack::detail::cache
