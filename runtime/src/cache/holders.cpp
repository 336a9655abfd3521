// Key-lock holder records and their heartbeat (holders.hpp).
#include "cache/holders.hpp"

#include "cache/fs.hpp"

#include "fatpack/core/le_bytes.hpp"
#include "fatpack/core/thread_pool.hpp"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace fatpack::detail::cache {

using steady = std::chrono::steady_clock;

// A slot (little-endian, docs/cache.md §4):
//   0 u32 magic "FPKH"   4 u8 version (1)   5 u8 host length (<= 16)   6 u16 zero
//   8 u32 lock offset   12 u32 pid   16 u64 process start (clock ticks since boot, /proc/<pid>/stat)
//  24 u64 heartbeat     32 u64 XXH3-64 of the full host name (0: unknown)
//  40 host name, its first 16 bytes (zero-padded; for messages)   56 u64 XXH3-64 of bytes 0-55
// All zero: a free slot.
namespace {

constexpr std::uint32_t record_magic = 0x484B5046;  // "FPKH"
constexpr std::uint8_t record_version = 1;
constexpr std::size_t host_bytes = 16, check_at = 56;
// A holder that is gone (or a zombie) must also have stopped ticking this long before a waiter
// believes it: in another PID namespace with the same host name, "no such pid" is not "gone".
constexpr auto gone_grace = std::chrono::seconds(3);
constexpr auto beat_every = std::chrono::seconds(1);

using core::le::load;
using core::le::store;

struct identity {
  std::uint32_t pid = 0;
  std::uint64_t start = 0, host_hash = 0;
  std::string host;  // at most host_bytes, printable
};

bool printable(char c) { return c > 0x20 && c < 0x7f; }

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot) and field 3 (state), parsed
// strictly after the last ')' (the command name may hold anything). false: unparsable.
bool parse_stat(const std::string& s, char& state, std::uint64_t& start) {
  const auto paren = s.rfind(')');
  if (paren == std::string::npos || paren + 2 >= s.size() || s[paren + 1] != ' ') return false;
  std::size_t pos = paren + 2;
  for (int field = 3; field <= 22; ++field) {
    const std::size_t end = s.find_first_of(" \n", pos);
    const std::string v = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (v.empty()) return false;
    if (field == 3) {
      if (v.size() != 1) return false;
      state = v[0];
    } else if (field == 22) {
      if (v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) return false;
      start = std::stoull(v);
      return true;
    }
    if (end == std::string::npos) return false;
    pos = end + 1;
  }
  return false;
}

// A small /proc file, bounded. Its own calls of the seam rather than read_small_file's: the record is
// advisory, so its reads fail silently (no information), and the I/O error suite tells call sites
// apart by function — shared helpers would mix these silent sites with the entry reads, which warn.
int read_proc(fs& f, const std::string& path, std::string& out, std::size_t limit) {
  int fd = -1;
  if (int e = f.open(path, open_mode::read, fd)) return e;
  out.assign(limit, '\0');
  std::size_t got = 0;
  const int e = f.pread(fd, out.data(), limit, 0, got);
  f.close(fd);
  out.resize(e ? 0 : got);
  return e;
}

// This process: pid, start time, host name (/proc/sys/kernel/hostname: the UTS namespace's name,
// like gethostname). A part that cannot be read stays unknown (0 / ""), which only means that
// waiters rely on the heartbeat alone.
identity read_self(fs& f) {
  identity me;
  me.pid = static_cast<std::uint32_t>(f.pid());
  std::string text;
  char state = 0;
  if (read_proc(f, "/proc/self/stat", text, 1024) == 0 && !parse_stat(text, state, me.start)) me.start = 0;
  if (read_proc(f, "/proc/sys/kernel/hostname", text, 256) == 0) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!text.empty()) {
      me.host_hash = XXH3_64bits(text.data(), text.size());
      if (me.host_hash == 0) me.host_hash = 1;
      for (std::size_t i = 0; i < text.size() && i < host_bytes; ++i) me.host += printable(text[i]) ? text[i] : '?';
    }
  }
  return me;
}

void seal(std::uint8_t* p) { store<std::uint64_t>(p + check_at, XXH3_64bits(p, check_at)); }

void encode(std::uint8_t* p, const identity& me, std::uint64_t offset) {
  std::memset(p, 0, holder_record_size);
  store<std::uint32_t>(p, record_magic);
  p[4] = record_version;
  p[5] = static_cast<std::uint8_t>(me.host.size());
  store<std::uint32_t>(p + 8, static_cast<std::uint32_t>(offset));
  store<std::uint32_t>(p + 12, me.pid);
  store<std::uint64_t>(p + 16, me.start);
  store<std::uint64_t>(p + 32, me.host_hash);
  std::memcpy(p + 40, me.host.data(), me.host.size());
  seal(p);
}

// Strict: anything off is no record (false).
bool decode(const std::uint8_t* p, identity& who, std::uint64_t& offset, std::uint64_t& beat) {
  if (load<std::uint32_t>(p) != record_magic || p[4] != record_version || p[6] != 0 || p[7] != 0) return false;
  if (load<std::uint64_t>(p + check_at) != XXH3_64bits(p, check_at)) return false;
  const std::size_t n = p[5];
  if (n > host_bytes) return false;
  who.host.clear();
  for (std::size_t i = 0; i < host_bytes; ++i) {
    const char c = static_cast<char>(p[40 + i]);
    if (i < n ? !printable(c) : c != 0) return false;
    if (i < n) who.host += c;
  }
  offset = load<std::uint32_t>(p + 8);
  who.pid = load<std::uint32_t>(p + 12);
  who.start = load<std::uint64_t>(p + 16);
  beat = load<std::uint64_t>(p + 24);
  who.host_hash = load<std::uint64_t>(p + 32);
  return who.pid != 0 && (who.host_hash == 0) == who.host.empty();
}

// Opens the table (created 0600 by a holder) through the seam: O_NOFOLLOW, a regular file, ours,
// and, to write it, no other hard link (a link planted to another file would have fatpack write
// its records there). (Not open_regular: see read_proc.)
int open_table(fs& f, const std::string& path, open_mode mode, int& fd) {
  if (int e = f.open(path, mode, fd)) return e;
  file_stat st;
  int e = f.fstat(fd, st);
  if (!e && !st.regular) e = EINVAL;
  if (!e && st.uid != f.euid()) e = EPERM;
  if (!e && mode == open_mode::read_write && st.links != 1) e = EPERM;
  if (e) {
    f.close(fd);
    fd = -1;
  }
  return e;
}

}  // namespace

struct holder_entry {
  fs* f = nullptr;
  int fd = -1;
  std::uint64_t at = 0;  // byte offset of the slot
  std::uint8_t rec[holder_record_size] = {};
  std::uint64_t beat = 0;
  steady::time_point due;  // next heartbeat
};

// One per process (a forked child makes its own: the parent's mutex may have been held by a thread
// that does not exist in the child, and its ticker thread is not there). Leaked on purpose.
struct holder_registry {
  std::uint32_t pid = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<holder_entry*> held;
  bool ticking = false;  // the ticker thread runs
  bool have_self = false;
  identity self;
};

namespace {

std::atomic<holder_registry*> g_registry{nullptr};

holder_registry* this_process(fs& f) {
  const auto pid = static_cast<std::uint32_t>(f.pid());
  holder_registry* r = g_registry.load(std::memory_order_acquire);
  while (!r || r->pid != pid) {
    auto* fresh = new holder_registry();
    fresh->pid = pid;
    if (g_registry.compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) return fresh;
    delete fresh;  // another thread of this process was first; `r` is its registry
  }
  return r;
}

identity self_of(holder_registry& r, fs& f) {
  std::lock_guard<std::mutex> g(r.mu);
  if (!r.have_self) {
    r.self = read_self(f);
    r.have_self = r.self.start != 0 && r.self.host_hash != 0;  // a failed read is tried again next time
  }
  return r.self;
}

// The ticker: rewrites each held record with its heartbeat bumped, about once a second, and ends
// when the process holds none. The I/O happens under the registry's mutex, so once a record is
// deregistered the ticker never touches its descriptor (or its seam) again. A record held for less
// than a second is never rewritten.
void tick(holder_registry* r) {
  std::unique_lock<std::mutex> lk(r->mu);
  while (!r->held.empty()) {
    steady::time_point next = r->held.front()->due;
    for (auto* e : r->held) next = std::min(next, e->due);
    r->cv.wait_until(lk, next);
    const auto now = steady::now();
    for (auto* e : r->held) {
      if (now < e->due) continue;
      store<std::uint64_t>(e->rec + 24, ++e->beat);
      seal(e->rec);
      e->f->pwrite(e->fd, e->rec, holder_record_size, e->at);  // best effort, like the first write
      e->due = now + beat_every;
    }
  }
  r->ticking = false;
}

}  // namespace

std::string holders_path(const std::string& lock_file) {
  const std::string suffix = ".lock";
  if (lock_file.size() > suffix.size() && lock_file.compare(lock_file.size() - suffix.size(), suffix.size(), suffix) == 0)
    return lock_file.substr(0, lock_file.size() - suffix.size()) + ".holders";
  return lock_file + ".holders";
}

std::unique_ptr<holder_record> holder_record::publish(const std::string& lock_file, std::uint64_t offset) {
  fs& f = current_fs();
  holder_registry* r = this_process(f);
  const identity me = self_of(*r, f);
  auto e = std::make_unique<holder_entry>();
  e->f = &f;
  e->at = (offset % holder_slots) * holder_record_size;
  encode(e->rec, me, offset);
  if (open_table(f, holders_path(lock_file), open_mode::read_write, e->fd)) return nullptr;
  if (f.pwrite(e->fd, e->rec, holder_record_size, e->at)) {
    f.close(e->fd);
    return nullptr;
  }
  e->due = steady::now() + beat_every;
  std::unique_ptr<holder_record> rec(new holder_record());
  rec->reg_ = r;
  core::keep_code_loaded();  // the ticker runs this code (before r->mu: it takes the loader's lock)
  std::lock_guard<std::mutex> g(r->mu);
  r->held.push_back(e.get());
  rec->e_ = std::move(e);
  if (!r->ticking) {
    r->ticking = true;
    try {
      std::thread(tick, r).detach();
    } catch (...) {
      r->ticking = false;  // no heartbeat: a waiter may stop waiting after its stall bound (a compile twice)
    }
  }
  return rec;
}

holder_record::~holder_record() {
  fs& f = *e_->f;
  // A forked child that inherited this object leaves the parent's record (and registry) alone.
  if (reg_->pid != static_cast<std::uint32_t>(f.pid())) {
    f.close(e_->fd);
    return;
  }
  {
    std::lock_guard<std::mutex> g(reg_->mu);
    auto& h = reg_->held;
    for (auto it = h.begin(); it != h.end(); ++it)
      if (*it == e_.get()) {
        h.erase(it);
        break;
      }
  }
  // Zeroed even if a colliding key's holder wrote the slot since: that one rewrites it at its next
  // heartbeat, and until then its waiters merely have no information.
  const std::uint8_t zero[holder_record_size] = {};
  f.pwrite(e_->fd, zero, holder_record_size, e_->at);
  f.close(e_->fd);
}

holder_watch::holder_watch(const std::string& lock_file, std::uint64_t offset, int stall_s)
    : f_(current_fs()), path_(holders_path(lock_file)), offset_(offset), stall_s_(stall_s) {}

holder_watch::~holder_watch() {
  if (fd_ >= 0) f_.close(fd_);
}

std::string holder_watch::check(steady::time_point now) {
  // The table appears with the first record: until then (and whenever it cannot be read), no
  // information.
  if (fd_ < 0 && open_table(f_, path_, open_mode::read, fd_)) {
    fd_ = -1;
    seen_ = false;
    return {};
  }
  std::uint8_t p[holder_record_size];
  std::size_t got = 0;
  identity who;
  std::uint64_t off = 0, beat = 0;
  if (f_.pread(fd_, p, sizeof p, (offset_ % holder_slots) * holder_record_size, got) || got != sizeof p ||
      !decode(p, who, off, beat) || off != offset_) {
    seen_ = false;  // free, torn, garbage, or a colliding key's holder
    return {};
  }
  if (!seen_ || who.pid != pid_ || who.start != start_ || who.host_hash != host_hash_ || beat != beat_) moved_ = now;
  seen_ = true;
  pid_ = who.pid;
  start_ = who.start;
  host_hash_ = who.host_hash;
  beat_ = beat;
  const auto still = now - moved_;
  const std::string name = "pid " + std::to_string(who.pid) + " on " + (who.host.empty() ? "an unknown host" : who.host);
  holder_registry* r = this_process(f_);
  const identity me = self_of(*r, f_);
  if (who.host_hash != 0 && who.host_hash == me.host_hash && who.start != 0) {
    std::string text;
    char state = 0;
    std::uint64_t start = 0;
    const int e = read_proc(f_, "/proc/" + std::to_string(who.pid) + "/stat", text, 1024);
    const bool gone = e == ENOENT || e == ESRCH || (e == 0 && parse_stat(text, state, start) && start != who.start);
    if (!gone && e == 0 && start == who.start && (state == 'T' || state == 't')) return name + " is stopped";
    // A zombie leader can still have running threads (it called pthread_exit): the heartbeat says.
    const bool dead = !gone && e == 0 && start == who.start && (state == 'Z' || state == 'X' || state == 'x');
    if ((gone || dead) && still >= gone_grace) return name + (gone ? " is gone" : " has exited");
  }
  if (still >= std::chrono::seconds(stall_s_))
    return name + " has not updated its heartbeat for " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(still).count()) + " s";
  return {};
}

}  // namespace fatpack::detail::cache
