// Who holds a per-key single-flight lock (docs/cache.md §4). OFD locks report no owner pid, so a
// waiter cannot tell a holder that is compiling from one that is stopped (SIGSTOP, a debugger) or
// frozen, and would wait the whole lock bound (FATPACK_CACHE_LOCK_WAIT_MS, 120 s) for it. The holder
// therefore publishes a small record — pid, host, process start time, a heartbeat counter — that
// waiters read about once a second and use to stop waiting early.
//
// Storage is bounded: one table file next to the lock file (inflight.lock -> inflight.holders) of
// holder_slots fixed 64-byte slots, slot = lock offset mod holder_slots, written with pwrite (sparse:
// at most holder_slots * 64 bytes, 16 KiB, whatever the number of compiles). Each record carries
// its full lock offset, so a waiter ignores a slot that a colliding key's holder wrote.
//
// The record is advisory: the kernel's byte lock stays the only truth about who holds a key, and
// nothing lock-like lives in the file. Everything here is best effort: a record that cannot be
// written or read is "no information", and the waiter waits the full bound as before. The table is
// hostile input to a reader: bounded reads, strict parsing, a checksum; garbage is no information.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace fatpack::detail::cache {

class fs;
struct holder_entry;
struct holder_registry;

inline constexpr std::uint64_t holder_slots = 256;
inline constexpr std::size_t holder_record_size = 64;
// How long a waiter lets a holder's heartbeat stand still before it stops waiting
// (FATPACK_CACHE_HOLDER_STALL_S; docs/cache.md §9). The holder ticks about once a second.
inline constexpr int default_holder_stall_s = 10;
inline constexpr int min_holder_stall_s = 2, max_holder_stall_s = 3600;

// inflight.lock -> inflight.holders (any other name: "<name>.holders").
std::string holders_path(const std::string& lock_file);

// The record of one held key lock, for as long as this object lives: written at creation, its
// heartbeat bumped about once a second by this process's one ticker thread (started when the first
// record of the process appears; a forked child gets its own), zeroed at destruction — which the
// key lock does before it unlocks.
class holder_record {
 public:
  // nullptr when the record could not be written (waiters then wait the full bound, as before).
  static std::unique_ptr<holder_record> publish(const std::string& lock_file, std::uint64_t offset);
  ~holder_record();
  holder_record(const holder_record&) = delete;
  holder_record& operator=(const holder_record&) = delete;

 private:
  holder_record() = default;
  holder_registry* reg_ = nullptr;  // this process's (leaked: its ticker may outlive everything else)
  std::unique_ptr<holder_entry> e_;
};

// A waiter's view of the holder of `offset`. check() reads its slot (call it about once a second):
// "" means keep waiting; otherwise why not to ("pid 1234 on host-a is stopped"):
//  - the holder is on this host (same host name) and its process (pid and start time match) is
//    stopped (state T/t): at once;
//  - on this host, its process is gone (no such pid, or another process has it) or a zombie, and its
//    heartbeat has not moved for 3 s (a holder in another PID namespace that shares the host name
//    still ticks, so it is not taken for gone);
//  - any host: the heartbeat has not moved for `stall_s` seconds of this waiter's steady clock
//    (no clocks are compared, so skew between hosts does not matter).
class holder_watch {
 public:
  holder_watch(const std::string& lock_file, std::uint64_t offset, int stall_s);
  ~holder_watch();
  holder_watch(const holder_watch&) = delete;
  holder_watch& operator=(const holder_watch&) = delete;
  std::string check(std::chrono::steady_clock::time_point now);

 private:
  fs& f_;
  std::string path_;
  std::uint64_t offset_;
  int stall_s_;
  int fd_ = -1;
  bool seen_ = false;               // a record of this offset was read last time
  std::uint32_t pid_ = 0;
  std::uint64_t start_ = 0, host_hash_ = 0, beat_ = 0;
  std::chrono::steady_clock::time_point moved_;  // when the identity or the heartbeat last changed
};

}  // namespace fatpack::detail::cache
