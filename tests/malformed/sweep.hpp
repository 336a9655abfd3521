// Helpers of the malformed-input sweeps: which bits and lengths to try (all of them in the full run,
// FATPACK_FULL=1; a fixed subset in CI), reading the test inputs, and the counts each sweep prints.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace sweep {

using bytes = std::vector<std::uint8_t>;

inline bool full() {
  const char* v = std::getenv("FATPACK_FULL");
  return v && std::strcmp(v, "1") == 0;
}

inline bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  return bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
inline std::string artifact(const std::string& name) { return std::string(FATPACK_TEST_ARTIFACTS) + "/" + name; }

// Bits to flip in a file of `size` bytes: every bit in the full run. In CI every bit of the first
// `dense` bytes (headers and tables, where most of the parsing is) and of the last 64, and every
// `stride`-th bit elsewhere (a prime, so that every bit position within a byte is hit).
inline void for_each_flip(std::size_t size, std::size_t dense, const std::function<void(std::size_t bit)>& fn,
                          std::size_t stride = 61) {
  const std::uint64_t bits = std::uint64_t(size) * 8;
  for (std::uint64_t b = 0; b < bits; ++b) {
    const std::size_t byte = std::size_t(b / 8);
    if (full() || byte < dense || byte + 64 >= size || b % stride == 0) fn(std::size_t(b));
  }
}

// Lengths to cut a file to (0 .. size-1): every one in the full run; in CI every one below `dense`,
// the last 64, and every `stride`-th one between.
inline bool cut_selected(std::size_t size, std::size_t dense, std::size_t n, std::size_t stride = 13) {
  return full() || n < dense || n + 64 >= size || n % stride == 0;
}
inline void for_each_cut(std::size_t size, std::size_t dense, const std::function<void(std::size_t len)>& fn,
                         std::size_t stride = 13) {
  for (std::size_t n = 0; n < size; ++n)
    if (cut_selected(size, dense, n, stride)) fn(n);
}

inline bytes flipped(const bytes& b, std::size_t bit) {
  bytes c(b);
  c[bit / 8] ^= std::uint8_t(1u << (bit % 8));
  return c;
}

// A deterministic generator for payload damage (runs of random bytes), so a failure repeats.
struct rng {
  std::uint64_t s;
  explicit rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  std::size_t below(std::size_t n) { return n ? std::size_t(next() % n) : 0; }
};

// Overwrites a run of 1..32 bytes at a random offset in [from, to) with random bytes (that differ
// from the original in at least one byte).
inline bytes smeared(const bytes& b, std::size_t from, std::size_t to, rng& r) {
  bytes c(b);
  const std::size_t at = from + r.below(to - from);
  const std::size_t len = std::min<std::size_t>(1 + r.below(32), c.size() - at);
  for (std::size_t i = 0; i < len; ++i) c[at + i] = std::uint8_t(r.next());
  if (std::equal(c.begin() + long(at), c.begin() + long(at + len), b.begin() + long(at))) c[at] ^= 0xFF;
  return c;
}

// What one sweep did; printed as one line, and the run's figures come from these lines.
struct counts {
  std::string what;
  std::uint64_t cases = 0, rejected = 0, accepted = 0, accepted_expected = 0;
  ~counts() {
    std::printf("%-58s %s: %llu cases, %llu rejected, %llu accepted (%llu of them expected)\n", what.c_str(),
                full() ? "full" : "ci", static_cast<unsigned long long>(cases), static_cast<unsigned long long>(rejected),
                static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(accepted_expected));
    std::fflush(stdout);
  }
};

// One case that must be refused: counted, and a failure (named by `what`) when it was accepted.
template <class What>
void must_refuse(counts& n, bool accepted, What&& what) {
  ++n.cases;
  if (accepted) {
    ++n.accepted;
    FAIL_CHECK(what() << ": accepted");
  } else {
    ++n.rejected;
  }
}

}  // namespace sweep
