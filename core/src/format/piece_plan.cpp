// Piece plans (see piece_plan.hpp; the layout is docs/format.md §4.2).
#include "format/piece_plan.hpp"

#include "fatpack/core/hex.hpp"
#include "fatpack/core/le_bytes.hpp"

#include <unordered_set>
#include <vector>

namespace fatpack::core::detail {

namespace {

using le::get32;
using le::get64;
using le::put32;
using le::put64;

void add32(std::string& s, std::uint32_t v) {
  std::uint8_t b[4];
  put32(b, v);
  s.append(reinterpret_cast<const char*>(b), 4);
}
void add64(std::string& s, std::uint64_t v) {
  std::uint8_t b[8];
  put64(b, v);
  s.append(reinterpret_cast<const char*>(b), 8);
}

// A cursor that never reads past its end.
struct cursor {
  const std::uint8_t* p;
  std::size_t left;
  bool take(std::size_t n) { return n <= left; }
  std::uint32_t u32() {
    const std::uint32_t v = get32(p);
    p += 4;
    left -= 4;
    return v;
  }
  std::uint64_t u64() {
    const std::uint64_t v = get64(p);
    p += 8;
    left -= 8;
    return v;
  }
};

}  // namespace

std::string encode_piece_plan(const piece_plan& plan) {
  std::string s;
  add32(s, std::uint32_t(plan.pieces.size()));
  add32(s, 0);
  add64(s, plan.header_end);
  for (const auto& p : plan.pieces) {
    add64(s, p.xxh3);
    add64(s, p.size);
    add32(s, std::uint32_t(p.ranges.size()));
    add32(s, std::uint32_t(p.kernels.size()));
    add32(s, std::uint32_t(p.globals.size()));
    add32(s, 0);
    for (const auto& [b, e] : p.ranges) {
      add64(s, b);
      add64(s, e);
    }
    for (std::uint32_t k : p.kernels) add32(s, k);
    for (const auto& g : p.globals) {
      add32(s, std::uint32_t(g.size()));
      s += g;
    }
  }
  return s;
}

std::string decode_piece_plan(std::string_view bytes, std::uint64_t raw_size, const std::vector<std::string_view>& kernel_names,
                              piece_plan& out) {
  const std::size_t kernel_count = kernel_names.size();
  cursor c{reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
  if (!c.take(16)) return "piece plan truncated (" + std::to_string(bytes.size()) + " bytes)";
  const std::uint32_t count = c.u32();
  if (c.u32() != 0) return "piece plan: reserved field is not zero";
  out.header_end = c.u64();
  if (count < 2) return "piece plan holds " + std::to_string(count) + " pieces (at least 2)";
  if (count > kernel_count)
    return "piece plan holds " + std::to_string(count) + " pieces for " + std::to_string(kernel_count) + " kernels";
  if (out.header_end > raw_size) return "piece plan: header end " + std::to_string(out.header_end) + " is past the entry";
  // Each piece takes at least 32 + 16 + 4 bytes: the count is bounded by the plan's size.
  if (std::uint64_t(count) * 52 > c.left) return "piece plan truncated (" + std::to_string(count) + " pieces)";
  std::vector<bool> seen(kernel_count, false);
  std::size_t kernels_seen = 0;
  // Every kernel's and global's name, once in the whole plan: a runtime finds a symbol's piece by
  // name, and a global named like a kernel (or a name twice) would hide one of them. Views into the
  // kernel list and the plan's bytes, which outlive this call; at most one per kernel and one per 5
  // bytes of plan.
  std::unordered_set<std::string_view> names;
  auto twice = [](const std::string& where, std::string_view name) {
    return where + "names '" + printable_text(name, 200) + "' twice (a kernel and a global, or one of them twice)";
  };
  const std::uint64_t budget = 16 * raw_size + (std::uint64_t(1) << 20);
  std::uint64_t total = 0;
  out.pieces.resize(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string where = "piece plan: piece " + std::to_string(i) + ": ";
    piece_plan_piece& p = out.pieces[i];
    if (!c.take(32)) return where + "truncated";
    p.xxh3 = c.u64();
    p.size = c.u64();
    const std::uint32_t ranges = c.u32(), kernels = c.u32(), globals = c.u32();
    if (c.u32() != 0) return where + "reserved field is not zero";
    if (ranges == 0 || kernels == 0) return where + "no ranges or no kernels";
    if (!c.take(std::uint64_t(ranges) * 16 + std::uint64_t(kernels) * 4 + std::uint64_t(globals) * 5))
      return where + "truncated";
    p.ranges.reserve(ranges);
    std::uint64_t from = out.header_end, size = out.header_end + 1;
    for (std::uint32_t r = 0; r < ranges; ++r) {
      const std::uint64_t b = c.u64(), e = c.u64();
      if (b < from || e < b || e > raw_size)
        return where + "range " + std::to_string(r) + " [" + std::to_string(b) + ", " + std::to_string(e) +
               ") is not inside the entry after the header and the previous range";
      from = e;
      size += e - b + 2;  // bounded: ranges do not overlap, so the sum is at most raw_size + 2 per range
      p.ranges.emplace_back(b, e);
    }
    if (size != p.size) return where + "size " + std::to_string(p.size) + " is not what its ranges make (" + std::to_string(size) + ")";
    total += size;
    if (total > budget) return where + "the pieces hold more than 16 times the entry";
    p.kernels.reserve(kernels);
    for (std::uint32_t k = 0; k < kernels; ++k) {
      const std::uint32_t index = c.u32();
      if (index >= kernel_count || seen[index])
        return where + "kernel index " + std::to_string(index) + " is out of range or in two pieces";
      seen[index] = true;
      ++kernels_seen;
      if (!names.insert(kernel_names[index]).second) return twice(where, kernel_names[index]);
      p.kernels.push_back(index);
    }
    for (std::uint32_t g = 0; g < globals; ++g) {
      if (!c.take(4)) return where + "truncated";
      const std::uint32_t n = c.u32();
      if (n == 0 || n > max_plan_global || !c.take(n)) return where + "global " + std::to_string(g) + " has a bad length";
      const std::string_view name(reinterpret_cast<const char*>(c.p), n);
      if (name.find('\0') != std::string_view::npos) return where + "global " + std::to_string(g) + " holds a NUL";
      if (!names.insert(name).second) return twice(where, name);
      c.p += n;
      c.left -= n;
      p.globals.emplace_back(name);
    }
  }
  if (kernels_seen != kernel_count)
    return "piece plan places " + std::to_string(kernels_seen) + " of the entry's " + std::to_string(kernel_count) + " kernels";
  if (c.left != 0) return "piece plan: " + std::to_string(c.left) + " bytes after the last piece";
  return {};
}

}  // namespace fatpack::core::detail
