// Where the cache may live and how it may be used (docs/design.md §3.7-3.8): the directory policy.
//  - The per-user directory is created with mode 0700. A directory owned by another user, or
//    writable by group or others, is refused (anyone who can write it could run code on our GPU:
//    a cubin is executable). A symlinked root is refused too (lstat).
//  - Under setuid/setgid there is no disk cache at all.
//  - A network file system (NFS, SMB, Lustre, GPFS, FUSE) is used read-only: fcntl/OFD locks and
//    shared mappings are not reliable there.
//  - Not writable (EROFS, EACCES) -> read-only; cannot be created -> memory only.
// Every refusal or downgrade comes with one warning sentence naming the directory and the reason.
#pragma once

#include "cache/fs.hpp"

#include <string>

namespace fatpack::detail::cache {

enum class dir_access { read_write, read_only, refused };

struct dir_verdict {
  dir_access access = dir_access::refused;
  std::string warning;  // empty when there is nothing to say
  // On a network file system: the per-user cache's entries are read, never mapped (a file another
  // host replaces or removes under a mapping faults on access).
  bool network = false;
};

// For the per-user cache at `root`: refuses '/' (by device and inode); where v1/ is missing and not
// read_only_wanted, creates the root (0700) if missing, checks its ownership and mode, then creates
// v1/; checks both; decides the access.
dir_verdict prepare_user_dir(const std::string& root, bool read_only_wanted);
// For a prebuilt (read-only) layer: it, v1/, objects/ and every objects/<ab> must be directories
// (not symlinks) owned by us or by root, not writable by group or others.
dir_verdict check_prebuilt_dir(const std::string& root);
// For a cache the `fatpack cache` commands only read (a user's cache or a layer): the rules of a
// prebuilt layer for the root, v1/ and objects/. The objects/<ab> directories are left to the scan,
// which reports each one that breaks them (fan_out_problem) instead of refusing the whole cache:
// `cache verify` must name a planted symlink, and `verify --repair` remove it.
dir_verdict check_cache_dir_for_reading(const std::string& root);
// What is wrong with `dir`, an item of objects/ whose stat (lstat) `st` the caller has taken, as a
// fan-out directory ("" when nothing; the reason alone, without the path, which the caller names):
// a name other than two lower-case hex digits, a symlink or another non-directory, an owner other
// than us (or root, where `root_may_own`: a layer root installed), or write access for group or
// others. A layer holding such an item is refused whole.
std::string fan_out_problem(const std::string& dir, const std::string& name, bool root_may_own, const file_stat& st);
// The format directory inside a cache root: "<root>/v1".
std::string format_dir(const std::string& root);

}  // namespace fatpack::detail::cache
