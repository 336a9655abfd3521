// Selection (design.md §2, docs/selection.md): a pure function from (entries, device, driver,
// policy) to an ordered list of candidates with reasons. NVIDIA's facts come from arch_table; this
// file holds only the ranking.
#include "fatpack/core/select.hpp"

#include "fatpack/core/arch_table.hpp"

#include <algorithm>
#include <tuple>

namespace fatpack::core {
namespace {

std::string cc(std::uint32_t arch) { return std::to_string(arch / 10) + "." + std::to_string(arch % 10); }

int variant_rank(arch_variant v) {  // higher is better at the same arch: a > f > plain
  return v == arch_variant::arch_specific ? 2 : v == arch_variant::family ? 1 : 0;
}

// Can this target's code run on the device, ignoring the PTX ISA and policy? If not, why not.
bool arch_fits(const target& t, const device_desc& dev, std::string* why) {
  const std::string name = t.str();
  const std::string what = t.kind == entry_kind::sass ? " SASS" : " PTX";
  if (t.variant == arch_variant::arch_specific) {
    if (t.arch == dev.arch) return true;
    *why = name + what + " runs only on CC " + cc(t.arch) + " exactly (arch-specific); the device is CC " + cc(dev.arch);
    return false;
  }
  if (t.variant == arch_variant::family) {
    if (family_contains(t.arch, dev.arch)) return true;
    *why = name + what + " runs only on members of the " + std::to_string(t.arch) +
           "f family; CC " + cc(dev.arch) + " is not one";
    return false;
  }
  if (t.kind == entry_kind::sass) {
    if (dev.tegra) {
      if (t.arch == dev.arch) return true;
      *why = name + " SASS runs only on CC " + cc(t.arch) + " on Tegra (no minor-version compatibility); the device is CC " +
             cc(dev.arch);
      return false;
    }
    if (t.major() == dev.arch / 10 && t.minor() <= dev.arch % 10) return true;
    if (t.major() != dev.arch / 10)
      *why = name + " SASS runs only on CC " + std::to_string(t.major()) + ".x; the device is CC " + cc(dev.arch);
    else
      *why = name + " SASS needs CC " + cc(t.arch) + " or a higher minor; the device is CC " + cc(dev.arch);
    return false;
  }
  if (t.arch <= dev.arch) return true;
  *why = name + " PTX needs CC " + cc(t.arch) + " or newer; the device is CC " + cc(dev.arch);
  return false;
}

}  // namespace

const char* policy_name(policy p) noexcept {
  switch (p) {
    case policy::prefer_sass: return "prefer_sass";
    case policy::force_ptx: return "force_ptx";
    case policy::sass_only: return "sass_only";
  }
  return "unknown";
}

const char* verdict_name(verdict v) noexcept {
  switch (v) {
    case verdict::chosen: return "chosen";
    case verdict::usable: return "usable";
    case verdict::rejected: return "rejected";
  }
  return "unknown";
}

selection select(const std::vector<entry_desc>& entries, device_desc device, int driver_version, policy p) {
  const ptx_isa max_isa = max_ptx_isa_for_driver(driver_version);
  struct scored {
    std::size_t entry;
    std::tuple<int, int, int, int, int, int> key;  // compared descending
    std::string reason;
  };
  std::vector<scored> usable;
  std::vector<candidate> rejected;

  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry_desc& e = entries[i];
    const target& t = e.target;
    std::string why;
    if (t.kind == entry_kind::ltoir) {
      rejected.push_back({i, verdict::rejected, t.str() + ": LTO-IR is reserved in format v1 and cannot be loaded"});
      continue;
    }
    if (!arch_fits(t, device, &why)) {
      rejected.push_back({i, verdict::rejected, why});
      continue;
    }
    if (t.kind == entry_kind::sass && p == policy::force_ptx) {
      rejected.push_back({i, verdict::rejected, t.str() + " SASS would run, but policy force_ptx loads PTX only"});
      continue;
    }
    if (t.kind == entry_kind::ptx && p == policy::sass_only) {
      rejected.push_back({i, verdict::rejected, t.str() + " PTX would JIT, but policy sass_only never JIT-compiles"});
      continue;
    }
    if (t.kind == entry_kind::ptx && driver_version > 0 && max_isa < e.ptx_isa) {
      rejected.push_back({i, verdict::rejected,
                          t.str() + " PTX ISA " + e.ptx_isa.str() + " needs a CUDA " +
                              cuda_version_str(min_driver_for_ptx_isa(e.ptx_isa)) + " driver; the driver is CUDA " +
                              cuda_version_str(driver_version) + " (accepts up to ISA " + max_isa.str() + ")"});
      continue;
    }
    scored s;
    s.entry = i;
    if (t.kind == entry_kind::sass) {
      const bool exact = t.arch == device.arch;
      // SASS first; exact arch first; then a > f > plain; then the highest minor.
      s.key = {1, exact ? 1 : 0, exact ? variant_rank(t.variant) : 0, int(t.arch), variant_rank(t.variant), 0};
      if (exact)
        s.reason = std::string(t.variant == arch_variant::arch_specific ? "arch-specific"
                               : t.variant == arch_variant::family     ? "family-specific"
                                                                       : "exact") +
                   " SASS for CC " + cc(device.arch) + ": loads without JIT";
      else if (t.variant == arch_variant::family)
        s.reason = t.str() + " SASS runs on CC " + cc(device.arch) + " (family member): loads without JIT";
      else
        s.reason = t.str() + " SASS runs on CC " + cc(device.arch) + " (same major, lower minor): loads without JIT";
    } else {
      s.key = {0, int(t.arch), variant_rank(t.variant), int(e.ptx_isa.major), int(e.ptx_isa.minor), 0};
      s.reason = t.str() + " PTX (ISA " + e.ptx_isa.str() + ") JIT-compiles for CC " + cc(device.arch) +
                 (driver_version > 0 ? " on this driver (accepts up to ISA " + max_isa.str() + ")"
                                     : " (driver unknown: PTX ISA not checked)");
    }
    usable.push_back(std::move(s));
  }
  // Stable: ties keep entry order.
  std::stable_sort(usable.begin(), usable.end(), [](const scored& a, const scored& b) { return a.key > b.key; });

  selection out;
  for (std::size_t r = 0; r < usable.size(); ++r) {
    candidate c{usable[r].entry, r == 0 ? verdict::chosen : verdict::usable, usable[r].reason};
    if (r > 0) c.reason = "usable, ranked below " + entries[usable[0].entry].target.str() + ": " + c.reason;
    out.candidates.push_back(std::move(c));
  }
  if (!usable.empty()) out.chosen = usable.front().entry;
  for (auto& c : rejected) out.candidates.push_back(std::move(c));
  if (!out.chosen) {
    std::string s = "no entry can run on a CC " + cc(device.arch) + (device.tegra ? " Tegra" : "") + " device with " +
                    (driver_version > 0 ? "a CUDA " + cuda_version_str(driver_version) +
                                              " driver (PTX ISA up to " + max_isa.str() + ")"
                                        : std::string("an unknown driver")) +
                    ", policy " + policy_name(p) + ".";
    if (entries.empty()) s += " The module has no entries.";
    for (const auto& c : out.candidates) s += " Entry " + std::to_string(c.entry) + ": " + c.reason + ".";
    out.nothing_fits = s;
  }
  return out;
}

}  // namespace fatpack::core
