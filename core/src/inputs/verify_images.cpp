// What `fatpack verify` checks in a parsed package (see input.hpp): the format's own checks (every
// entry decompressed, its checksums checked), then what only the image format can tell: that no SASS
// entry is a relocatable cubin, and that every piece of a PTX entry's piece plan is made from the
// entry's PTX as the plan declares.
#include "fatpack/core/input.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/package.hpp"
#include "fatpack/core/ptx_split.hpp"

namespace fatpack::core {

namespace {

// Every piece of entry i's plan rebuilt from its raw PTX, against the size and XXH3 the plan says.
// The package reader checked the plan's structure; only its hashes need the decompressed entry.
status check_plan_pieces(const package_view& pkg, std::size_t i, const std::vector<std::uint8_t>& raw) {
  const entry_info& e = pkg.entries()[i];
  const std::string_view text(reinterpret_cast<const char*>(raw.data()), raw.size());
  const std::size_t count = e.plan.pieces.size();
  for (std::size_t p = 0; p < count; ++p) {
    const plan_piece_text made = rebuild_plan_piece(text, e.plan, p);
    if (made.matches) continue;
    const piece_plan_piece& declared = e.plan.pieces[p];
    return make_error(errc::checksum, std::string(pkg.source()) + ": package '" + printable_text(pkg.name(), 200) +
                                          "': " + e.describe() + ": piece plan: piece " + std::to_string(p) + " (of " +
                                          std::to_string(count) + ") does not match the entry's PTX (rebuilt: " +
                                          std::to_string(made.text.size()) + " bytes, XXH3 " + hex16(made.xxh3) +
                                          "; the plan says " + std::to_string(declared.size) + " bytes, XXH3 " +
                                          hex16(declared.xxh3) + ")");
  }
  return {};
}

}  // namespace

status verify_package_images(const package_view& pkg) {
  // One pass, each entry decompressed once: what package_view::verify does, plus the checks that
  // need the decompressed bytes.
  for (std::size_t i = 0; i < pkg.entries().size(); ++i) {
    const entry_info& e = pkg.entries()[i];
    auto raw = pkg.decompress(i);
    if (!raw) return raw.error();
    if (e.target.kind == entry_kind::sass) {
      if (auto st = refuse_relocatable_cubin(byte_span(*raw), std::string(pkg.source()) + ": " + e.describe()); !st)
        return st;
    } else if (!e.plan.empty()) {
      if (auto st = check_plan_pieces(pkg, i, *raw); !st) return st;
    }
  }
  return {};
}

}  // namespace fatpack::core
