// Packages through the verify path (core::for_each_package + package_view::verify, what `fatpack
// verify` runs): three packages back to back (lz4, zstd, none; real nvcc output). Every byte of a
// package is covered by a checksum or the zero-padding check (docs/format.md §2), so every bit flip
// and every payload smear must be refused, and every truncation too, except a cut exactly at a
// package boundary (what is left is a valid shorter file).
#include "packages.hpp"

#include "fatpack/core/package.hpp"

#include <set>

using namespace fatpack;
using namespace sweep;

namespace {

bool verifies(const bytes& b) {
  return static_cast<bool>(
      core::for_each_package(core::byte_span(b), "sweep.fpk", [](core::package_view&& pv) { return pv.verify(); }));
}

struct concat {
  bytes all;
  std::set<std::size_t> boundaries;  // end offsets of the packages
  std::vector<std::size_t> starts;
};

const concat& packages() {
  static const concat c = [] {
    concat c;
    for (auto [name, codec] : {std::pair{"sweep_lz4", core::codec::lz4}, {"sweep_zstd", core::codec::zstd}}) {
      c.starts.push_back(c.all.size());
      const bytes p = package_of(name, all_vadd(), codec);
      c.all.insert(c.all.end(), p.begin(), p.end());
      c.boundaries.insert(c.all.size());
    }
    c.starts.push_back(c.all.size());
    const bytes p = package_of("sweep_none", {"vadd.sm_75.cubin", "vadd.sm_90.cubin", "vadd.compute_90.ptx"}, core::codec::none);
    c.all.insert(c.all.end(), p.begin(), p.end());
    c.boundaries.insert(c.all.size());
    return c;
  }();
  return c;
}

}  // namespace

TEST_CASE("packages: the undamaged file verifies, and so does it with a zero tail") {
  const auto& c = packages();
  REQUIRE(verifies(c.all));
  bytes padded = c.all;
  padded.resize(padded.size() + 64, 0);
  CHECK(verifies(padded));
  MESSAGE("sweep file: " << c.all.size() << " bytes, " << c.starts.size() << " packages");
}

TEST_CASE("packages: every header and table bit flipped, payload bits sampled (all in the full run)") {
  const auto& c = packages();
  counts n{"packages: bit flips through verify"};
  for (std::size_t bit = 0; bit < c.all.size() * 8; ++bit) {
    const std::size_t byte = bit / 8;
    // In CI: every bit of each package's header, entry table and string table (its first 2 KiB),
    // every 61st bit of the payloads.
    bool dense = false;
    for (auto s : c.starts) dense = dense || (byte >= s && byte < s + 2048);
    if (!full() && !dense && bit % 61 != 0) continue;
    must_refuse(n, verifies(flipped(c.all, bit)), [&] { return doctest::String("bit ") + std::to_string(bit).c_str() + " flipped"; });
  }
  CHECK(n.cases > 0);
}

TEST_CASE("packages: payload damage (runs of random bytes) is refused") {
  const auto& c = packages();
  counts n{"packages: payload smears through verify"};
  rng r(1);
  const int runs = full() ? 20000 : 1000;
  for (int i = 0; i < runs; ++i) {
    const std::size_t k = r.below(c.starts.size());
    // Payloads start after the tables; 2 KiB in is past them for these packages.
    const std::size_t from = c.starts[k] + 2048, to = k + 1 < c.starts.size() ? c.starts[k + 1] : c.all.size();
    if (from >= to) continue;
    must_refuse(n, verifies(smeared(c.all, from, to, r)), [&] { return doctest::String("smear ") + std::to_string(i).c_str(); });
  }
  CHECK(n.cases > 0);
}

TEST_CASE("packages: truncation at every length is refused, except at a package boundary") {
  const auto& c = packages();
  counts n{"packages: truncations through verify"};
  auto cut_at = [&](std::size_t len) {
    ++n.cases;
    const bytes cut(c.all.begin(), c.all.begin() + long(len));
    const bool ok = verifies(cut);
    const bool boundary = c.boundaries.count(len) != 0;
    if (ok) ++n.accepted; else ++n.rejected;
    if (ok && boundary) ++n.accepted_expected;
    if (ok != boundary) FAIL_CHECK("cut at " << len << ": " << (ok ? "accepted" : "refused a valid shorter file"));
  };
  for_each_cut(c.all.size(), 2048, cut_at);
  // The package boundaries (valid shorter files) are always among the cuts.
  for (auto b : c.boundaries)
    if (b < c.all.size() && !cut_selected(c.all.size(), 2048, b)) cut_at(b);
  CHECK(n.accepted_expected == c.boundaries.size() - 1);  // every boundary but the whole file
}
