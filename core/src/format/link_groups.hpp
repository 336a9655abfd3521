// Link groups (docs/format.md §4.1): the rule both the reader and the writer apply, so the writer
// cannot produce a package the reader refuses. Internal to core/src/format.
#pragma once

#include "fatpack/core/target.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::core::detail {

struct link_member {
  std::uint16_t part = 0, parts = 0;  // parts 0: a standalone entry
  core::target target;
  core::ptx_isa isa;
  std::string_view module, options;
};

// The first entry that breaks the rule and why (an empty `why` when every group is well formed):
// a group of n >= 2 entries is n consecutive entries with parts == n and part 0..n-1 in order, of one
// module, target, PTX ISA and option string (so one kind), of kind PTX or LTO-IR; a standalone entry
// has part == parts == 0.
struct link_problem {
  std::size_t entry = 0;
  std::string why;
};

inline link_problem check_link_groups(const std::vector<link_member>& m) {
  for (std::size_t i = 0; i < m.size();) {
    const link_member& first = m[i];
    if (first.parts == 0) {
      if (first.part != 0) return {i, "link_part " + std::to_string(first.part) + " but link_parts 0"};
      ++i;
      continue;
    }
    if (first.parts == 1) return {i, "link_parts 1 (a group has at least two parts)"};
    if (first.part != 0)
      return {i, "link_part " + std::to_string(first.part) + " of " + std::to_string(first.parts) +
                     " does not follow part " + std::to_string(first.part - 1) + " of its group"};
    if (first.target.kind == entry_kind::sass) return {i, "a link group holds PTX or LTO-IR entries, not SASS"};
    if (m.size() - i < first.parts)
      return {i, "link group of " + std::to_string(first.parts) + " parts runs past the last entry"};
    for (std::uint16_t k = 1; k < first.parts; ++k) {
      const link_member& e = m[i + k];
      if (e.parts != first.parts || e.part != k)
        return {i + k, "expected part " + std::to_string(k) + " of the link group of " + std::to_string(first.parts) +
                           " that starts at entry " + std::to_string(i) + ", found link_part " + std::to_string(e.part) +
                           " of " + std::to_string(e.parts)};
      if (e.module != first.module || !(e.target == first.target) || !(e.isa == first.isa) ||
          e.options != first.options)
        return {i + k, "part " + std::to_string(k) + " differs from part 0 (entry " + std::to_string(i) +
                           ") in module, target, PTX ISA or options"};
    }
    i += first.parts;
  }
  return {};
}

}  // namespace fatpack::core::detail
