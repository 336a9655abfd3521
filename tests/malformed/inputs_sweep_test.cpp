// nvcc's files damaged: cubins (parse_cubin), PTX headers (parse_ptx) and nvcc fatbins
// (import_fatbin), real nvcc/fatbinary output. These formats carry no checksum, so a flipped code
// byte is still a valid file; what must hold: nothing crashes or throws, damage to the structure the
// reader relies on is refused (ELF identification and machine, fatbin magic), and a file cut short
// is refused (a fatbin: except exactly at a container boundary, where a valid shorter file is left).
#include "sweep.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/core/le_bytes.hpp"

#include <set>

using namespace fatpack;
using namespace sweep;

namespace {

const std::vector<std::string> cubins = {"vadd.sm_75.cubin", "vadd.sm_90.cubin", "vadd.sm_90a.cubin", "vadd.sm_100f.cubin",
                                         "inputs/vadd.sm_120a.cubin", "inputs/devfuncs.rdc.sm_90.cubin"};
const std::vector<std::string> ptxs = {"vadd.compute_80.ptx", "vadd.compute_90.ptx", "inputs/vadd.compute_90a.ptx",
                                       "inputs/vadd.compute_120f.ptx", "inputs/devfuncs.compute_90.ptx"};
const std::vector<std::string> fatbins = {"vadd.fatbin", "vadd.compressed.fatbin", "inputs/vadd.lz4.fatbin",
                                          "inputs/vadd.lz4frame.fatbin",
                                          "inputs/vadd.variants.fatbin"};

template <class F>
bool accepted(F&& parse, const bytes& b, const std::string& what) {
  try {
    return static_cast<bool>(parse(core::byte_span(b)));
  } catch (const std::exception& e) {
    FAIL_CHECK(what << ": threw " << e.what());  // core never throws on bad input
    return false;
  }
}

// ELF identification bytes and e_machine: a cubin reader must refuse them damaged.
bool elf_structural(std::size_t byte) { return byte < 6 || byte == 18 || byte == 19; }

// End offsets of the containers of an nvcc fatbin (magic u32, version u16, header size u16, size u64).
std::set<std::size_t> container_ends(const bytes& b) {
  std::set<std::size_t> ends;
  std::size_t at = 0;
  while (at + 16 <= b.size() && core::le::get32(&b[at]) == 0xBA55ED50u) {
    at += core::le::get16(&b[at + 6]) + std::size_t(core::le::get64(&b[at + 8]));
    ends.insert(at);
  }
  return ends;
}

}  // namespace

TEST_CASE("cubins: bit flips and truncations") {
  counts flips{"cubins: bit flips through parse_cubin"}, cuts{"cubins: truncations through parse_cubin"};
  auto parse = [](core::byte_span s) { return core::parse_cubin(s, "sweep.cubin"); };
  for (const auto& f : cubins) {
    CAPTURE(f);
    const bytes b = read_file(artifact(f));
    REQUIRE(accepted(parse, b, f));
    for_each_flip(b.size(), 64, [&](std::size_t bit) {
      ++flips.cases;
      const bool ok = accepted(parse, flipped(b, bit), f);
      (ok ? flips.accepted : flips.rejected)++;
      if (ok && elf_structural(bit / 8)) FAIL_CHECK(f << ": bit " << bit << " of the ELF identification/machine flipped, accepted");
      if (ok && !elf_structural(bit / 8)) ++flips.accepted_expected;  // no checksum in a cubin
    });
    for_each_cut(b.size(), 256, [&](std::size_t len) {
      ++cuts.cases;
      const bool ok = accepted(parse, bytes(b.begin(), b.begin() + long(len)), f);
      (ok ? cuts.accepted : cuts.rejected)++;
      if (ok) FAIL_CHECK(f << ": cut at " << len << " of " << b.size() << ", accepted");
    });
  }
}

TEST_CASE("PTX headers: bit flips and truncations") {
  counts flips{"PTX: bit flips through parse_ptx"}, cuts{"PTX: truncations through parse_ptx"};
  auto parse = [](core::byte_span s) { return core::parse_ptx(s, "sweep.ptx"); };
  for (const auto& f : ptxs) {
    CAPTURE(f);
    const bytes b = read_file(artifact(f));
    REQUIRE(accepted(parse, b, f));
    const std::string text(b.begin(), b.end());
    const std::size_t target = text.find(".target");
    REQUIRE(target != std::string::npos);
    // Every bit up to the end of the .target line (the header the parser reads); the body sampled.
    const std::size_t header_end = text.find('\n', target);
    for_each_flip(b.size(), header_end, [&](std::size_t bit) {
      ++flips.cases;
      const bool ok = accepted(parse, flipped(b, bit), f);
      (ok ? flips.accepted : flips.rejected)++;
      if (ok) ++flips.accepted_expected;  // a changed name or digit can still be valid PTX
    });
    for_each_cut(b.size(), header_end + 64, [&](std::size_t len) {
      ++cuts.cases;
      const bool ok = accepted(parse, bytes(b.begin(), b.begin() + long(len)), f);
      (ok ? cuts.accepted : cuts.rejected)++;
      // Cut before the .target directive, there is no target: the header is incomplete.
      if (ok && len <= target) FAIL_CHECK(f << ": cut at " << len << " (before .target), accepted");
      if (ok && len > target) ++cuts.accepted_expected;
    });
  }
}

TEST_CASE("nvcc fatbins: bit flips and truncations") {
  counts flips{"fatbins: bit flips through import_fatbin"}, cuts{"fatbins: truncations through import_fatbin"};
  auto parse = [](core::byte_span s) { return core::import_fatbin(s, "sweep.fatbin"); };
  for (const auto& f : fatbins) {
    CAPTURE(f);
    const bytes b = read_file(artifact(f));
    REQUIRE(accepted(parse, b, f));
    const auto ends = container_ends(b);
    REQUIRE(!ends.empty());
    for_each_flip(b.size(), 256, [&](std::size_t bit) {
      ++flips.cases;
      const bool ok = accepted(parse, flipped(b, bit), f);
      (ok ? flips.accepted : flips.rejected)++;
      if (ok && bit / 8 < 4) FAIL_CHECK(f << ": bit " << bit << " of the fatbin magic flipped, accepted");
      if (ok && bit / 8 >= 4) ++flips.accepted_expected;
    });
    for_each_cut(b.size(), 256, [&](std::size_t len) {
      ++cuts.cases;
      const bool ok = accepted(parse, bytes(b.begin(), b.begin() + long(len)), f);
      (ok ? cuts.accepted : cuts.rejected)++;
      if (ok && ends.count(len)) ++cuts.accepted_expected;
      if (ok && !ends.count(len)) FAIL_CHECK(f << ": cut at " << len << " of " << b.size() << ", accepted");
    });
  }
}
