// The mapped index (index.hpp).
#include "cache/index.hpp"

#include "cache/fs.hpp"

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <xxhash.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <random>

namespace fatpack::detail::cache {

namespace bip = boost::interprocess;

namespace {

constexpr char magic[8] = {'F', 'P', 'K', 'I', 'N', 'D', 'X', '1'};
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

std::uint64_t load64(const std::uint8_t* p) { return __atomic_load_n(reinterpret_cast<const std::uint64_t*>(p), __ATOMIC_ACQUIRE); }
void store64(std::uint8_t* p, std::uint64_t v) { __atomic_store_n(reinterpret_cast<std::uint64_t*>(p), v, __ATOMIC_RELEASE); }

std::uint64_t header_check(const std::uint8_t* h) { return XXH3_64bits(h, h_check); }
// 32 bits of XXH3 over the fields that decide a slot's meaning (the index is advisory: a damaged
// slot accepted by chance costs accounting, never correctness).
std::uint32_t slot_check(const std::uint8_t* s) { return static_cast<std::uint32_t>(XXH3_64bits(s + s_state, s_last_use - s_state)); }

std::uint64_t code_hash(const std::array<std::uint8_t, 16>& code) {
  std::uint64_t v;
  std::memcpy(&v, code.data(), 8);
  return v;
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
    std::uint32_t seq1 = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);
    if (seq1 & 1) continue;
    std::uint32_t copy[slot_words];
    for (std::size_t i = 1; i < slot_words; ++i) copy[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&w[0], __ATOMIC_RELAXED) != seq1) continue;
    const auto* c = reinterpret_cast<const std::uint8_t*>(copy);
    std::uint16_t state;
    std::memcpy(&state, c + s_state, 2);
    if (state == empty) {
      out.state = empty;
      return true;
    }
    std::uint32_t check;
    std::memcpy(&check, c + s_check, 4);
    if (check != slot_check(c)) return false;
    out.state = state;
    std::memcpy(out.s.code.data(), c + s_code, 16);
    std::memcpy(&out.s.driver, c + s_driver, 8);
    std::memcpy(&out.s.disk_bytes, c + s_bytes, 4);
    std::memcpy(&out.s.last_use_s, c + s_last_use, 4);
    std::memcpy(&out.s.tick, c + s_tick, 4);
    return true;
  }
  return false;
}

// The seqlock's writer side (the caller holds the index lock, or owns the buffer).
void write_slot(std::uint8_t* p, std::uint16_t state, const index_slot& s) {
  std::uint32_t img[slot_words] = {};
  auto* c = reinterpret_cast<std::uint8_t*>(img);
  std::memcpy(c + s_state, &state, 2);
  std::memcpy(c + s_code, s.code.data(), 16);
  std::memcpy(c + s_driver, &s.driver, 8);
  std::memcpy(c + s_bytes, &s.disk_bytes, 4);
  std::memcpy(c + s_last_use, &s.last_use_s, 4);
  std::memcpy(c + s_tick, &s.tick, 4);
  const std::uint32_t check = slot_check(c);
  std::memcpy(c + s_check, &check, 4);
  auto* w = reinterpret_cast<std::uint32_t*>(p);
  const std::uint32_t seq = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
  __atomic_store_n(&w[0], seq | 1u, __ATOMIC_RELAXED);  // odd: being written (already odd if a writer was killed here)
  __atomic_thread_fence(__ATOMIC_RELEASE);
  for (std::size_t i = 1; i < slot_words; ++i) __atomic_store_n(&w[i], img[i], __ATOMIC_RELAXED);
  __atomic_store_n(&w[0], (seq | 1u) + 1u, __ATOMIC_RELEASE);  // even again, and different from before
}

}  // namespace

struct index_file::impl {
  bip::mapped_region region;
};

index_file::~index_file() = default;

std::unique_ptr<index_file> index_file::map(const std::string& path, bool writable, std::string& why) {
  file_stat st;
  if (int e = current_fs().stat(path, st)) {
    why = path + ": " + errno_text(e);
    return nullptr;
  }
  if (!st.regular || st.size < index_header_bytes) {
    why = path + ": not an index file (" + std::to_string(st.size) + " bytes)";
    return nullptr;
  }
  std::unique_ptr<index_file> f(new index_file());
  f->impl_.reset(new impl());
  try {
    // The file_mapping (and its descriptor) is closed right away; the region keeps the mapping.
    bip::file_mapping fm(path.c_str(), writable ? bip::read_write : bip::read_only);
    f->impl_->region = bip::mapped_region(fm, writable ? bip::read_write : bip::read_only);
  } catch (const std::exception& e) {
    why = path + ": cannot map: " + e.what();
    return nullptr;
  }
  f->base_ = static_cast<std::uint8_t*>(f->impl_->region.get_address());
  f->size_ = f->impl_->region.get_size();
  f->writable_ = writable;
  f->inode_ = st.inode;
  const std::uint8_t* h = f->base_;
  std::uint32_t v, cap;
  std::memcpy(&v, h + h_version, 4);
  std::memcpy(&cap, h + h_capacity, 4);
  if (std::memcmp(h, magic, 8) != 0 || v != version) {
    why = path + ": bad magic or version";
    return nullptr;
  }
  if (header_check(h) != load64(h + h_check)) {
    why = path + ": header checksum mismatch";
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
  while (slots.size() >= capacity * max_fill) capacity *= 2;
  const std::uint64_t size = index_header_bytes + std::uint64_t(capacity) * index_slot_bytes;
  std::vector<std::uint8_t> buf(size, 0);
  std::uint8_t* h = buf.data();
  std::memcpy(h, magic, 8);
  std::memcpy(h + h_version, &version, 4);
  std::memcpy(h + h_capacity, &capacity, 4);
  std::uint64_t gen = std::random_device{}();
  gen = (gen << 32) ^ static_cast<std::uint64_t>(now_s);
  std::memcpy(h + h_generation, &gen, 8);
  std::uint64_t check = header_check(h);
  std::memcpy(h + h_check, &check, 8);
  std::uint64_t total = 0, live = 0;
  for (const auto& s : slots) {
    std::uint64_t i = code_hash(s.code) % capacity;
    while (true) {
      std::uint8_t* p = h + index_header_bytes + i * index_slot_bytes;
      std::uint16_t state;
      std::memcpy(&state, p + s_state, 2);
      if (state == empty) {
        write_slot(p, live_state, s);
        break;
      }
      i = (i + 1) % capacity;
    }
    total += s.disk_bytes;
    ++live;
  }
  std::memcpy(h + h_total, &total, 8);
  std::memcpy(h + h_live, &live, 8);
  std::memcpy(h + h_last_clean, &now_s, 8);
  std::uint64_t tick = 0;
  for (const auto& sl : slots) tick = std::max<std::uint64_t>(tick, sl.tick);
  std::memcpy(h + h_tick, &tick, 8);

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
  return static_cast<std::uint32_t>(__atomic_add_fetch(reinterpret_cast<std::uint64_t*>(base_ + h_tick), 1, __ATOMIC_RELAXED));
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
      __atomic_store_n(reinterpret_cast<std::uint32_t*>(p + s_last_use), now_s, __ATOMIC_RELAXED);
      __atomic_store_n(reinterpret_cast<std::uint32_t*>(p + s_tick), next_tick(), __ATOMIC_RELAXED);
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
      __atomic_load_n(reinterpret_cast<const std::uint32_t*>(reuse + s_state), __ATOMIC_RELAXED) & 0xFFFF);
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
