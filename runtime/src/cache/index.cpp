// The mapped index (index.hpp).
#include "cache/index.hpp"

#include "cache/fs.hpp"

#include <sys/mman.h>
#include <xxhash.h>

#include "fatpack/core/le_bytes.hpp"

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>

namespace fatpack::detail::cache {

namespace {

constexpr char index_magic[8] = {'F', 'P', 'K', 'I', 'N', 'D', 'X', '1'};
constexpr std::uint32_t version = 1;
// Header fields (offsets).
constexpr std::size_t h_version = 8, h_capacity = 12, h_generation = 16, h_check = 24, h_retired = 32,
                      h_total = 40, h_live = 48, h_tombstones = 56, h_last_clean = 64, h_tick = 72;
// Slot fields.
constexpr std::size_t s_seq = 0, s_state = 4, s_code = 8, s_driver = 24, s_bytes = 32, s_last_use = 36, s_tick = 40,
                      s_check = 44;
constexpr std::uint16_t empty = 0, live_state = 1, tombstone = 2;
// Probe sequences stop at this fill (live + tombstones) so that lookups stay short.
// (linear probing at 80%: ~3 probes for a hit, ~13 for a miss, each a 48-byte slot).
constexpr double max_fill = 0.8;

// Every field is little-endian (docs/cache.md §4): plain fields through core::le, words that are
// read and written atomically in place through le::from_stored / to_stored.
namespace le = core::le;
std::uint64_t load64(const std::uint8_t* p) {
  return le::from_stored(__atomic_load_n(reinterpret_cast<const std::uint64_t*>(p), __ATOMIC_ACQUIRE));
}
void store64(std::uint8_t* p, std::uint64_t v) {
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(p), le::to_stored(v), __ATOMIC_RELEASE);
}
void store32_relaxed(std::uint8_t* p, std::uint32_t v) {
  __atomic_store_n(reinterpret_cast<std::uint32_t*>(p), le::to_stored(v), __ATOMIC_RELAXED);
}
std::uint32_t load32(const std::uint32_t* w, int order) { return le::from_stored(__atomic_load_n(w, order)); }
// Atomically adds `d` to the 64-bit field at p; returns the new value.
std::uint64_t add64_relaxed(std::uint8_t* p, std::uint64_t d) {
  auto* w = reinterpret_cast<std::uint64_t*>(p);
  std::uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED), next;
  do {
    next = le::to_stored(le::from_stored(old) + d);
  } while (!__atomic_compare_exchange_n(w, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return le::from_stored(next);
}

std::uint64_t header_check(const std::uint8_t* h) { return XXH3_64bits(h, h_check); }
// 32 bits of XXH3 over the fields that decide a slot's meaning (the index is advisory: a damaged
// slot accepted by chance costs accounting, never correctness).
std::uint32_t slot_check(const std::uint8_t* s) { return static_cast<std::uint32_t>(XXH3_64bits(s + s_state, s_last_use - s_state)); }

std::uint64_t code_hash(const std::array<std::uint8_t, 16>& code) {
  return le::get64(code.data());
}

// A consistent copy of one slot, or false when it is being written / damaged. A seqlock: the words
// are copied with relaxed atomic loads (another process may be writing them), then the sequence
// number is compared again.
struct slot_copy {
  std::uint16_t state = empty;
  index_slot s;
};
constexpr std::size_t slot_words = index_slot_bytes / 4;
bool read_slot(const std::uint8_t* p, slot_copy& out) {
  const auto* w = reinterpret_cast<const std::uint32_t*>(p);
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::uint32_t seq1 = load32(&w[0], __ATOMIC_ACQUIRE);
    if (seq1 & 1) continue;
    std::uint32_t copy[slot_words];
    for (std::size_t i = 1; i < slot_words; ++i) copy[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (load32(&w[0], __ATOMIC_RELAXED) != seq1) continue;
    const auto* c = reinterpret_cast<const std::uint8_t*>(copy);
    const std::uint16_t state = le::get16(c + s_state);
    if (state == empty) {
      out.state = empty;
      return true;
    }
    if (le::get32(c + s_check) != slot_check(c)) return false;
    out.state = state;
    std::memcpy(out.s.code.data(), c + s_code, 16);
    out.s.driver = le::get64(c + s_driver);
    out.s.disk_bytes = le::get32(c + s_bytes);
    out.s.last_use_s = le::get32(c + s_last_use);
    out.s.tick = le::get32(c + s_tick);
    return true;
  }
  return false;
}

// The seqlock's writer side (the caller holds the index lock, or owns the buffer).
void write_slot(std::uint8_t* p, std::uint16_t state, const index_slot& s) {
  std::uint32_t img[slot_words] = {};
  auto* c = reinterpret_cast<std::uint8_t*>(img);
  le::put16(c + s_state, state);
  std::memcpy(c + s_code, s.code.data(), 16);
  le::put64(c + s_driver, s.driver);
  le::put32(c + s_bytes, s.disk_bytes);
  le::put32(c + s_last_use, s.last_use_s);
  le::put32(c + s_tick, s.tick);
  le::put32(c + s_check, slot_check(c));
  auto* w = reinterpret_cast<std::uint32_t*>(p);
  const std::uint32_t seq = load32(&w[0], __ATOMIC_RELAXED);
  // odd: being written (already odd if a writer was killed here)
  __atomic_store_n(&w[0], le::to_stored(seq | 1u), __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  // The other words are copied as the bytes they hold (already little-endian).
  for (std::size_t i = 1; i < slot_words; ++i) __atomic_store_n(&w[i], img[i], __ATOMIC_RELAXED);
  __atomic_store_n(&w[0], le::to_stored((seq | 1u) + 1u), __ATOMIC_RELEASE);  // even again, and different from before
}

}  // namespace

struct index_file::impl {
  void* mapped = nullptr;  // the mapping (our own index), or
  std::size_t mapped_len = 0;
  std::vector<std::uint8_t> copy;  // a private copy (a prebuilt layer's, or a file we do not own)
  ~impl() {
    if (mapped) ::munmap(mapped, mapped_len);
  }
};

index_file::~index_file() = default;

std::unique_ptr<index_file> index_file::map(const std::string& path, bool writable, std::string& why, bool copy_wanted,
                                            int* err) {
  int ignored = 0;
  int& failed = err ? *err : ignored;
  failed = 0;
  // Opened through the seam (O_CLOEXEC | O_NOFOLLOW), checked on the descriptor, then mapped or
  // copied; the descriptor is closed before returning (the mapping does not need it).
  fs& fsys = current_fs();
  int fd = -1;
  file_stat pre;
  // open_mode::read_write creates a missing file: look first, so that a missing index stays missing
  // (the read paths never rebuild; an empty file made by a race is only a damaged index, rebuilt).
  if (int e = fsys.stat(path, pre)) {
    why = path + ": " + errno_text(e);
    failed = e;
    return nullptr;
  }
  file_stat st;
  int e = open_regular(fsys, path, fd, &st, writable ? open_mode::read_write : open_mode::read);
  if (e) {
    why = open_problem(path, e);
    if (e != EINVAL) failed = e;  // EINVAL: not a regular file (damaged)
    return nullptr;
  }
  // A file written in place (the writable mapping) must be only the index: one with another hard
  // link is some other file too (a link planted to make fatpack write into it). Damaged: rebuilt,
  // by rename, which leaves the other file alone.
  if (writable && st.links != 1) {
    fsys.close(fd);
    why = path + ": has " + std::to_string(st.links) + " hard links (another file's name)";
    return nullptr;
  }
  // Map only a file we own and only ever replace by rename (never truncate): someone else's file
  // (a prebuilt layer's, root's) may be rewritten in place, and a mapping of it would SIGBUS.
  const bool copy = !writable && (copy_wanted || st.uid != fsys.euid());
  if (st.size < index_header_bytes || st.size > max_index_bytes) {
    fsys.close(fd);
    why = path + ": not an index file (" + std::to_string(st.size) + " bytes)";
    return nullptr;
  }
  std::unique_ptr<index_file> f(new index_file());
  f->impl_.reset(new impl());
  const std::size_t len = static_cast<std::size_t>(st.size);
  if (copy) {
    f->impl_->copy.resize(len);
    std::size_t got = 0;
    e = fsys.pread(fd, f->impl_->copy.data(), len, 0, got);
    fsys.close(fd);
    if (e || got != len) {
      why = path + ": " + (e ? errno_text(e) : std::string("shorter than it was"));
      failed = e ? e : EIO;
      return nullptr;
    }
    f->base_ = f->impl_->copy.data();
  } else {
    void* m = ::mmap(nullptr, len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    e = errno;
    fsys.close(fd);
    if (m == MAP_FAILED) {
      why = path + ": cannot map: " + errno_text(e);
      return nullptr;
    }
    f->impl_->mapped = m;
    f->impl_->mapped_len = len;
    f->base_ = static_cast<std::uint8_t*>(m);
  }
  f->size_ = st.size;
  f->writable_ = writable;
  f->inode_ = st.inode;
  const std::uint8_t* h = f->base_;
  const std::uint32_t v = le::get32(h + h_version), cap = le::get32(h + h_capacity);
  if (std::memcmp(h, index_magic, 8) != 0 || v != version) {
    why = path + ": bad magic or version";
    return nullptr;
  }
  if (header_check(h) != load64(h + h_check)) {
    why = path + ": header checksum mismatch";
    return nullptr;
  }
  if (cap > max_index_capacity) {
    why = path + ": capacity " + std::to_string(cap) + " over the limit of " + std::to_string(max_index_capacity);
    return nullptr;
  }
  if (cap == 0 || f->size_ != index_header_bytes + std::uint64_t(cap) * index_slot_bytes) {
    why = path + ": size " + std::to_string(f->size_) + " does not match its capacity " + std::to_string(cap);
    return nullptr;
  }
  f->capacity_ = cap;
  return f;
}

int index_file::create(const std::string& path, const std::vector<index_slot>& slots, std::uint32_t capacity,
                       std::int64_t now_s) {
  fs& f = current_fs();
  capacity = std::min(std::max(capacity, 1u), max_index_capacity);
  while (slots.size() >= capacity * max_fill && capacity < max_index_capacity) capacity *= 2;
  const std::size_t fit = static_cast<std::size_t>(capacity * max_fill) - 1;
  const std::uint64_t size = index_header_bytes + std::uint64_t(capacity) * index_slot_bytes;
  std::vector<std::uint8_t> buf(size, 0);
  std::uint8_t* h = buf.data();
  std::memcpy(h, index_magic, 8);
  le::put32(h + h_version, version);
  le::put32(h + h_capacity, capacity);
  std::uint64_t gen = std::random_device{}();
  gen = (gen << 32) ^ static_cast<std::uint64_t>(now_s);
  le::put64(h + h_generation, gen);
  le::put64(h + h_check, header_check(h));
  std::uint64_t total = 0, live = 0;
  for (const auto& s : slots) {
    if (live == fit) break;
    std::uint64_t i = code_hash(s.code) % capacity;
    while (true) {
      std::uint8_t* p = h + index_header_bytes + i * index_slot_bytes;
      if (le::get16(p + s_state) == empty) {
        write_slot(p, live_state, s);
        break;
      }
      i = (i + 1) % capacity;
    }
    total += s.disk_bytes;
    ++live;
  }
  le::put64(h + h_total, total);
  le::put64(h + h_live, live);
  le::put64(h + h_last_clean, static_cast<std::uint64_t>(now_s));
  std::uint64_t tick = 0;
  for (const auto& sl : slots) tick = std::max<std::uint64_t>(tick, sl.tick);
  le::put64(h + h_tick, tick);

  const std::string tmp = path + ".tmp." + std::to_string(f.pid()) + "." + std::to_string(gen & 0xffffff);
  int fd = -1;
  if (int e = f.open(tmp, open_mode::create_new, fd)) return e;
  int e = f.allocate(fd, size);
  if (e == EOPNOTSUPP || e == EINVAL) e = 0;  // the writes below allocate, on such file systems
  if (!e) e = f.pwrite(fd, buf.data(), buf.size(), 0);
  f.close(fd);
  if (!e) e = f.rename(tmp, path);
  if (e) f.unlink(tmp);
  return e;
}

bool index_file::find(const std::array<std::uint8_t, 16>& code, std::uint64_t driver, index_slot* out) const {
  std::uint64_t i = code_hash(code) % capacity_;
  for (std::uint32_t n = 0; n < capacity_; ++n, i = (i + 1) % capacity_) {
    slot_copy c;
    if (!read_slot(base_ + index_header_bytes + i * index_slot_bytes, c)) continue;  // busy/damaged: go on
    if (c.state == empty) return false;
    if (c.state == live_state && c.s.code == code && c.s.driver == driver) {
      if (out) *out = c.s;
      return true;
    }
  }
  return false;
}

std::vector<index_slot> index_file::find_code(const std::array<std::uint8_t, 16>& code) const {
  std::vector<index_slot> found;
  std::uint64_t i = code_hash(code) % capacity_;
  for (std::uint32_t n = 0; n < capacity_; ++n, i = (i + 1) % capacity_) {
    slot_copy c;
    if (!read_slot(base_ + index_header_bytes + i * index_slot_bytes, c)) continue;
    if (c.state == empty) break;
    if (c.state == live_state && c.s.code == code) found.push_back(c.s);
  }
  return found;
}

std::uint32_t index_file::next_tick() {
  return static_cast<std::uint32_t>(add64_relaxed(base_ + h_tick, 1));
}

void index_file::touch(const std::array<std::uint8_t, 16>& code, std::uint64_t driver, std::uint32_t now_s) {
  if (!writable_) return;
  std::uint64_t i = code_hash(code) % capacity_;
  for (std::uint32_t n = 0; n < capacity_; ++n, i = (i + 1) % capacity_) {
    std::uint8_t* p = base_ + index_header_bytes + i * index_slot_bytes;
    slot_copy c;
    if (!read_slot(p, c)) continue;
    if (c.state == empty) return;
    if (c.state == live_state && c.s.code == code && c.s.driver == driver) {
      // Relaxed, without the lock: a lost or torn update only reorders eviction.
      store32_relaxed(p + s_last_use, now_s);
      store32_relaxed(p + s_tick, next_tick());
      return;
    }
  }
}

std::vector<index_slot> index_file::live_slots() const {
  std::vector<index_slot> out;
  for (std::uint32_t i = 0; i < capacity_; ++i) {
    slot_copy c;
    if (read_slot(base_ + index_header_bytes + std::uint64_t(i) * index_slot_bytes, c) && c.state == live_state)
      out.push_back(c.s);
  }
  return out;
}

std::uint64_t index_file::damaged_slots() const {
  std::uint64_t n = 0;
  for (std::uint32_t i = 0; i < capacity_; ++i) {
    slot_copy c;
    if (!read_slot(base_ + index_header_bytes + std::uint64_t(i) * index_slot_bytes, c)) ++n;
  }
  return n;
}

std::uint64_t index_file::total_bytes() const { return load64(base_ + h_total); }
std::uint64_t index_file::live() const { return load64(base_ + h_live); }
std::uint64_t index_file::repair_total() {
  std::uint64_t held = 0;
  for (const auto& s : live_slots()) held += s.disk_bytes;
  const std::uint64_t total = load64(base_ + h_total);
  if (!writable_ || total == held) return total;
  store64(base_ + h_total, held);
  return held;
}
bool index_file::retired() const { return load64(base_ + h_retired) != 0; }
std::int64_t index_file::last_clean_s() const { return static_cast<std::int64_t>(load64(base_ + h_last_clean)); }
void index_file::set_retired() {
  if (writable_) store64(base_ + h_retired, 1);
}
void index_file::set_last_clean(std::int64_t s) {
  if (writable_) store64(base_ + h_last_clean, static_cast<std::uint64_t>(s));
}

bool index_file::insert(const index_slot& s) {
  if (!writable_) return false;
  std::uint64_t i = code_hash(s.code) % capacity_;
  std::uint8_t* reuse = nullptr;
  for (std::uint32_t n = 0; n < capacity_; ++n, i = (i + 1) % capacity_) {
    std::uint8_t* p = base_ + index_header_bytes + i * index_slot_bytes;
    slot_copy c;
    // Under the lock nobody else writes: a slot that does not read back consistently was left by
    // a killed writer (or damaged) and may be reused.
    if (!read_slot(p, c)) {
      if (!reuse) reuse = p;
      continue;
    }
    if (c.state == live_state && c.s.code == s.code && c.s.driver == s.driver) {
      std::uint64_t total = load64(base_ + h_total);
      store64(base_ + h_total, total - c.s.disk_bytes + s.disk_bytes);
      write_slot(p, live_state, s);
      return true;
    }
    if (c.state == tombstone && !reuse) reuse = p;
    if (c.state == empty) {
      if (!reuse) {
        std::uint64_t used = load64(base_ + h_live) + load64(base_ + h_tombstones);
        if (used + 1 > capacity_ * max_fill) return false;
        reuse = p;
      }
      break;
    }
  }
  if (!reuse) return false;
  const std::uint16_t old_state = static_cast<std::uint16_t>(
      load32(reinterpret_cast<const std::uint32_t*>(reuse + s_state), __ATOMIC_RELAXED) & 0xFFFF);
  if (old_state == tombstone) store64(base_ + h_tombstones, load64(base_ + h_tombstones) - 1);
  write_slot(reuse, live_state, s);
  store64(base_ + h_live, load64(base_ + h_live) + 1);
  store64(base_ + h_total, load64(base_ + h_total) + s.disk_bytes);
  return true;
}

std::uint64_t index_file::erase(const std::array<std::uint8_t, 16>& code, std::uint64_t driver) {
  if (!writable_) return 0;
  std::uint64_t i = code_hash(code) % capacity_;
  for (std::uint32_t n = 0; n < capacity_; ++n, i = (i + 1) % capacity_) {
    std::uint8_t* p = base_ + index_header_bytes + i * index_slot_bytes;
    slot_copy c;
    if (!read_slot(p, c)) continue;
    if (c.state == empty) return 0;
    if (c.state == live_state && c.s.code == code && c.s.driver == driver) {
      write_slot(p, tombstone, c.s);
      store64(base_ + h_live, load64(base_ + h_live) - 1);
      store64(base_ + h_tombstones, load64(base_ + h_tombstones) + 1);
      std::uint64_t total = load64(base_ + h_total);
      store64(base_ + h_total, total >= c.s.disk_bytes ? total - c.s.disk_bytes : 0);
      return c.s.disk_bytes;
    }
  }
  return 0;
}

}  // namespace fatpack::detail::cache
