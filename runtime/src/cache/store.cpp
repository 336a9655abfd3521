// One cache directory (store.hpp).
#include "cache/store.hpp"

#include "cache/directory.hpp"
#include "cache/fs.hpp"
#include "cache/stats.hpp"
#include "platform/log.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>

namespace fatpack::detail::cache {

namespace {

// What read_entry reads first of an entry larger than max_entry_front.
constexpr std::size_t first_read = 4096;

std::string hex2(std::uint8_t b) { return core::hex_bytes(&b, 1); }

bool is_temp_name(const std::string& n) { return n.size() > 5 && n[0] == '.' && n.compare(n.size() - 4, 4, ".tmp") == 0; }

// Whether objects/, the directory above the fan-out directory holding `path`, is a directory
// itself, not a symlink to some (read_entry has checked the fan-out directory by fan_out_problem's
// rules; the cache's root and v1/ are checked when it is opened).
bool in_real_objects(fs& f, const std::string& path) {
  const std::size_t fan = path.rfind('/');
  const std::size_t objects = fan == std::string::npos || fan == 0 ? std::string::npos : path.rfind('/', fan - 1);
  if (objects == std::string::npos || objects == 0) return false;
  file_stat st;
  return f.stat(path.substr(0, objects), st) == 0 && st.directory;
}

}  // namespace

std::uint32_t now_seconds() { return static_cast<std::uint32_t>(current_fs().now_unix_s()); }

bool race_errno(int e) { return e == ENOENT || e == ESTALE || e == ENOTDIR || e == EAGAIN || e == EWOULDBLOCK || e == EEXIST; }

void cache_dir::warn_once(const std::string& kind, const std::string& text) {
  bool first = false;
  {
    std::lock_guard<std::mutex> g(warn_mu_);
    first = warned_.insert(kind).second;
  }
  // Said once already: the rest for whoever debugs. Logged after warn_mu_ is released (the log
  // callback is the application's).
  log_line(first ? log_level::warn : log_level::debug, text);
}

void cache_dir::io_problem(const std::string& what, const std::string& path, int e, const std::string& effect) {
  if (race_errno(e)) return;
  stats().io_errors++;
  warn_once("io", "JIT cache: " + what + " " + path + ": " + errno_text(e) + "; " + effect);
}

std::shared_ptr<cache_dir> cache_dir::open(const std::string& root, bool writable, std::uint64_t max_bytes,
                                           std::string label, bool prebuilt, entry_codec codec, bool map_reads) {
  std::shared_ptr<cache_dir> d(new cache_dir());
  d->root_ = root;
  d->dir_ = root + "/v1";
  d->writable_ = writable;
  d->prebuilt_ = prebuilt;
  d->max_bytes_ = max_bytes;
  d->label_ = std::move(label);
  d->codec_ = codec;
  d->map_reads_ = map_reads;
  return d;
}

std::string cache_dir::fanout_dir(const std::array<std::uint8_t, 16>& code) const {
  return dir_ + "/objects/" + hex2(code[0]);
}

std::string cache_dir::entry_path(const std::array<std::uint8_t, 16>& code, std::uint64_t driver) const {
  driver_id d;
  d.hash = driver;
  return fanout_dir(code) + "/" + core::hex_bytes(code.data(), code.size()) + "-" + d.hex() + ".fpc";
}

std::string cache_dir::entry_path(const full_key& k) const { return entry_path(k.code.hash, k.driver.hash); }

std::uint64_t cache_dir::lock_hash(const full_key& k) { return k.code.lo64() ^ (k.driver.hash * 0x9E3779B97F4A7C15ull); }

read_status cache_dir::read_entry(const std::string& path, const expected_key& want, sass_bytes& cubin,
                                  entry_header& h, std::string& driver_text, std::string& problem) {
  fs& f = current_fs();
  int fd = -1;
  // An I/O error or a short read is a miss, never an invalid entry: a transient error is not
  // corruption, and an invalid entry is removed from a writable cache (quarantine).
  const char* const kept = "a miss (the entry is kept)";
  if (int e = f.open(path, open_mode::read, fd)) {
    if (e == ENOENT || e == ENOTDIR) return read_status::missing;
    problem = errno_text(e);  // ELOOP: a symlink planted in the cache
    if (e == ELOOP) return read_status::invalid;
    if (e == ENXIO) {  // a Unix socket planted at the entry path: not a file, not a transient error
      problem = "not a regular file (a socket)";
      return read_status::invalid;
    }
    io_problem("cannot open", path, e, kept);
    return read_status::io_error;
  }
  file_stat st;
  int e = f.fstat(fd, st);
  if (!e && !st.regular) {
    f.close(fd);
    problem = "not a regular file";
    return read_status::invalid;
  }
  // Only from a fan-out directory by the scans' rules (fan_out_problem): one they skip is neither
  // read nor removed here either. Before, a hit read it and put it back in the index, whose
  // eviction then removed by path what `cache clear` and `list` said they left alone. A miss, never
  // an invalid entry: nothing in it is quarantined.
  if (!e) {
    const std::string fan_dir = path.substr(0, path.rfind('/'));
    file_stat fan_st;
    if (int se = f.stat(fan_dir, fan_st)) {
      f.close(fd);
      problem = errno_text(se);
      io_problem("cannot stat", fan_dir, se, kept);
      return read_status::io_error;
    }
    if (std::string bad = fan_out_problem(fan_dir, fan_dir.substr(fan_dir.rfind('/') + 1), prebuilt_, fan_st);
        !bad.empty()) {
      f.close(fd);
      problem = fan_dir + ": " + bad;
      warn_once("fan-out " + fan_dir, "JIT cache: not reading " + fan_dir + ": " + bad);
      return read_status::missing;
    }
  }
  // Entries are written by this user (or, in a prebuilt layer, installed by root).
  if (!e && st.uid != f.euid() && !(prebuilt_ && st.uid == 0)) {
    f.close(fd);
    problem = "owned by uid " + std::to_string(st.uid) + ", not by this user";
    return read_status::invalid;
  }
  // And only they can write it: checksums are no authentication, so an entry file that group or
  // others may write (a prebuilt layer installed 0666) could hold anyone's code for this key.
  if (!e && (st.mode & 022) != 0) {
    f.close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.mode & 07777));
    problem = std::string("writable by group or others (mode ") + mode + ")";
    return read_status::invalid;
  }
  if (!e && (st.size < entry_header_size || st.size > 2 * max_cubin_bytes)) {
    f.close(fd);
    problem = "size " + std::to_string(st.size) + " is not an entry's";
    return read_status::invalid;
  }
  // A stored entry (codec 0) is read in two parts: the header and key texts, then the cubin: mapped
  // where it starts 64-byte aligned (format 1.2 writers pad the header so it does), else read into
  // the buffer the driver will load. No decoding, no copy. An LZ4 entry is read whole.
  std::vector<std::uint8_t> bytes, stored;
  std::shared_ptr<mapped_file> mapping;
  std::uint64_t asked = 0, got = 0;  // bytes asked of pread and bytes it gave, for the short-read check
  const bool fstat_failed = e != 0;
  // pread at `off` into `to`, adding to asked/got; the error code.
  auto read_at = [&](std::uint8_t* to, std::size_t n, std::uint64_t off) {
    std::size_t r = 0;
    asked += n;
    const int err = f.pread(fd, to, n, off, r);
    got += r;
    return err;
  };
  std::optional<std::string> bad;
  bool whole = false;
  if (!e) {
    // An entry no larger than the longest front is read whole, in one read. Of a larger one, a
    // page first, which holds the header and key texts of every entry seen in practice (a few
    // hundred bytes); the rest of the front only where the header says the texts end past it. So
    // the 68 KiB a front may span are not zeroed and copied on every hit of a large entry.
    bytes.resize(static_cast<std::size_t>(st.size <= max_entry_front ? st.size : first_read));
    e = read_at(bytes.data(), bytes.size(), 0);
    entry_header peek;
    if (!e && got == asked && bytes.size() < st.size &&
        !parse_header(core::byte_span(bytes.data(), bytes.size()), st.size, peek) &&
        peek.payload_offset() > bytes.size()) {
      const std::size_t front = bytes.size();
      bytes.resize(static_cast<std::size_t>(std::min<std::uint64_t>(st.size, max_entry_front)));
      e = read_at(bytes.data() + front, bytes.size() - front, front);
    }
    whole = bytes.size() == st.size;
  }
  if (!e && got == asked && !whole) {
    // The front only: enough for the header and the texts of any valid entry.
    bad = check_front(core::byte_span(bytes.data(), bytes.size()), st.size, want, h, driver_text);
    if (!bad && h.codec() == entry_codec::stored) {
      // Mapped, the cubin's pages are the page cache's: nothing is copied and no fresh memory is
      // faulted in (a 1 MB cubin: 256 zero-filled pages and a copy saved). Only in the per-user
      // cache (map_reads_): its entries are this user's files, published by rename, removed by
      // unlink and never rewritten in place, so a mapping never loses its pages (docs/cache.md §3).
      // That holds only for a file reached through this cache's own directories: an entry with
      // another hard link, or behind an objects/ or fan-out directory planted as a symlink (opens
      // follow every component but the last), may be a file something else rewrites: read instead.
      const void* addr = nullptr;
      if (map_reads_ && h.payload_offset() % 64 == 0 && st.links == 1 && in_real_objects(f, path) &&
          f.map_read(fd, st.size, addr) == 0) {
        mapping = std::make_shared<mapped_file>(addr, st.size);
        got += h.payload_size;
        asked += h.payload_size;
      } else {
        stored.resize(static_cast<std::size_t>(h.cubin_size));
        e = read_at(stored.data(), stored.size(), h.payload_offset());
      }
    } else if (!bad) {
      const std::size_t front = bytes.size();
      bytes.resize(static_cast<std::size_t>(st.size));
      e = read_at(bytes.data() + front, bytes.size() - front, front);
      whole = true;
    }
  }
  f.close(fd);
  if (e) {
    problem = errno_text(e);
    io_problem(fstat_failed ? "cannot stat" : "cannot read", path, e, kept);
    return read_status::io_error;
  }
  if (got != asked) {
    // Shorter than its descriptor's size: entries are published by rename and never truncated in
    // place, so this is the read failing (a file truncated by hand has that size, and is invalid).
    problem = "a short read (" + std::to_string(got) + " of " + std::to_string(asked) + " bytes)";
    stats().io_errors++;
    warn_once("io", "JIT cache: cannot read " + path + ": " + problem + "; " + kept);
    return read_status::io_error;
  }
  stats().bytes_read += got;
  if (bad) {
    problem = *bad;
    return read_status::invalid;
  }
  if (!whole) {  // a stored entry's cubin, mapped or read on its own
    const core::byte_span view = mapping ? core::byte_span(mapping->data() + h.payload_offset(), h.payload_size)
                                         : core::byte_span(stored.data(), stored.size());
    if ((bad = check_stored_cubin(h, view, want))) {
      problem = *bad;
      return read_status::invalid;
    }
    if (mapping)
      cubin = sass_bytes(std::move(mapping), view, map_room + static_cast<std::size_t>(h.payload_offset()),
                         map_tail_room(st.size), h.cubin_xxh3);  // check_stored_cubin compared it
    else
      cubin = sass_bytes(std::move(stored));
    return read_status::ok;
  }
  auto c = decode_entry(core::byte_span(bytes.data(), bytes.size()), want, h, driver_text, problem);
  if (!c) return read_status::invalid;
  cubin = sass_bytes(std::move(*c));
  return read_status::ok;
}

std::optional<sass_bytes> cache_dir::read_exact(const full_key& k, std::uint32_t target_arch) {
  expected_key want{&k.code, &k.driver, target_arch};
  sass_bytes cubin;
  entry_header h;
  std::string drv, problem;
  const std::string path = entry_path(k);
  read_status s = read_entry(path, want, cubin, h, drv, problem);
  if (s == read_status::ok) {
    if (writable_) {
      if (auto idx = index(/*may_rebuild=*/false)) {
        if (idx->find(k.code.hash, k.driver.hash, nullptr))
          idx->touch(k.code.hash, k.driver.hash, now_seconds());
        else
          index_insert(k, h.file_size());  // published by a process killed before its index update
      }
    }
    return cubin;
  }
  if (s == read_status::invalid) {
    stats().rejected++;
    // Once per entry and process (a read-only layer's invalid entry stays, and is met on every read).
    warn_once("invalid " + path, "JIT cache: ignoring " + path + " (" + label_ + "): " + problem);
    if (writable_) quarantine(k, target_arch);
  }
  return std::nullopt;
}

std::optional<sass_bytes> cache_dir::read_other_driver(const full_key& k, std::uint32_t target_arch,
                                                       std::string& from) {
  // Candidates: the index's slots for this code key, else the names in its fan-out directory.
  std::vector<index_slot> cands;
  if (auto idx = index(/*may_rebuild=*/false)) {
    cands = idx->find_code(k.code.hash);
  } else {
    std::vector<std::string> names;
    const std::string fan = fanout_dir(k.code.hash);
    const int e = current_fs().list_dir(fan, names);
    if (e) io_problem("cannot list", fan, e, "entries of other drivers there are not looked for");
    if (e == 0) {
      for (const auto& n : names) {
        index_slot s;
        if (parse_file_name(n, s.code, s.driver) && s.code == k.code.hash) cands.push_back(s);
      }
    }
  }
  std::sort(cands.begin(), cands.end(), [](const index_slot& a, const index_slot& b) { return a.tick > b.tick; });
  expected_key want{&k.code, nullptr, target_arch};
  for (const auto& c : cands) {
    if (c.driver == k.driver.hash) continue;  // the exact entry was tried already
    sass_bytes cubin;
    entry_header h;
    std::string problem;
    const std::string path = entry_path(c.code, c.driver);
    read_status s = read_entry(path, want, cubin, h, from, problem);
    if (s == read_status::ok) {
      if (writable_)
        if (auto idx = index(/*may_rebuild=*/false)) idx->touch(c.code, c.driver, now_seconds());
      return cubin;
    }
    if (s == read_status::invalid) {
      stats().rejected++;
      warn_once("invalid " + path, "JIT cache: ignoring " + path + " (" + label_ + "): " + problem);
    }
  }
  return std::nullopt;
}

bool cache_dir::entry_exists(const full_key& k) {
  file_stat st;
  return current_fs().stat(entry_path(k), st) == 0 && st.regular;
}

int cache_dir::write(const full_key& k, core::byte_span cubin, std::string& why) {
  if (!writable_) return EROFS;
  fs& f = current_fs();
  auto bytes = encode_entry(k, cubin, f.now_unix_ns(), why, codec_);
  if (!bytes) return EINVAL;
  // An entry larger than the whole cache may hold would evict everything else and still leave the
  // cache over its bound: it is not stored (the process keeps its SASS in memory).
  if (max_bytes_ && bytes->size() > max_bytes_) {
    why = "an entry of " + std::to_string(bytes->size()) + " bytes is larger than the cache's size limit (" +
          std::to_string(max_bytes_) + " bytes, FATPACK_CACHE_MAXSIZE)";
    return EFBIG;
  }
  const std::string fan = fanout_dir(k.code.hash);
  int e = f.mkdir(fan, 0700);
  if (e == ENOENT) e = make_dirs(f, fan, 0700);  // objects/ itself is missing (removed by hand?)
  if (e && e != EEXIST) {
    why = fan + ": " + errno_text(e);
    return e;
  }
  // O_NOFOLLOW covers only the last component of the temp file's path: a symlink planted as
  // objects/<ab> would take every entry of that fan-out wherever it points. Write only into a real
  // directory of ours that nobody else can write.
  file_stat fst;
  if ((e = f.stat(fan, fst)) || !fst.directory || fst.uid != f.euid() || (fst.mode & 022)) {
    why = fan + ": " + (e ? errno_text(e) : std::string("not a directory of this user's that only it can write"));
    return e ? e : ENOTDIR;
  }
  static std::atomic<unsigned> counter{0};
  const std::string final_path = entry_path(k);
  const std::string tmp = fan + "/." + k.file_name() + "." + std::to_string(f.pid()) + "." +
                          std::to_string(counter.fetch_add(1)) + ".tmp";
  int fd = -1;
  if ((e = f.open(tmp, open_mode::create_new, fd))) {
    why = tmp + ": " + errno_text(e);
    return e;
  }
  // "Writer alive" for the stray-temp cleanup; released when we close or die. Its failure is silent
  // by design: a cleaner never removes a temp file younger than a minute, and this one is renamed
  // or removed within milliseconds.
  f.try_flock(fd);
  e = f.allocate(fd, bytes->size());
  if (e == EOPNOTSUPP || e == EINVAL) e = 0;  // then the write reports a full disk
  if (!e) e = f.pwrite(fd, bytes->data(), bytes->size(), 0);
  if (!e) e = f.rename(tmp, final_path);
  f.close(fd);
  if (e) {
    f.unlink(tmp);  // the caller warns about `e`; a temp file left behind is cleaned later
    why = final_path + ": " + errno_text(e);
    return e;
  }
  stats().bytes_written += bytes->size();
  stats().stores++;
  index_insert(k, bytes->size());
  return 0;
}

bool cache_dir::index_insert(const full_key& k, std::uint64_t bytes) {
  const char* const effect = "the entry is not in the index until its next hit or an index rebuild";
  auto lock = index_lock();  // null: lock_file warned
  if (!lock) return false;
  int stat_err = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto idx = index();  // null: index() warned, or there is no index to update
    if (!idx) return false;
    std::string why;
    bool full = false;
    {
      dir_lock_guard g(*lock, why);
      if (!g.ok()) {
        warn_once("io", "JIT cache: " + dir_ + "/index.lock: " + why + "; " + effect);
        return false;
      }
      // Replaced meanwhile (rebuilt: retired; or deleted and recreated by hand): use the new one.
      // A failed stat is retried with a fresh mapping (silent when the retry works).
      file_stat st;
      stat_err = idx->retired() ? 0 : current_fs().stat(dir_ + "/index.v1", st);
      if (idx->retired() || stat_err != 0 || st.inode != idx->inode()) {
        std::lock_guard<std::mutex> m(mu_);
        if (index_ == idx) index_.reset();
        continue;
      }
      index_slot s;
      s.code = k.code.hash;
      s.driver = k.driver.hash;
      s.disk_bytes = static_cast<std::uint32_t>(bytes);
      s.last_use_s = now_seconds();
      s.tick = idx->next_tick();
      if (idx->insert(s)) return true;
      full = true;
    }
    // Too full: a new file with room (the entry just written is on disk, so the rebuild finds it).
    if (full) {
      const auto grown = static_cast<std::uint32_t>(std::min<std::uint64_t>(2ull * idx->capacity(), max_index_capacity));
      if (rebuild_index(why, grown)) return true;
      warn_once("io", "JIT cache: cannot grow the index: " + why + "; " + effect);
      return false;
    }
  }
  if (stat_err) io_problem("cannot stat", dir_ + "/index.v1", stat_err, effect);
  return false;
}

void cache_dir::quarantine(const full_key& k, std::uint32_t target_arch) {
  // Under the key's lock, so that a good entry renamed into place meanwhile is not deleted.
  const std::string path = entry_path(k);
  int err = 0;
  auto kl = key_lock::try_acquire(inflight_lock_path(), lock_hash(k), &err);
  if (!kl) {
    // Busy (EAGAIN: being re-published right now): silent.
    io_problem("cannot lock", inflight_lock_path(), err, "the invalid entry " + path + " is kept");
    return;
  }
  expected_key want{&k.code, &k.driver, target_arch};
  sass_bytes cubin;
  entry_header h;
  std::string drv, problem;
  if (read_entry(path, want, cubin, h, drv, problem) != read_status::invalid) return;
  if (int e = current_fs().unlink(path)) io_problem("cannot remove the invalid entry", path, e, "it is kept");
  auto lock = index_lock();
  auto idx = index();
  if (lock && idx) {
    std::string why;
    dir_lock_guard g(*lock, why);
    if (g.ok())
      idx->erase(k.code.hash, k.driver.hash);
    else
      warn_once("io", "JIT cache: " + dir_ + "/index.lock: " + why + "; the index keeps an entry that is gone");
  }
}

std::shared_ptr<dir_lock> cache_dir::lock_file(std::shared_ptr<dir_lock>& slot, const char* name) {
  std::string why;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (slot || !writable_) return slot;
    slot = dir_lock::get(dir_ + "/" + name, why);
    if (slot) return slot;
  }
  // Not under mu_: the log callback is the application's.
  warn_once("io", "JIT cache: cannot open the lock file " + why + "; index updates, eviction and temp-file cleaning are skipped");
  return nullptr;
}

std::shared_ptr<dir_lock> cache_dir::index_lock() { return lock_file(index_lock_, "index.lock"); }
std::shared_ptr<dir_lock> cache_dir::evict_lock() { return lock_file(evict_lock_, "evict.lock"); }

std::shared_ptr<index_file> cache_dir::index(bool may_rebuild) {
  std::string io_trouble;  // warned about after mu_ is released (the log callback is the application's)
  {
    std::lock_guard<std::mutex> g(mu_);
    if (index_ && !index_->retired()) return index_;
    std::string why;
    int err = 0;
    // A prebuilt layer's index is someone else's file: copied, never mapped (index.hpp).
    auto m = index_file::map(dir_ + "/index.v1", writable_, why, /*copy=*/prebuilt_, &err);
    if (m) {
      index_ = std::move(m);
      index_problem_.clear();
      return index_;
    }
    index_problem_ = why;
    index_.reset();
    if (!writable_ || rebuild_failed_ || !may_rebuild) {
      // A missing or damaged index is silent (a store rebuilds it); an I/O error is not. (Where a
      // rebuild may run, it maps the file again under the index lock and reports what fails there.)
      if (err && !race_errno(err)) io_trouble = why;
      if (io_trouble.empty()) return nullptr;
    }
  }
  if (!io_trouble.empty()) {
    stats().io_errors++;
    warn_once("io", "JIT cache: cannot open the index " + io_trouble + "; lookups go on without it (uses are not recorded)");
    return nullptr;
  }
  std::string why;
  if (!rebuild_index(why)) {
    {
      std::lock_guard<std::mutex> g(mu_);
      rebuild_failed_ = true;  // once per process: the directory works without an index
    }
    warn_once("io", "JIT cache: cannot rebuild the index (" + label_ + "): " + why +
                        "; the cache works without it (no size bound, no eviction)");
    return nullptr;
  }
  std::lock_guard<std::mutex> g(mu_);
  return index_;
}

std::string cache_dir::index_problem() {
  index();
  std::lock_guard<std::mutex> g(mu_);
  return index_problem_;
}

bool cache_dir::rebuild_index(std::string& why, std::uint32_t min_capacity, bool force) {
  auto lock = index_lock();
  if (!lock) {
    why = "no index lock";
    return false;
  }
  dir_lock_guard g(*lock, why);
  if (!g.ok()) {
    why = dir_ + "/index.lock: " + why;
    return false;
  }
  const std::string path = dir_ + "/index.v1";
  std::string map_why;
  std::shared_ptr<index_file> old = index_file::map(path, true, map_why);
  // Re-check under the lock: another process may have rebuilt it already.
  if (!force && old && !old->retired() && old->capacity() >= min_capacity) {
    std::lock_guard<std::mutex> m(mu_);
    index_ = old;
    return true;
  }
  std::vector<index_slot> slots;
  fs& f = current_fs();
  for (const auto& item : scan()) {
    if (item.temp) continue;
    index_slot s;
    if (!parse_file_name(item.name, s.code, s.driver)) continue;
    // Header only: cheap, and enough for accounting (a bad payload is found when it is read).
    std::uint8_t head[entry_header_size];
    const char* const left_out = "left out of the rebuilt index (until its next hit)";
    int fd = -1;
    if (int e = open_regular(f, item.path, fd)) {
      if (e != EINVAL) io_problem("cannot open", item.path, e, left_out);  // EINVAL: not a file, not an entry
      continue;
    }
    std::size_t got = 0;
    int e = f.pread(fd, head, sizeof head, 0, got);
    f.close(fd);
    if (e) {
      io_problem("cannot read", item.path, e, left_out);
      continue;
    }
    if (got < sizeof head && item.st.size >= sizeof head) {
      stats().io_errors++;
      warn_once("io", "JIT cache: cannot read " + item.path + ": a short read (" + std::to_string(got) + " of " +
                          std::to_string(sizeof head) + " bytes); " + left_out);
      continue;
    }
    entry_header h;
    // A bad header is an invalid entry: not indexed, and refused (and removed) when it is read.
    if (parse_header(core::byte_span(head, got), item.st.size, h) || h.code_hash != s.code || h.driver_hash != s.driver)
      continue;
    s.disk_bytes = static_cast<std::uint32_t>(item.st.size);
    s.last_use_s = static_cast<std::uint32_t>(item.st.mtime_s);
    slots.push_back(s);
  }
  // The use order survives the rebuild: an entry the old index knows keeps its last use (time, and
  // its use tick to order uses within one second); one it does not know (a writer killed before its
  // index update, or no readable old index) counts as used when its file was written (a hit does not
  // touch the file: that would be a system call on every hit). Ordering by file time alone made every
  // rebuild (and so every `cache prune`) evict the most recently used entries first.
  for (auto& s : slots) {
    index_slot known;
    if (old && old->find(s.code, s.driver, &known)) {
      s.last_use_s = known.last_use_s;
      s.tick = known.tick;
    }
  }
  std::sort(slots.begin(), slots.end(), [](const index_slot& a, const index_slot& b) {
    return a.last_use_s != b.last_use_s ? a.last_use_s < b.last_use_s : a.tick < b.tick;
  });
  std::uint32_t tick = 0;
  for (auto& s : slots) s.tick = ++tick;
  std::uint32_t cap = std::max(default_index_capacity, min_capacity);
  if (int e = index_file::create(path, slots, cap, f.now_unix_s())) {
    why = path + ": " + errno_text(e);
    return false;
  }
  if (old) old->set_retired();  // other processes see it and remap
  auto fresh = index_file::map(path, true, why);
  if (!fresh) return false;
  log_line(log_level::info, "JIT cache (" + label_ + "): index rebuilt from " + std::to_string(slots.size()) + (slots.size() == 1 ? " entry" : " entries") +
                                (map_why.empty() ? std::string() : " (" + map_why + ")"));
  std::lock_guard<std::mutex> m(mu_);
  index_ = std::move(fresh);
  index_problem_.clear();
  return true;
}

std::vector<cache_dir::file_item> cache_dir::scan(std::vector<stray_item>* strays) {
  std::vector<file_item> out;
  fs& f = current_fs();
  const std::string objects = dir_ + "/objects";
  // What an error leaves out is left out of the index rebuild, the temp-file cleaning, `cache list`.
  const char* const skipped = "skipped by this scan (index rebuild, temp-file cleaning)";
  std::vector<std::string> fans;
  if (int e = f.list_dir(objects, fans)) {
    io_problem("cannot list", objects, e, skipped);
    return out;
  }
  std::sort(fans.begin(), fans.end());
  for (const auto& fan : fans) {
    std::vector<std::string> names;
    const std::string d = objects + "/" + fan;
    // Only real directories (stat is lstat; list_dir refuses symlinks too): a symlink planted as
    // objects/<ab> is not the cache's, and nothing behind it is read, evicted or removed.
    file_stat ds;
    const int stat_error = f.stat(d, ds);
    if (stat_error && !strays) {  // list and verify name it as a stray below instead
      io_problem("cannot stat", d, stat_error, skipped);
      continue;
    }
    // A fan-out directory root owns is the cache's only in a layer (prebuilt_: one root installed);
    // in this user's own cache it is someone else's, like any other owner's.
    if (std::string bad = stat_error ? errno_text(stat_error) : fan_out_problem(d, fan, prebuilt_, ds); !bad.empty()) {
      // Not descended into, by any scan (index rebuild, eviction, temp-file cleaning, `cache
      // clear`, `prune`, `stats`): its files are not the cache's, and one that another user may
      // write could be swapped for a symlink between the scan and an unlink by path. Before, only
      // the scans of `list` and `verify` skipped it, and `clear` removed what they said it kept.
      const bool directory = stat_error == 0 && ds.directory && !ds.symlink;
      if (directory) bad += " (its files are neither read nor removed)";
      if (strays) strays->push_back(stray_item{d, bad, directory});
      continue;
    }
    if (int e = f.list_dir(d, names)) {
      io_problem("cannot list", d, e, skipped);
      continue;
    }
    for (const auto& n : names) {
      file_item it;
      it.path = d + "/" + n;
      it.name = n;
      // An entry's name in another fan-out directory than its code key's first byte: the runtime
      // never looks for it there, and eviction removes entries by the path their key gives, so it
      // was listed as valid and counted for ever. A stray, like any other file of no entry's place.
      std::array<std::uint8_t, 16> code{};
      std::uint64_t driver = 0;
      if (parse_file_name(n, code, driver) && hex2(code[0]) != fan) {
        if (strays)
          strays->push_back(stray_item{it.path, "an entry's name in fan-out directory " + fan + ", where it is never "
                                                "looked for (its key's directory is " + hex2(code[0]) + ")",
                                       false});
        continue;
      }
      if (int e = f.stat(it.path, it.st)) {
        io_problem("cannot stat", it.path, e, skipped);  // ENOENT: evicted meanwhile (silent)
        continue;
      }
      it.temp = is_temp_name(n);
      out.push_back(std::move(it));
    }
  }
  return out;
}

}  // namespace fatpack::detail::cache
