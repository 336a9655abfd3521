// The selection rules (docs/design.md §2, docs/selection.md): a table of (GPU, driver, policy, package)
// -> expected choice and fallback order, the reason strings users read, an independent oracle
// checked against every target x every device, and the data behind them (targets, families, the
// PTX ISA <-> CUDA table).
#include "fatpack/core/arch_table.hpp"
#include "fatpack/core/error.hpp"
#include "fatpack/core/select.hpp"
#include "fatpack/core/target.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace fatpack::core;
using fatpack::policy;

namespace {

// Entries are spelled as in nvcc plus, for PTX, "@ISA": "sm_90a", "compute_90@8.4". A PTX without
// "@" gets ISA 9.0 (what nvcc 13.0 writes).
entry_desc entry(const std::string& spec) {
  const auto at = spec.find('@');
  auto t = target::parse(spec.substr(0, at));
  REQUIRE_MESSAGE(t.has_value(), "bad target in test table: " << spec);
  entry_desc e{*t, {}};
  if (t->kind == entry_kind::ptx) {
    e.ptx_isa = {9, 0};
    if (at != std::string::npos) {
      unsigned maj = 0, min = 0;
      REQUIRE(std::sscanf(spec.c_str() + at + 1, "%u.%u", &maj, &min) == 2);
      e.ptx_isa = {std::uint16_t(maj), std::uint16_t(min)};
    }
  }
  return e;
}

std::vector<entry_desc> package(const std::vector<std::string>& specs) {
  std::vector<entry_desc> out;
  for (const auto& s : specs) out.push_back(entry(s));
  return out;
}

std::string cc_text(std::uint32_t arch) { return std::to_string(arch / 10) + "." + std::to_string(arch % 10); }

// Structural promises every selection keeps, whatever the input: every entry exactly once; usable
// ones first (the first is `chosen` and equals `chosen`), then rejected ones in entry order;
// `nothing_fits` set exactly when nothing is chosen; every reason non-empty.
void check_shape(const selection& s, std::size_t n_entries) {
  REQUIRE(s.candidates.size() == n_entries);
  std::set<std::size_t> seen;
  bool in_rejected = false;
  std::size_t last_rejected = 0;
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const candidate& c = s.candidates[i];
    CHECK(c.entry < n_entries);
    CHECK(seen.insert(c.entry).second);
    CHECK_FALSE(c.reason.empty());
    if (i == 0 && c.verdict != verdict::rejected) {
      CHECK(c.verdict == verdict::chosen);
      REQUIRE(s.chosen.has_value());
      CHECK(*s.chosen == c.entry);
    } else if (i > 0) {
      CHECK(c.verdict != verdict::chosen);
    }
    if (c.verdict == verdict::rejected) {
      if (in_rejected) CHECK(c.entry > last_rejected);
      in_rejected = true;
      last_rejected = c.entry;
    } else {
      CHECK_FALSE(in_rejected);  // no usable entry after a rejected one
    }
  }
  if (n_entries == 0 || s.candidates.front().verdict == verdict::rejected) {
    CHECK_FALSE(s.chosen.has_value());
    CHECK_FALSE(s.nothing_fits.empty());
  } else {
    CHECK(s.nothing_fits.empty());
  }
}

std::vector<std::string> usable_order(const selection& s, const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  for (const auto& c : s.candidates)
    if (c.verdict != verdict::rejected) out.push_back(specs[c.entry]);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return "[" + s + "]";
}

const candidate& verdict_of(const selection& s, std::size_t entry) {
  for (const auto& c : s.candidates)
    if (c.entry == entry) return c;
  FAIL("entry " << entry << " missing from the candidates");
  return s.candidates.front();
}

constexpr bool tegra = true;
constexpr const char* none = nullptr;

struct row {
  std::uint32_t gpu;
  bool tegra;
  int driver;  // 0 = unknown
  policy pol;
  std::vector<std::string> entries;
  const char* chosen;               // spec of the chosen entry, or none
  std::vector<std::string> order;   // when not empty: every usable entry, best first
};

// clang-format off
const std::vector<row> table = {
  // --- plain SASS across the known architectures -------------------------------------------------
  {75,  false, 13000, policy::prefer_sass, {"sm_75", "sm_80", "compute_75"}, "sm_75", {"sm_75", "compute_75"}},
  {75,  false, 13000, policy::prefer_sass, {"sm_80", "compute_80"}, none, {}},
  {80,  false, 13000, policy::prefer_sass, {"sm_75", "sm_80", "sm_86", "compute_80"}, "sm_80", {"sm_80", "compute_80"}},
  {80,  false, 13000, policy::prefer_sass, {"sm_86"}, none, {}},
  // same major, lower minor: sm_80 on 8.6 and 8.9, before any PTX
  {86,  false, 13000, policy::prefer_sass, {"compute_80", "sm_80"}, "sm_80", {"sm_80", "compute_80"}},
  {89,  false, 13000, policy::prefer_sass, {"sm_80", "compute_89"}, "sm_80", {"sm_80", "compute_89"}},
  {89,  false, 13000, policy::prefer_sass, {"sm_80", "sm_86", "compute_89"}, "sm_86", {"sm_86", "sm_80", "compute_89"}},
  {89,  false, 13000, policy::prefer_sass, {"sm_80", "sm_89", "sm_86"}, "sm_89", {"sm_89", "sm_86", "sm_80"}},
  {87,  false, 13000, policy::prefer_sass, {"sm_80", "sm_86", "sm_89"}, "sm_86", {"sm_86", "sm_80"}},
  {88,  false, 13000, policy::prefer_sass, {"sm_86", "sm_87", "sm_89", "sm_90"}, "sm_87", {"sm_87", "sm_86"}},
  // never across majors (measured on an H200: sm_80/sm_89 cubins fail on 9.0)
  {90,  false, 13000, policy::prefer_sass, {"sm_80", "sm_89", "compute_80"}, "compute_80", {"compute_80"}},
  {90,  false, 13000, policy::prefer_sass, {"sm_75", "sm_80", "sm_89"}, none, {}},
  {100, false, 13000, policy::prefer_sass, {"sm_90", "sm_90a", "compute_90"}, "compute_90", {"compute_90"}},
  {120, false, 13000, policy::prefer_sass, {"sm_100", "sm_110", "compute_100"}, "compute_100", {"compute_100"}},
  {110, false, 13000, policy::prefer_sass, {"sm_100", "sm_110", "sm_120"}, "sm_110", {"sm_110"}},
  {121, false, 13000, policy::prefer_sass, {"sm_120", "sm_121"}, "sm_121", {"sm_121", "sm_120"}},
  {120, false, 13000, policy::prefer_sass, {"sm_121", "compute_121", "compute_120"}, "compute_120", {"compute_120"}},
  {103, false, 13000, policy::prefer_sass, {"sm_100", "sm_103", "sm_110"}, "sm_103", {"sm_103", "sm_100"}},
  // --- the driver's measured fatbin behaviour on CC 9.0 (docs/selection.md) --------
  {90,  false, 13000, policy::prefer_sass, {"compute_90", "sm_90"}, "sm_90", {"sm_90", "compute_90"}},
  {90,  false, 13000, policy::prefer_sass, {"sm_90", "compute_80"}, "sm_90", {"sm_90", "compute_80"}},
  {90,  false, 13000, policy::prefer_sass, {"compute_80", "compute_90"}, "compute_90", {"compute_90", "compute_80"}},
  {90,  false, 13000, policy::prefer_sass, {"compute_90", "compute_80"}, "compute_90", {"compute_90", "compute_80"}},
  {90,  false, 13000, policy::prefer_sass, {"compute_75", "compute_80"}, "compute_80", {"compute_80", "compute_75"}},
  {90,  false, 13000, policy::prefer_sass, {"sm_90", "sm_90a"}, "sm_90a", {"sm_90a", "sm_90"}},
  {90,  false, 13000, policy::prefer_sass, {"sm_90a", "sm_90"}, "sm_90a", {"sm_90a", "sm_90"}},
  {90,  false, 13000, policy::prefer_sass, {"compute_90", "sm_90a"}, "sm_90a", {"sm_90a", "compute_90"}},
  {90,  false, 13000, policy::prefer_sass, {"compute_90", "compute_90a"}, "compute_90a", {"compute_90a", "compute_90"}},
  {90,  false, 13000, policy::prefer_sass, {"sm_90", "compute_100"}, "sm_90", {"sm_90"}},
  {90,  false, 13000, policy::prefer_sass, {"compute_100"}, none, {}},
  {90,  false, 13000, policy::prefer_sass, {"sm_100f"}, none, {}},
  // --- arch-specific (a) and family (f) variants --------------------------------------------------
  {100, false, 13000, policy::prefer_sass, {"sm_100", "sm_100f", "sm_100a"}, "sm_100a", {"sm_100a", "sm_100f", "sm_100"}},
  {103, false, 13000, policy::prefer_sass, {"sm_100", "sm_100a", "sm_100f"}, "sm_100f", {"sm_100f", "sm_100"}},
  {103, false, 13000, policy::prefer_sass, {"sm_100a", "compute_100"}, "compute_100", {"compute_100"}},
  {103, false, 13000, policy::prefer_sass, {"sm_100", "sm_103", "sm_103f", "sm_103a", "sm_100f"}, "sm_103a",
        {"sm_103a", "sm_103f", "sm_103", "sm_100f", "sm_100"}},
  {103, false, 13000, policy::prefer_sass, {"compute_100a", "compute_103a"}, "compute_103a", {"compute_103a"}},
  {107, false, 13000, policy::prefer_sass, {"sm_103f", "sm_100f", "sm_110f"}, "sm_103f", {"sm_103f", "sm_100f"}},
  {120, false, 13000, policy::prefer_sass, {"sm_100f", "compute_100f", "compute_90"}, "compute_90", {"compute_90"}},
  {110, false, 13000, policy::prefer_sass, {"sm_100f", "sm_110", "sm_110f"}, "sm_110f", {"sm_110f", "sm_110"}},
  {121, false, 13000, policy::prefer_sass, {"compute_120", "compute_120f"}, "compute_120f", {"compute_120f", "compute_120"}},
  {121, false, 13000, policy::prefer_sass, {"compute_120a", "compute_121f", "compute_120"}, "compute_121f", {"compute_121f", "compute_120"}},
  {120, false, 13000, policy::prefer_sass, {"compute_121f", "sm_121f", "compute_120f"}, "compute_120f", {"compute_120f"}},
  {121, false, 13000, policy::prefer_sass, {"sm_120", "sm_120f"}, "sm_120f", {"sm_120f", "sm_120"}},
  {121, false, 13000, policy::prefer_sass, {"sm_120f", "sm_121"}, "sm_121", {"sm_121", "sm_120f"}},
  {121, false, 13000, policy::prefer_sass, {"sm_120a", "compute_120a"}, none, {}},
  // PTX ranks by arch first, then a > f > plain at the same arch
  {121, false, 13000, policy::prefer_sass, {"compute_120a", "compute_120", "compute_121", "compute_120f"}, "compute_121",
        {"compute_121", "compute_120f", "compute_120"}},
  {100, false, 13000, policy::prefer_sass, {"compute_100", "compute_100f", "compute_100a", "compute_90"}, "compute_100a",
        {"compute_100a", "compute_100f", "compute_100", "compute_90"}},
  // --- hypothetical future GPUs: no SASS fits, the highest PTX wins ----------------------------------
  {130, false, 13000, policy::prefer_sass, {"sm_120", "sm_121", "compute_90", "compute_120", "compute_100a", "compute_120f"},
        "compute_120", {"compute_120", "compute_90"}},
  {200, false, 13000, policy::prefer_sass, {"sm_90", "compute_80", "compute_120", "compute_100"}, "compute_120",
        {"compute_120", "compute_100", "compute_80"}},
  {200, false, 13000, policy::prefer_sass, {"sm_90", "sm_120"}, none, {}},
  // an unknown family (130f) is assumed to contain only its own arch
  {130, false, 13000, policy::prefer_sass, {"compute_120", "sm_130f"}, "sm_130f", {"sm_130f", "compute_120"}},
  {131, false, 13000, policy::prefer_sass, {"compute_120", "sm_130f", "compute_130f"}, "compute_120", {"compute_120"}},
  // --- Tegra: no SASS minor-version compatibility ------------------------------------------------
  {87,  tegra, 13000, policy::prefer_sass, {"sm_80", "sm_86", "compute_80"}, "compute_80", {"compute_80"}},
  {87,  tegra, 13000, policy::prefer_sass, {"sm_80", "sm_87"}, "sm_87", {"sm_87"}},
  {87,  tegra, 13000, policy::prefer_sass, {"sm_80", "sm_86"}, none, {}},
  {110, tegra, 13000, policy::prefer_sass, {"sm_110", "sm_110f", "sm_100f"}, "sm_110f", {"sm_110f", "sm_110"}},
  {87,  false, 13000, policy::prefer_sass, {"sm_80", "sm_86"}, "sm_86", {"sm_86", "sm_80"}},  // same, not Tegra
  // --- PTX ISA vs driver ------------------------------------------------------------------------
  // nvcc 13 writes ISA 9.0: a CUDA 12.4 driver falls back to the ISA 8.4 PTX
  {120, false, 12040, policy::prefer_sass, {"compute_120@9.0", "compute_90@8.4"}, "compute_90@8.4", {"compute_90@8.4"}},
  {120, false, 13000, policy::prefer_sass, {"compute_120@9.0", "compute_90@8.4"}, "compute_120@9.0", {"compute_120@9.0", "compute_90@8.4"}},
  // same target, two ISAs: the newer first, the older stays as a fallback
  {90,  false, 13000, policy::prefer_sass, {"compute_90@8.4", "compute_90@9.0"}, "compute_90@9.0", {"compute_90@9.0", "compute_90@8.4"}},
  {90,  false, 12040, policy::prefer_sass, {"compute_90@8.4", "compute_90@9.0"}, "compute_90@8.4", {"compute_90@8.4"}},
  {90,  false, 12040, policy::prefer_sass, {"compute_80@9.0"}, none, {}},
  {90,  false, 12040, policy::prefer_sass, {"sm_90", "compute_90@9.0"}, "sm_90", {"sm_90"}},  // SASS needs no ISA
  {90,  false, 0,     policy::prefer_sass, {"compute_80@9.1"}, "compute_80@9.1", {"compute_80@9.1"}},  // unknown driver
  // boundaries of the table: 12.8 -> 8.7, 12.6 -> 8.5, 12.7 -> 8.6
  {90,  false, 12080, policy::prefer_sass, {"compute_90@8.8", "compute_90@8.7"}, "compute_90@8.7", {"compute_90@8.7"}},
  {90,  false, 12060, policy::prefer_sass, {"compute_80@8.6", "compute_80@8.5"}, "compute_80@8.5", {"compute_80@8.5"}},
  {90,  false, 12070, policy::prefer_sass, {"compute_80@8.6", "compute_80@8.5"}, "compute_80@8.6", {"compute_80@8.6", "compute_80@8.5"}},
  {90,  false, 13010, policy::prefer_sass, {"compute_90@9.2", "compute_90@9.1"}, "compute_90@9.1", {"compute_90@9.1"}},
  // drivers newer than the table: ISA (major-4).minor
  {200, false, 13050, policy::prefer_sass, {"compute_90@9.6", "compute_90@9.5"}, "compute_90@9.5", {"compute_90@9.5"}},
  {200, false, 14000, policy::prefer_sass, {"compute_120@10.0", "compute_90@9.0"}, "compute_120@10.0", {"compute_120@10.0", "compute_90@9.0"}},
  // higher arch beats newer ISA
  {90,  false, 13000, policy::prefer_sass, {"compute_80@9.0", "compute_90@8.4"}, "compute_90@8.4", {"compute_90@8.4", "compute_80@9.0"}},
  // --- policies -----------------------------------------------------------------------------------
  {90,  false, 13000, policy::force_ptx, {"sm_90", "compute_80", "compute_90"}, "compute_90", {"compute_90", "compute_80"}},
  {90,  false, 13000, policy::force_ptx, {"sm_90", "sm_90a"}, none, {}},
  {90,  false, 12040, policy::force_ptx, {"sm_90", "compute_90@9.0"}, none, {}},
  {90,  false, 13000, policy::sass_only, {"compute_90", "sm_80"}, none, {}},
  {90,  false, 13000, policy::sass_only, {"compute_90", "sm_90"}, "sm_90", {"sm_90"}},
  {120, false, 13000, policy::sass_only, {"compute_120", "sm_120", "compute_120f"}, "sm_120", {"sm_120"}},
  // --- LTO-IR without an nvJitLink (the table's select() passes none) is never loadable ------------------------------------------------------
  {90,  false, 13000, policy::prefer_sass, {"lto_90", "compute_90"}, "compute_90", {"compute_90"}},
  {90,  false, 13000, policy::prefer_sass, {"lto_90", "lto_90a"}, none, {}},
  {100, false, 13000, policy::force_ptx, {"lto_100a", "lto_90"}, none, {}},
};
// clang-format on

}  // namespace

TEST_CASE("selection table: GPU x driver x policy x package -> chosen entry and fallback order") {
  for (std::size_t i = 0; i < table.size(); ++i) {
    const row& r = table[i];
    const auto entries = package(r.entries);
    const selection s = select(entries, {r.gpu, r.tegra}, r.driver, r.pol);
    CAPTURE(i);
    INFO("row " << i << ": CC " << cc_text(r.gpu) << (r.tegra ? " Tegra" : "") << ", driver " << r.driver << ", "
                << policy_name(r.pol) << ", package " << join(r.entries) << " -> usable " << join(usable_order(s, r.entries)));
    check_shape(s, entries.size());
    if (r.chosen == none) {
      CHECK_FALSE(s.chosen.has_value());
    } else {
      REQUIRE(s.chosen.has_value());
      CHECK(r.entries[*s.chosen] == r.chosen);
    }
    if (!r.order.empty()) CHECK(usable_order(s, r.entries) == r.order);
    if (r.chosen == none) CHECK(usable_order(s, r.entries).empty());
  }
}

TEST_CASE("the table covers every known architecture and the hypothetical ones") {
  std::set<std::uint32_t> devices;
  for (const row& r : table) devices.insert(r.gpu);
  for (std::uint32_t a : known_sass_archs()) CHECK_MESSAGE(devices.count(a), "no row for CC " << cc_text(a));
  for (std::uint32_t a : hypothetical_archs()) CHECK_MESSAGE(devices.count(a), "no row for CC " << cc_text(a));
}

TEST_CASE("ties keep entry order") {
  const auto entries = package({"compute_80@9.0", "sm_75", "compute_80@9.0", "sm_86", "sm_86"});
  const selection s = select(entries, {86, false}, 13000);
  check_shape(s, entries.size());
  std::vector<std::size_t> order;
  for (const auto& c : s.candidates) order.push_back(c.entry);
  CHECK(order == std::vector<std::size_t>{3, 4, 0, 2, 1});
  CHECK(verdict_of(s, 4).reason.find("same rank, the earlier entry ranks first") != std::string::npos);

  // Many equal ranks (past the size where a sort switches from insertion sort): each rank group
  // must still list its entries in package order.
  std::vector<std::string> many;
  for (int i = 0; i < 60; ++i) many.push_back(i % 3 == 0 ? "sm_80" : i % 3 == 1 ? "compute_80" : "compute_86");
  const selection m = select(package(many), {86, false}, 13000);
  check_shape(m, many.size());
  std::vector<std::size_t> expect;
  for (const char* group : {"sm_80", "compute_86", "compute_80"})
    for (std::size_t i = 0; i < many.size(); ++i)
      if (many[i] == group) expect.push_back(i);
  std::vector<std::size_t> got;
  for (const auto& c : m.candidates) got.push_back(c.entry);
  CHECK(got == expect);
}

TEST_CASE("reasons name the target, the rule and the device") {
  auto reason = [](std::vector<std::string> specs, std::uint32_t gpu, std::size_t entry, int driver = 13000,
                   policy p = policy::prefer_sass, bool is_tegra = false) {
    return verdict_of(select(package(specs), {gpu, is_tegra}, driver, p), entry).reason;
  };
  // chosen
  CHECK(reason({"sm_90"}, 90, 0) == "exact SASS for CC 9.0");
  CHECK(reason({"sm_90a"}, 90, 0) == "exact arch-specific SASS for CC 9.0");
  CHECK(reason({"sm_103f"}, 103, 0) == "exact family-specific SASS for CC 10.3");
  CHECK(reason({"sm_100f"}, 103, 0) == "sm_100f SASS runs on CC 10.3 (a member of the 100f family)");
  CHECK(reason({"compute_90@9.0"}, 100, 0) ==
        "compute_90 PTX (ISA 9.0) JIT-compiles for CC 10.0; the CUDA 13.0 driver accepts up to ISA 9.0");
  CHECK(reason({"compute_90@9.0"}, 100, 0, 0) ==
        "compute_90 PTX (ISA 9.0) JIT-compiles for CC 10.0; driver version unknown, PTX ISA not checked");
  // usable, with why it ranks lower
  CHECK(reason({"sm_86", "sm_89"}, 89, 0) ==
        "sm_86 SASS runs on CC 8.9 (same major, lower minor); ranked below sm_89: SASS for the exact CC ranks first");
  CHECK(reason({"sm_80", "sm_86"}, 89, 0) ==
        "sm_80 SASS runs on CC 8.9 (same major, lower minor); ranked below sm_86: the highest compatible minor ranks first");
  CHECK(reason({"sm_90", "sm_90a"}, 90, 0) ==
        "exact SASS for CC 9.0; ranked below sm_90a: at the exact CC, a SASS ranks before f before plain");
  CHECK(reason({"sm_100", "sm_100f"}, 103, 0).find("ranked below sm_100f: at the same arch, f SASS ranks before plain") !=
        std::string::npos);
  CHECK(reason({"compute_90", "sm_90"}, 90, 0).find("ranked below sm_90: SASS loads without JIT") != std::string::npos);
  CHECK(reason({"compute_80", "compute_90"}, 90, 0).find("ranked below compute_90 (ISA 9.0): the highest PTX arch ranks first") !=
        std::string::npos);
  CHECK(reason({"compute_90", "compute_90a"}, 90, 0).find("ranked below compute_90a (ISA 9.0): at the same arch, a PTX") !=
        std::string::npos);
  CHECK(reason({"compute_90@8.4", "compute_90@9.0"}, 90, 0).find("ranked below compute_90 (ISA 9.0): the newest PTX ISA ranks first") !=
        std::string::npos);
  // rejected
  CHECK(reason({"sm_80"}, 90, 0) == "sm_80 SASS runs only on CC 8.x; the device is CC 9.0");
  CHECK(reason({"sm_89"}, 86, 0) == "sm_89 SASS needs CC 8.9 or a higher 8.x minor; the device is CC 8.6");
  CHECK(reason({"sm_90a"}, 100, 0) == "sm_90a SASS runs only on CC 9.0 exactly; the device is CC 10.0");
  CHECK(reason({"sm_100a"}, 103, 0) == "sm_100a SASS runs only on CC 10.0 exactly; the device is CC 10.3");
  CHECK(reason({"compute_90a"}, 100, 0) == "compute_90a PTX runs only on CC 9.0 exactly; the device is CC 10.0");
  CHECK(reason({"sm_100f"}, 120, 0) == "sm_100f SASS runs only on the 100f family (CC 10.0, 10.3, 10.7); the device is CC 12.0");
  CHECK(reason({"compute_120f"}, 130, 0) == "compute_120f PTX runs only on the 120f family (CC 12.0, 12.1); the device is CC 13.0");
  CHECK(reason({"compute_100"}, 90, 0) == "compute_100 PTX needs CC 10.0 or newer; the device is CC 9.0");
  CHECK(reason({"sm_86"}, 87, 0, 13000, policy::prefer_sass, tegra) ==
        "sm_86 SASS runs only on CC 8.6 exactly on Tegra (no minor-version compatibility); the device is CC 8.7 (Tegra)");
  CHECK(reason({"compute_90@9.0"}, 90, 0, 12040) ==
        "compute_90 PTX ISA 9.0 needs a CUDA 13.0 driver; the driver is CUDA 12.4 (accepts up to ISA 8.4)");
  CHECK(reason({"compute_90@8.8"}, 90, 0, 12080) ==
        "compute_90 PTX ISA 8.8 needs a CUDA 12.9 driver; the driver is CUDA 12.8 (accepts up to ISA 8.7)");
  CHECK(reason({"compute_90@9.6"}, 90, 0, 13050) ==
        "compute_90 PTX ISA 9.6 needs a CUDA 13.6 driver; the driver is CUDA 13.5 (accepts up to ISA 9.5, extrapolated for "
        "a driver newer than fatpack's table)");
  CHECK(reason({"compute_90@9.1"}, 90, 0, 13010).find("extrapolated") == std::string::npos);
  CHECK(reason({"compute_90@9.1"}, 90, 0, 13020).find("accepts up to ISA 9.2, extrapolated") != std::string::npos);
  CHECK(reason({"sm_90", "compute_90"}, 90, 0, 13000, policy::force_ptx) ==
        "sm_90 SASS fits CC 9.0, but policy force_ptx loads only PTX");
  CHECK(reason({"sm_90", "compute_90"}, 90, 1, 13000, policy::sass_only) ==
        "compute_90 PTX fits CC 9.0, but policy sass_only never JIT-compiles");
  CHECK(reason({"lto_90"}, 90, 0) ==
        "lto_90 LTO-IR needs nvJitLink, and none is loaded (libnvJitLink.so.13, or FATPACK_NVJITLINK)");
  // An entry that fails the architecture rule gets that reason, not the policy's or the ISA's.
  CHECK(reason({"sm_80"}, 90, 0, 13000, policy::force_ptx) == "sm_80 SASS runs only on CC 8.x; the device is CC 9.0");
  CHECK(reason({"compute_100@9.0"}, 90, 0, 12040) == "compute_100 PTX needs CC 10.0 or newer; the device is CC 9.0");
}

TEST_CASE("LTO-IR: usable with an nvJitLink that knows the CC, between SASS and PTX") {
  const auto order = [](const selection& s, const std::vector<std::string>& specs) {
    std::vector<std::string> out;
    for (const auto& c : s.candidates)
      if (c.verdict != verdict::rejected) out.push_back(specs[c.entry]);
    return out;
  };
  const std::vector<std::string> specs = {"compute_90", "lto_90", "sm_90", "lto_80"};
  const selection s = select(package(specs), {90, false}, 13000, policy::prefer_sass, 13000);
  CHECK(order(s, specs) == std::vector<std::string>{"sm_90", "lto_90", "lto_80", "compute_90"});
  CHECK(verdict_of(s, 1).reason ==
        "lto_90 LTO-IR links for CC 9.0 through nvJitLink 13.0; ranked below sm_90: SASS loads without a link, so it "
        "ranks before LTO-IR");
  CHECK(verdict_of(s, 0).reason.find("LTO-IR is optimised across files at link time") == std::string::npos);
  const selection no_sass = select(package({"compute_90", "lto_90"}), {90, false}, 13000, policy::prefer_sass, 13000);
  REQUIRE(no_sass.chosen == std::optional<std::size_t>(1));
  CHECK(verdict_of(no_sass, 0).reason.find("ranked below lto_90: LTO-IR is optimised across files at link time") !=
        std::string::npos);
  // lto_90 links for sm_90 and newer only (the real nvJitLink 13.0 answers ARCH_MISMATCH for sm_89).
  CHECK(select(package({"lto_90"}), {89, false}, 13000, policy::prefer_sass, 13000).candidates[0].reason ==
        "lto_90 LTO-IR needs CC 9.0 or newer; the device is CC 8.9");
  CHECK(select(package({"lto_90"}), {120, false}, 13000, policy::prefer_sass, 13000).chosen.has_value());
  // nvJitLink 13.0 does not know CC 13.0 (NVJITLINK_ERROR_UNRECOGNIZED_ARCH): the PTX is next.
  const selection future = select(package({"lto_90", "compute_90"}), {130, false}, 13000, policy::prefer_sass, 13000);
  CHECK(future.chosen == std::optional<std::size_t>(1));
  CHECK(verdict_of(future, 0).reason ==
        "lto_90 LTO-IR: nvJitLink 13.0 cannot link for CC 13.0 (it knows the archs of CUDA 13.0)");
  // A newer nvJitLink is assumed to know it (the loader falls back when it does not).
  const selection newer = select(package({"lto_90", "compute_90"}), {130, false}, 13000, policy::prefer_sass, 13020);
  CHECK(newer.chosen == std::optional<std::size_t>(0));
  CHECK(verdict_of(newer, 0).reason.find("assumed to know the CC") != std::string::npos);
  // Policies: force_ptx and sass_only refuse it.
  CHECK(verdict_of(select(package({"lto_90"}), {90, false}, 13000, policy::force_ptx, 13000), 0).reason ==
        "lto_90 LTO-IR fits CC 9.0, but policy force_ptx loads only PTX");
  CHECK(verdict_of(select(package({"lto_90"}), {90, false}, 13000, policy::sass_only, 13000), 0).reason ==
        "lto_90 LTO-IR fits CC 9.0, but policy sass_only never JIT-compiles");
}

TEST_CASE("nothing fits: one paragraph with the device, the driver's ISA limit and every entry's reason") {
  const std::vector<std::string> specs = {"sm_80", "sm_90a", "compute_90@9.0", "lto_90", "compute_100@8.4"};
  const selection s = select(package(specs), {90, false}, 12040, policy::force_ptx);
  check_shape(s, specs.size());
  REQUIRE_FALSE(s.chosen.has_value());
  const std::string& m = s.nothing_fits;
  INFO(m);
  CHECK(m.find('\n') == std::string::npos);
  CHECK(m.find("CC 9.0") != std::string::npos);
  CHECK(m.find("CUDA 12.4") != std::string::npos);
  CHECK(m.find("PTX ISA up to 8.4") != std::string::npos);
  CHECK(m.find("policy force_ptx") != std::string::npos);
  CHECK(m.find("(5 entries): sm_80 SASS runs only on CC 8.x; the device is CC 9.0. ") != std::string::npos);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::string& r = verdict_of(s, i).reason;
    CHECK(r.rfind(specs[i].substr(0, specs[i].find('@')) + " ", 0) == 0);  // every reason names its entry first
    CHECK(m.find(" " + r + ".") != std::string::npos);
  }
  CHECK(m.find("sm_90a SASS fits CC 9.0, but policy force_ptx loads only PTX") != std::string::npos);
  CHECK(m.find("compute_90 PTX ISA 9.0 needs a CUDA 13.0 driver") != std::string::npos);
  CHECK(m.find("compute_100 PTX needs CC 10.0 or newer") != std::string::npos);

  SUBCASE("unknown driver and Tegra are said so") {
    const selection t = select(package({"sm_80"}), {87, true}, 0);
    CHECK(t.nothing_fits.find("CC 8.7 (Tegra)") != std::string::npos);
    CHECK(t.nothing_fits.find("unknown driver (PTX ISA not checked)") != std::string::npos);
  }
  SUBCASE("an empty module") {
    const selection t = select({}, {90, false}, 13000);
    check_shape(t, 0);
    CHECK(t.nothing_fits == "no entry can run on CC 9.0 with a CUDA 13.0 driver (PTX ISA up to 9.0) under policy "
                            "prefer_sass: the module has no entries.");
  }
  SUBCASE("not set when something fits") {
    CHECK(select(package({"sm_80", "compute_80"}), {90, false}, 13000).nothing_fits.empty());
  }
}

// An oracle written independently of select.cpp, straight from docs/design.md §2, checked against the
// selector for every target x every device (known and hypothetical, desktop and Tegra). It only
// decides usable vs rejected; the ranking is the table's job.
namespace {

bool oracle_runs(const target& t, std::uint32_t dev, bool is_tegra) {
  if (t.kind == entry_kind::ltoir) return false;
  if (t.variant == arch_variant::arch_specific) return t.arch == dev;
  if (t.variant == arch_variant::family) {
    // Table 28, spelled out again.
    switch (t.arch) {
      case 100: return dev == 100 || dev == 103 || dev == 107;
      case 103: return dev == 103 || dev == 107;
      case 120: return dev == 120 || dev == 121;
      default: return dev == t.arch;
    }
  }
  if (t.kind == entry_kind::ptx) return dev >= t.arch;
  if (is_tegra) return dev == t.arch;
  return dev / 10 == t.arch / 10 && dev % 10 >= t.arch % 10;
}

}  // namespace

TEST_CASE("every target x every device agrees with an independent reading of NVIDIA's rules") {
  std::vector<std::uint32_t> devices = known_sass_archs();
  for (std::uint32_t a : hypothetical_archs()) devices.push_back(a);
  devices.push_back(107);  // in Table 28, not in nvcc 13.0's list
  std::vector<std::string> specs;
  for (std::uint32_t a : devices) {
    for (const char* prefix : {"sm_", "compute_", "lto_"}) {
      specs.push_back(prefix + std::to_string(a));
      if (a >= 90) specs.push_back(prefix + std::to_string(a) + "a");
      if (a >= 100) specs.push_back(prefix + std::to_string(a) + "f");
    }
  }
  const auto entries = package(specs);
  int usable_count = 0;
  for (bool is_tegra : {false, true}) {
    for (std::uint32_t dev : devices) {
      for (policy p : {policy::prefer_sass, policy::force_ptx, policy::sass_only}) {
        const selection s = select(entries, {dev, is_tegra}, 13000, p);
        check_shape(s, entries.size());
        for (std::size_t i = 0; i < entries.size(); ++i) {
          const target& t = entries[i].target;
          bool expect = oracle_runs(t, dev, is_tegra);
          if (p == policy::force_ptx && t.kind == entry_kind::sass) expect = false;
          if (p == policy::sass_only && t.kind == entry_kind::ptx) expect = false;
          const candidate& c = verdict_of(s, i);
          CAPTURE(c.reason);
          CHECK_MESSAGE((c.verdict != verdict::rejected) == expect,
                        specs[i] << " on CC " << cc_text(dev) << (is_tegra ? " Tegra " : " ") << policy_name(p));
          usable_count += expect;
        }
        // The chosen entry is SASS whenever any SASS is usable (prefer_sass).
        if (p == policy::prefer_sass && s.chosen) {
          bool any_sass = false;
          for (const auto& c : s.candidates)
            any_sass |= c.verdict != verdict::rejected && entries[c.entry].target.kind == entry_kind::sass;
          CHECK(any_sass == (entries[*s.chosen].target.kind == entry_kind::sass));
        }
      }
    }
  }
  CHECK(usable_count > 100);  // the oracle is not vacuous
}

TEST_CASE("policy and verdict names") {
  CHECK(std::string(policy_name(policy::prefer_sass)) == "prefer_sass");
  CHECK(std::string(policy_name(policy::force_ptx)) == "force_ptx");
  CHECK(std::string(policy_name(policy::sass_only)) == "sass_only");
  CHECK(std::string(verdict_name(verdict::chosen)) == "chosen");
  CHECK(std::string(verdict_name(verdict::usable)) == "usable");
  CHECK(std::string(verdict_name(verdict::rejected)) == "rejected");
}

// --- targets and versions -----------------------------------------------------------------------

TEST_CASE("target: parse and str round trip, with the fields nvcc's spelling means") {
  struct expect_row {
    const char* text;
    entry_kind kind;
    std::uint32_t arch;
    arch_variant variant;
  };
  const expect_row rows[] = {
      {"sm_75", entry_kind::sass, 75, arch_variant::plain},
      {"sm_90", entry_kind::sass, 90, arch_variant::plain},
      {"sm_90a", entry_kind::sass, 90, arch_variant::arch_specific},
      {"sm_100f", entry_kind::sass, 100, arch_variant::family},
      {"sm_121", entry_kind::sass, 121, arch_variant::plain},
      {"sm_200", entry_kind::sass, 200, arch_variant::plain},
      {"compute_90", entry_kind::ptx, 90, arch_variant::plain},
      {"compute_90a", entry_kind::ptx, 90, arch_variant::arch_specific},
      {"compute_120f", entry_kind::ptx, 120, arch_variant::family},
      {"lto_90", entry_kind::ltoir, 90, arch_variant::plain},
      {"lto_100a", entry_kind::ltoir, 100, arch_variant::arch_specific},
      {"lto_110f", entry_kind::ltoir, 110, arch_variant::family},
  };
  for (const auto& r : rows) {
    CAPTURE(r.text);
    auto t = target::parse(r.text);
    REQUIRE(t.has_value());
    CHECK(t->kind == r.kind);
    CHECK(t->arch == r.arch);
    CHECK(t->variant == r.variant);
    CHECK(t->str() == r.text);
    CHECK(*target::parse(t->str()) == *t);
  }
  CHECK(target::parse("sm_121")->major() == 12);
  CHECK(target::parse("sm_121")->minor() == 1);
  CHECK(*target::parse("sm_90") != *target::parse("sm_90a"));
  CHECK(*target::parse("sm_90") != *target::parse("compute_90"));
}

TEST_CASE("target: junk is an invalid_argument error naming the text") {
  for (const char* junk : {"", "sm_", "sm_9x", "compute_90q", "sm_1000000", "sm_9", "sm_090", "SM_90", "sm90",
                           "sm_90af", "sm_90A", "sm_80a", "sm_90f", "compute_86f", "ptx_90", " sm_90", "sm_90 ",
                           "sm_-90", "sm_+90", "compute_", "lto_", "sm_a", "sm_1000", "sm_90a "}) {
    CAPTURE(junk);
    auto t = target::parse(junk);
    REQUIRE_FALSE(t.has_value());
    CHECK(t.error().reason == errc::invalid_argument);
    CHECK(t.error().message.find("'" + std::string(junk) + "'") != std::string::npos);
  }
}

TEST_CASE("kind names, PTX ISA spelling and order") {
  CHECK(std::string(kind_name(entry_kind::sass)) == "sass");
  CHECK(std::string(kind_name(entry_kind::ptx)) == "ptx");
  CHECK(std::string(kind_name(entry_kind::ltoir)) == "ltoir");
  CHECK(ptx_isa{9, 0}.str() == "9.0");
  CHECK(ptx_isa{10, 12}.str() == "10.12");
  CHECK(ptx_isa{8, 8} < ptx_isa{9, 0});
  CHECK(ptx_isa{8, 4} < ptx_isa{8, 5});
  CHECK_FALSE(ptx_isa{9, 0} < ptx_isa{8, 9});
  CHECK(ptx_isa{9, 1} <= ptx_isa{9, 1});
  CHECK_FALSE(ptx_isa{}.known());
  CHECK(ptx_isa{9, 0}.known());
}

TEST_CASE("CUDA versions: cuDriverGetVersion numbers <-> text") {
  CHECK(cuda_version_str(13000) == "13.0");
  CHECK(cuda_version_str(12040) == "12.4");
  CHECK(cuda_version_str(11080) == "11.8");
  CHECK(cuda_version_str(13010) == "13.1");
  CHECK(cuda_version_str(0) == "unknown");
  CHECK(*parse_cuda_version("13.0") == 13000);
  CHECK(*parse_cuda_version("12.4") == 12040);
  CHECK(*parse_cuda_version("13") == 13000);
  CHECK(*parse_cuda_version("9.2") == 9020);
  CHECK(*parse_cuda_version("12.10") == 12100);
  CHECK(cuda_version_str(12100) == "12.10");
  for (int v : {9020, 11080, 12000, 12040, 12090, 13000, 13010, 14000})
    CHECK(*parse_cuda_version(cuda_version_str(v)) == v);
  for (const char* junk : {"", "13.", ".4", "x", "13.0.1", "1a", "-1", "13.-1", "+13", "13 ", " 13", "013", "0",
                           "100.0", "13.05", "13.100", "12,4", "13000"}) {
    CAPTURE(junk);
    auto v = parse_cuda_version(junk);
    REQUIRE_FALSE(v.has_value());
    CHECK(v.error().reason == errc::invalid_argument);
    CHECK(v.error().message.find("'" + std::string(junk) + "'") != std::string::npos);
  }
}

TEST_CASE("error code names") {
  CHECK(std::string(errc_name(errc::io)) == "io");
  CHECK(std::string(errc_name(errc::truncated)) == "truncated");
  CHECK(std::string(errc_name(errc::bad_magic)) == "bad_magic");
  CHECK(std::string(errc_name(errc::unsupported_version)) == "unsupported_version");
  CHECK(std::string(errc_name(errc::malformed)) == "malformed");
  CHECK(std::string(errc_name(errc::checksum)) == "checksum");
  CHECK(std::string(errc_name(errc::codec)) == "codec");
  CHECK(std::string(errc_name(errc::unknown_kind)) == "unknown_kind");
  CHECK(std::string(errc_name(errc::unsupported)) == "unsupported");
  CHECK(std::string(errc_name(errc::invalid_argument)) == "invalid_argument");
  CHECK(std::string(errc_name(static_cast<errc>(999))) == "unknown");
}

// --- the data ------------------------------------------------------------------------------------

TEST_CASE("PTX ISA <-> CUDA driver table") {
  auto isa = [](int v) { return max_ptx_isa_for_driver(v).str(); };
  CHECK(isa(11000) == "7.0");
  CHECK(isa(11080) == "7.8");
  CHECK(isa(12000) == "8.0");
  CHECK(isa(12010) == "8.1");
  CHECK(isa(12040) == "8.4");
  CHECK(isa(12050) == "8.5");
  CHECK(isa(12060) == "8.5");  // 12.6 brought no new ISA
  CHECK(isa(12070) == "8.6");
  CHECK(isa(12080) == "8.7");
  CHECK(isa(12090) == "8.8");
  CHECK(isa(13000) == "9.0");
  CHECK(isa(13010) == "9.1");
  // newer than the table: ISA (major-4).minor
  CHECK(isa(13020) == "9.2");
  CHECK(isa(13050) == "9.5");
  CHECK(isa(14000) == "10.0");
  CHECK(isa(14030) == "10.3");
  CHECK_FALSE(max_ptx_isa_for_driver(0).known());
  CHECK_FALSE(max_ptx_isa_for_driver(-1).known());

  CHECK(min_driver_for_ptx_isa({7, 0}) == 11000);
  CHECK(min_driver_for_ptx_isa({8, 4}) == 12040);
  CHECK(min_driver_for_ptx_isa({8, 5}) == 12050);
  CHECK(min_driver_for_ptx_isa({8, 6}) == 12070);
  CHECK(min_driver_for_ptx_isa({8, 8}) == 12090);
  CHECK(min_driver_for_ptx_isa({9, 0}) == 13000);
  CHECK(min_driver_for_ptx_isa({9, 1}) == 13010);
  CHECK(min_driver_for_ptx_isa({9, 5}) == 13050);
  CHECK(min_driver_for_ptx_isa({10, 0}) == 14000);

  // The table is ordered, and the two directions agree on every row and on the extrapolation.
  const auto& t = ptx_isa_table();
  REQUIRE(t.size() >= 20);
  for (std::size_t i = 0; i < t.size(); ++i) {
    CAPTURE(t[i].isa.str());
    if (i > 0) {
      CHECK(t[i - 1].isa < t[i].isa);
      CHECK(t[i - 1].cuda_version < t[i].cuda_version);
    }
    CHECK(max_ptx_isa_for_driver(t[i].cuda_version) == t[i].isa);
    CHECK(min_driver_for_ptx_isa(t[i].isa) == t[i].cuda_version);
  }
  for (int v = 13000; v <= 16090; v += 10) {
    CAPTURE(v);
    CHECK(min_driver_for_ptx_isa(max_ptx_isa_for_driver(v)) == v);
  }
}

TEST_CASE("family table (Programming Guide Table 28) and the known architectures") {
  CHECK(family_members(100) == std::vector<std::uint32_t>{100, 103, 107});
  CHECK(family_members(103) == std::vector<std::uint32_t>{103, 107});
  CHECK(family_members(107) == std::vector<std::uint32_t>{107});
  CHECK(family_members(110) == std::vector<std::uint32_t>{110});
  CHECK(family_members(120) == std::vector<std::uint32_t>{120, 121});
  CHECK(family_members(121) == std::vector<std::uint32_t>{121});
  CHECK(family_members(130) == std::vector<std::uint32_t>{130});  // unknown: only itself
  CHECK(family_contains(100, 103));
  CHECK(family_contains(100, 107));
  CHECK_FALSE(family_contains(100, 110));
  CHECK_FALSE(family_contains(100, 120));
  CHECK_FALSE(family_contains(103, 100));  // not backward compatible
  CHECK(family_contains(120, 121));
  CHECK_FALSE(family_contains(121, 120));
  CHECK(family_contains(130, 130));
  CHECK_FALSE(family_contains(130, 131));
  CHECK_FALSE(family_contains(130, 200));

  CHECK(known_sass_archs() == std::vector<std::uint32_t>{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121});
  CHECK(hypothetical_archs() == std::vector<std::uint32_t>{130, 200});
  CHECK(is_known_arch(89));
  CHECK_FALSE(is_known_arch(70));   // Volta: dropped in CUDA 13
  CHECK_FALSE(is_known_arch(101));  // Thor was renamed sm_110
  CHECK_FALSE(is_known_arch(130));
}

#ifdef FATPACK_NVCC
// The table must know every SASS arch the installed toolkit can build, or `all` builds would carry
// SASS the selector has never heard of (it would still apply the rules, but plan's matrix would
// skip that GPU).
TEST_CASE("known_sass_archs covers nvcc --list-gpu-code") {
  const std::string cmd = std::string("\"") + FATPACK_NVCC + "\" --list-gpu-code 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  REQUIRE(rc == 0);
  std::istringstream lines(out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("sm_", 0) != 0) continue;
    auto t = target::parse(line);
    REQUIRE_MESSAGE(t.has_value(), line);
    CHECK_MESSAGE(is_known_arch(t->arch), "nvcc knows " << line << ", arch_table does not");
    ++n;
  }
  CHECK(n >= 10);
}
#endif
