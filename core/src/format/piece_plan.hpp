// The piece plan's bytes (docs/format.md §4.2): written by package_writer, read (and checked
// completely) by package_reader. Every count is bounded by the bytes it claims, so a forged plan
// cannot make a reader allocate more than the plan's own size allows.
#pragma once

#include "fatpack/core/package.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::core::detail {

// The plan as stored. Its globals must be 1..max_plan_global bytes without NUL (the writer checks).
std::string encode_piece_plan(const piece_plan& plan);

inline constexpr std::size_t max_plan_global = 4096;

// Reads and checks a plan of an entry of `raw_size` bytes whose kernel list is `kernels`: every range
// inside the entry after the header, in order; each piece's size the sum its ranges make; every
// kernel in exactly one piece; every name (a kernel's, a global's) once in the whole plan, so a
// lookup by name finds one piece; the pieces together at most 16 times the entry plus 1 MiB (the
// splitter's own bound). Returns "" and fills `out`, or what is wrong.
std::string decode_piece_plan(std::string_view bytes, std::uint64_t raw_size, const std::vector<std::string_view>& kernels,
                              piece_plan& out);

}  // namespace fatpack::core::detail
