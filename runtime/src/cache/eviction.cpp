// Eviction and temp-file cleaning (eviction.hpp).
#include "cache/eviction.hpp"

#include "cache/fs.hpp"
#include "cache/stats.hpp"
#include "platform/log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace fatpack::detail::cache {

namespace {

// Holds evict.lock (its OFD lock plus the in-process mutex, locks.hpp) for the scope.
class evictor {
 public:
  // A lock file that cannot be opened was warned about (cache_dir::lock_file); EAGAIN (another
  // evictor is at it) is silent.
  evictor(cache_dir& d, bool wait) : lock_(d.evict_lock()) {
    if (!lock_) return;
    if (wait) {
      std::string why;
      held_ = lock_->lock(why);
    } else {
      int e = 0;
      held_ = lock_->try_lock(&e);
      if (!held_) d.io_problem("cannot lock", d.dir() + "/evict.lock", e, "eviction and temp-file cleaning are skipped");
    }
  }
  ~evictor() {
    if (held_) lock_->unlock();
  }
  bool held() const { return held_; }

 private:
  std::shared_ptr<dir_lock> lock_;
  bool held_ = false;
};

evict_result evict_locked(cache_dir& d, std::uint64_t target) {
  evict_result r;
  auto idx = d.index();
  auto ilock = d.index_lock();
  if (!idx || !ilock) return r;
  r.ran = true;
  std::uint64_t total = idx->total_bytes();
  if (total > target) {
    // The total is a counter no check covers: before evicting for it, it is set to what the live
    // slots hold. Before, a damaged total (one bit flipped) evicted every entry at every store.
    std::string why;
    dir_lock_guard g(*ilock, why);
    if (g.ok()) total = idx->repair_total();
  }
  if (total <= target) {
    r.bytes_left = total;
    return r;
  }
  std::vector<index_slot> slots = idx->live_slots();
  std::sort(slots.begin(), slots.end(), [](const index_slot& a, const index_slot& b) { return a.tick < b.tick; });
  fs& f = current_fs();
  for (const auto& s : slots) {
    if (idx->total_bytes() <= target) break;
    full_key k;
    k.code.hash = s.code;
    k.driver.hash = s.driver;
    const std::string path = d.entry_path(s.code, s.driver);
    int e = 0;
    auto kl = key_lock::try_acquire(d.inflight_lock_path(), cache_dir::lock_hash(k), &e);
    if (!kl) {  // EAGAIN (silent): being compiled or re-published right now
      d.io_problem("cannot lock", d.inflight_lock_path(), e, "the entry " + path + " is not evicted");
      continue;
    }
    e = f.unlink(path);
    if (e && e != ENOENT) {
      d.io_problem("cannot remove", path, e, "it is not evicted");
      continue;
    }
    std::string why;
    dir_lock_guard g(*ilock, why);
    if (!g.ok()) {
      d.warn_once("io", "JIT cache: " + d.dir() + "/index.lock: " + why + "; eviction stops here");
      break;
    }
    const std::uint64_t bytes = idx->erase(s.code, s.driver);  // what its slot accounted for
    if (!e) {
      ++r.removed;
      r.bytes_freed += bytes;
      stats().evictions++;
    }
  }
  r.bytes_left = idx->total_bytes();
  return r;
}

}  // namespace

evict_result evict_to(cache_dir& d, std::uint64_t target_bytes, bool wait) {
  evictor ev(d, wait);
  if (!ev.held()) return {};
  evict_result r = evict_locked(d, target_bytes);
  if (r.removed)
    log_line(log_level::debug, "JIT cache (" + d.label() + "): evicted " + std::to_string(r.removed) + (r.removed == 1 ? " entry (" : " entries (") +
                                   std::to_string(r.bytes_freed) + " bytes), " + std::to_string(r.bytes_left) + " left");
  return r;
}

void after_store(cache_dir& d) {
  auto idx = d.index();
  if (!idx) return;
  const std::int64_t now = current_fs().now_unix_s();
  const bool over = d.max_bytes() && idx->total_bytes() > d.max_bytes();
  // A distance, not a difference: after the clock jumps back, a "last clean" in the future must not
  // postpone cleaning until the clock catches up.
  const bool clean_due = std::llabs(now - idx->last_clean_s()) > 3600;
  if (!over && !clean_due) return;
  {
    evictor ev(d, false);
    if (!ev.held()) return;  // someone else is at it (and checks again when done: below)
    if (over) evict_locked(d, d.max_bytes() / 10 * 9);
    if (clean_due) {
      idx->set_last_clean(now);
      clean_temp_files(d, 24 * 3600);
    }
  }
  // A store that landed while we held evict.lock found it taken and left the bound to us: look
  // again after releasing it. A store after this check finds the lock free and evicts itself, so
  // the bound holds once the stores stop (a few passes at most; each one frees 10% of the bound).
  for (int pass = 0; pass < 4 && d.max_bytes() && idx->total_bytes() > d.max_bytes(); ++pass) {
    evictor ev(d, false);
    if (!ev.held()) return;
    evict_locked(d, d.max_bytes() / 10 * 9);
  }
}

// Errors here are silent by design: `unknown` makes the cleaner go by age (a day), the rule for file
// systems where flock cannot tell, and `cache clear` spare the file.
temp_writer temp_writer_of(const std::string& path) {
  fs& f = current_fs();
  int fd = -1;
  if (f.open(path, open_mode::read, fd) != 0) return temp_writer::unknown;
  const int e = f.try_flock(fd);
  f.close(fd);  // drops the flock we may have taken
  if (e == 0) return temp_writer::gone;  // taken: nobody holds it, its writer is gone
  return e == EWOULDBLOCK || e == EAGAIN ? temp_writer::alive : temp_writer::unknown;
}

bool temp_writer_alive(const std::string& path) { return temp_writer_of(path) != temp_writer::gone; }

std::uint64_t clean_temp_files(cache_dir& d, std::int64_t max_age_s) {
  fs& f = current_fs();
  const std::int64_t now = f.now_unix_s();
  std::uint64_t n = 0;
  for (const auto& it : d.scan()) {
    if (!it.temp) continue;
    // Ages are distances: the clock may have jumped (NTP, a fixed RTC), so a file stamped in the
    // future is not young for ever, and no age alone marks a file whose writer is alive.
    const std::int64_t age = std::llabs(now - it.st.mtime_s);
    bool dead = false;
    // A minute's grace: a writer takes its flock right after creating the file.
    if (age > 60) {
      const temp_writer w = temp_writer_of(it.path);
      // Gone: remove. Alive: never, whatever the clock says. Cannot tell (ENOLCK, ...): go by age.
      dead = w == temp_writer::gone || (w == temp_writer::unknown && age > max_age_s);
    }
    if (!dead) continue;
    if (int e = f.unlink(it.path))
      d.io_problem("cannot remove the stale temp file", it.path, e, "it is left for a later cleaning");
    else
      ++n;
  }
  // Index files being created (index.v1.tmp.<pid>.<n>, index.cpp) by a process that died before
  // renaming them: 3 MiB or more each, and no other code ever removes them. They are written under
  // index.lock, so while we hold it nobody is writing one; the age grace covers a writer on a file
  // system where the lock is not shared (and keeps the clock-skew case harmless).
  const char* const later = "stale index files are left for a later cleaning";
  auto ilock = d.index_lock();  // null: lock_file warned
  std::vector<std::string> names;
  int e = ilock ? f.list_dir(d.dir(), names) : 0;
  if (e) d.io_problem("cannot list", d.dir(), e, later);
  if (ilock && e == 0) {
    std::string why;
    dir_lock_guard g(*ilock, why);
    if (!g.ok()) d.warn_once("io", "JIT cache: " + d.dir() + "/index.lock: " + why + "; " + later);
    if (g.ok()) {
      for (const auto& name : names) {
        if (name.rfind("index.v1.tmp.", 0) != 0) continue;
        const std::string path = d.dir() + "/" + name;
        file_stat st;
        if (int se = f.stat(path, st)) {
          d.io_problem("cannot stat", path, se, later);
          continue;
        }
        if (!st.regular || now - st.mtime_s <= 60) continue;
        if (int ue = f.unlink(path))
          d.io_problem("cannot remove", path, ue, later);
        else
          ++n;
      }
    }
  }
  return n;
}

}  // namespace fatpack::detail::cache
