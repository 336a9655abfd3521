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

// "/a/link/" names what the link points to (lstat follows a trailing slash): a symlinked root given
// with one passed the symlink check. "/" stays "/".
std::string without_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// Which directory check_private looks at; the advice differs. A root is the directory the user named
// (FATPACK_CACHE_PATH or the default; a prebuilt layer's path); v1/, objects/ and objects/<ab> are
// inside one, directories fatpack makes.
enum class place { cache_root, in_cache, fan_out, layer_root, in_layer };

// What to do about a directory refused for its owner or mode. "chmod 700 it" only fits a directory
// this user owns: one another user owns (root's /tmp) is not this user's to chmod, and a shared one,
// sticky and writable by others (/tmp, /var/tmp, /dev/shm, even as root), must stay as it is: a
// cache wants a directory of its own in it.
std::string advice(const std::string& dir, const file_stat& st, std::uint32_t me, place where) {
  const bool shared = (st.mode & 01000) && (st.mode & 022);
  switch (where) {
    case place::cache_root:
      if (shared)
        return "; it is a shared directory (sticky bit), not one to chmod: use a directory of its own in it, e.g. "
               "FATPACK_CACHE_PATH=" + without_trailing_slashes(dir) + "/fatpack-cache";
      [[fallthrough]];
    case place::in_cache:
      return st.uid != me ? "; use a directory of its own that this user owns (FATPACK_CACHE_PATH)" : "; chmod 700 it";
    case place::fan_out:  // one objects/<ab> of this user's cache: that directory is the thing to fix
      return st.uid != me ? "; remove it, or give it to this user (chown)" : "; chmod 700 it";
    case place::layer_root:
      if (shared) return "; it is a shared directory (sticky bit), not one to chmod: give the layer a directory of its own";
      [[fallthrough]];
    case place::in_layer:
      // A layer is read by others (a shared, prebuilt cache): 700 would lock them out, whoever owns it;
      // and when it is root's (allowed), only root can take the write bits away.
      if (st.uid == me) return "; chmod go-w it";
      return st.uid == 0 ? "; only its owner (root) can fix that: chmod go-w it" : "";
  }
  return {};
}

// Ownership and mode rules for one directory whose stat (lstat) `st` the caller has taken; an
// empty string when it is acceptable.
std::string judge_private(fs& f, const std::string& dir, const file_stat& st, place where) {
  const bool layer = where == place::layer_root || where == place::in_layer;
  const bool root = where == place::cache_root || where == place::layer_root;
  // Said as it is: "not a directory" read wrong to users whose link points to one. A root the user
  // named has a way out (the target); a link inside a tree is a planted one.
  if (st.symlink)
    return dir + " is a symbolic link: not followed (anyone who can change the link could redirect the cache)" +
           (root ? "; give the directory it points to" : "");
  if (!st.directory) return dir + " is not a directory";
  const std::uint32_t me = f.euid();
  if (st.uid != me && !(layer && st.uid == 0))
    return dir + " is owned by uid " + std::to_string(st.uid) + ", not by this user (uid " + std::to_string(me) +
           "): refusing to use it (whoever owns it could plant GPU code)" + advice(dir, st, me, where);
  if (st.mode & 022)
    return dir + " is writable by group or others (mode " + octal(st.mode) +
           "): refusing to use it (anyone who can write it could plant GPU code)" + advice(dir, st, me, where);
  return {};
}

// The same rules, the directory stat-ed here.
std::string check_private(fs& f, const std::string& dir, place where) {
  file_stat st;
  if (int e = f.stat(dir, st)) return dir + ": " + errno_text(e);
  return judge_private(f, dir, st, where);
}

bool read_only_errno(int e) { return e == EROFS || e == EACCES || e == EPERM; }

}  // namespace

std::string format_dir(const std::string& root) { return root + "/v1"; }

dir_verdict prepare_user_dir(const std::string& given, bool read_only_wanted) {
  const std::string root = without_trailing_slashes(given);
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
    if (std::string bad = check_private(f, root, place::cache_root); !bad.empty()) {
      v.warning = bad + "; the JIT cache is memory-only";
      return v;
    }
    if (int e = make_dirs(f, fmt, 0700)) {
      v.warning = "cannot create the cache directory " + fmt + ": " + errno_text(e) + "; the JIT cache is memory-only";
      return v;
    }
  }
  for (const std::string& d : {root, fmt}) {
    std::string bad = check_private(f, d, d == root ? place::cache_root : place::in_cache);
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
  // objects/ by the same rules, where it exists: entries are opened through it by path, so a symlink
  // planted there sent every read and write of this cache elsewhere, where `fatpack cache` (which
  // does not follow it) neither saw, evicted nor cleared them.
  const std::string objects = fmt + "/objects";
  file_stat os;
  const int objects_error = f.stat(objects, os);  // ENOENT: made below (or not needed: read-only)
  // Any error: not judged here (as v1/'s stat above, a shortcut); a writer's mkdir below, or its
  // open of an entry, meets the trouble and says so.
  if (std::string bad = objects_error ? std::string() : judge_private(f, objects, os, place::in_cache); !bad.empty()) {
    v.warning = bad + "; the JIT cache is memory-only";
    return v;
  }
  if (read_only_wanted) {
    v.access = dir_access::read_only;
    return v;
  }
  // Can we write? The objects directory and a lock file are what a writer needs first. Opening and
  // closing index.lock drops no lock this process holds on it (OFD locks belong to their own open
  // file description, locks.hpp).
  int e = f.mkdir(objects, 0700);
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

namespace {

// The layer rules for root, v1/, objects/ and, with `fan_outs`, every objects/<ab>; `label` starts
// each warning.
dir_verdict check_layer_tree(const std::string& given, bool fan_outs, const std::string& label) {
  const std::string root = without_trailing_slashes(given);
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
    if (fan_outs) {
      if (int e = f.list_dir(objects, fans)) {
        v.warning = label + objects + ": " + errno_text(e);
        return v;
      }
    }
    for (const auto& n : fans) dirs.push_back(objects + "/" + n);
  }
  for (const std::string& d : dirs) {
    std::string bad = check_private(f, d, d == root ? place::layer_root : place::in_layer);
    if (!bad.empty()) {
      v.warning = label + bad;
      return v;
    }
  }
  v.access = dir_access::read_only;
  return v;
}

bool is_fan_out_name(const std::string& n) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return n.size() == 2 && hex(n[0]) && hex(n[1]);
}

}  // namespace

dir_verdict check_prebuilt_dir(const std::string& given) { return check_layer_tree(given, true, "prebuilt cache: "); }

dir_verdict check_cache_dir_for_reading(const std::string& given) { return check_layer_tree(given, false, ""); }

std::string fan_out_problem(const std::string& dir, const std::string& name, bool root_may_own, const file_stat& st) {
  fs& f = current_fs();
  std::string bad = judge_private(f, dir, st, root_may_own ? place::in_layer : place::fan_out);
  if (bad.empty() && !is_fan_out_name(name))
    return "not a fan-out directory (objects/ holds only directories named by two hex digits)";
  // judge_private's sentences start with the directory; the caller names it already.
  if (bad.compare(0, dir.size(), dir) == 0) bad.erase(0, bad.find_first_not_of(": ", dir.size()));
  return bad;
}

}  // namespace fatpack::detail::cache
