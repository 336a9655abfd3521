// The directory policy (directory.hpp).
#include "cache/directory.hpp"

#include "cache/fs.hpp"

#include <cerrno>
#include <cstdio>
#include <vector>

namespace fatpack::detail::cache {

namespace {

std::string octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

// Ownership and mode rules for one directory; an empty string when it is acceptable.
std::string check_private(fs& f, const std::string& dir, bool allow_root_owner) {
  file_stat st;
  if (int e = f.stat(dir, st)) return dir + ": " + errno_text(e);
  if (!st.directory) return dir + " is not a directory (symbolic links are not followed)";
  const std::uint32_t me = f.euid();
  if (st.uid != me && !(allow_root_owner && st.uid == 0))
    return dir + " is owned by uid " + std::to_string(st.uid) + ", not by this user (uid " + std::to_string(me) +
           "): refusing to use it (whoever owns it could plant GPU code)";
  if (st.mode & 022)
    return dir + " is writable by group or others (mode " + octal(st.mode) +
           "): refusing to use it (anyone who can write it could plant GPU code); chmod 700 it";
  return {};
}

bool read_only_errno(int e) { return e == EROFS || e == EACCES || e == EPERM; }

}  // namespace

std::string format_dir(const std::string& root) { return root + "/v1"; }

dir_verdict prepare_user_dir(const std::string& root, bool read_only_wanted) {
  fs& f = current_fs();
  dir_verdict v;
  if (f.privileged_exec()) {
    v.warning = "setuid/setgid process: the JIT cache is disabled";
    return v;
  }
  if (root.empty() || root[0] != '/') {
    v.warning = "no cache directory (no $HOME, or FATPACK_CACHE_PATH is not absolute: '" + root +
                "'): the JIT cache is memory-only";
    return v;
  }
  // '/' in any spelling ("//", "/.", "/tmp/.."): as root it passes every check below and got /v1.
  file_stat rs, top;
  const bool root_exists = f.stat(root, rs) == 0;
  if (root_exists && f.stat("/", top) == 0 && rs.device == top.device && rs.inode == top.inode) {
    v.warning = "the cache directory " + root + " is '/' (FATPACK_CACHE_PATH): a cache needs a directory of its "
                "own; the JIT cache is memory-only";
    return v;
  }
  const std::string fmt = format_dir(root);
  file_stat st;
  if (f.stat(fmt, st) != 0) {
    if (read_only_wanted) return v;  // nothing to read; not worth a warning
    // The root is made (0700) and checked before v1/ is made in it: a shared directory given as
    // the cache (FATPACK_CACHE_PATH=/tmp), or one another user makes at that path meanwhile, is
    // refused below and must not get a v1/ of ours first.
    if (int e = root_exists ? 0 : make_dirs(f, root, 0700)) {
      v.warning = "cannot create the cache directory " + root + ": " + errno_text(e) + "; the JIT cache is memory-only";
      return v;
    }
    if (std::string bad = check_private(f, root, false); !bad.empty()) {
      v.warning = bad + "; the JIT cache is memory-only";
      return v;
    }
    if (int e = make_dirs(f, fmt, 0700)) {
      v.warning = "cannot create the cache directory " + fmt + ": " + errno_text(e) + "; the JIT cache is memory-only";
      return v;
    }
  }
  for (const std::string& d : {root, fmt}) {
    std::string bad = check_private(f, d, false);
    if (!bad.empty()) {
      v.warning = bad + "; the JIT cache is memory-only";
      return v;
    }
  }
  if (f.network_fs(fmt)) {
    v.network = true;
    v.access = dir_access::read_only;
    v.warning = fmt + " is on a network file system (locks and shared mappings are unreliable there): the JIT "
                      "cache is used read-only";
    return v;
  }
  if (read_only_wanted) {
    v.access = dir_access::read_only;
    return v;
  }
  // Can we write? The objects directory and a lock file are what a writer needs first. Opening and
  // closing index.lock drops no lock this process holds on it (OFD locks belong to their own open
  // file description, locks.hpp).
  int e = f.mkdir(fmt + "/objects", 0700);
  if (e == EEXIST) e = 0;
  if (!e) {
    int fd = -1;
    e = f.open(fmt + "/index.lock", open_mode::read_write, fd);
    if (fd >= 0) f.close(fd);
  }
  if (e) {
    v.access = dir_access::read_only;
    v.warning = "the cache directory " + fmt + " is not writable (" + errno_text(e) + "): the JIT cache is used " +
                (read_only_errno(e) ? "read-only" : "read-only (unexpected error)");
    return v;
  }
  v.access = dir_access::read_write;
  return v;
}

dir_verdict check_prebuilt_dir(const std::string& root) {
  fs& f = current_fs();
  dir_verdict v;
  if (f.privileged_exec()) {
    v.warning = "setuid/setgid process: the JIT cache is disabled";
    return v;
  }
  const std::string fmt = format_dir(root);
  // The root, v1/, objects/ and every objects/<ab>: lookups open <ab>/<entry> by name, so a fan-out
  // directory that is a symlink (followed: only the last component is opened O_NOFOLLOW) or that
  // another user may write would let its owner plant GPU code in this layer.
  std::vector<std::string> dirs{root, fmt};
  const std::string objects = fmt + "/objects";
  file_stat os;
  if (f.stat(objects, os) == 0) {
    dirs.push_back(objects);
    std::vector<std::string> fans;
    if (int e = f.list_dir(objects, fans)) {
      v.warning = "prebuilt cache: " + objects + ": " + errno_text(e);
      return v;
    }
    for (const auto& n : fans) dirs.push_back(objects + "/" + n);
  }
  for (const std::string& d : dirs) {
    std::string bad = check_private(f, d, true);
    if (!bad.empty()) {
      v.warning = "prebuilt cache: " + bad;
      return v;
    }
  }
  v.access = dir_access::read_only;
  return v;
}

}  // namespace fatpack::detail::cache
