// Selection (docs/design.md §2, docs/selection.md): which entry of a module a device loads, as a pure
// function of (entries, device, driver version, policy) -> candidates, each with a one-sentence
// reason. The runtime, `fatpack plan` and FATPACK_LOG=info all call this, so the tool predicts
// exactly what the product does.
//
// NVIDIA's facts (families, PTX ISA per driver) come from arch_table; this file holds only the
// rules and the ranking. Each entry is judged on its own, in this order:
//   1. LTO-IR: only with an nvJitLink loaded that knows the device's CC (arch_table).
//   2. architecture: SASS sm_XY on CC X.Z with Z >= Y (Tegra: exact CC only); PTX compute_XY and
//      LTO-IR lto_XY on CC >= X.Y (nvJitLink links lto_90 for sm_90 and newer, refuses sm_89 with
//      NVJITLINK_ERROR_ARCH_MISMATCH); `a` on the exact CC only; `f` on the family's members only.
//   3. policy: force_ptx refuses SASS and LTO-IR, sass_only refuses PTX and LTO-IR.
//   4. PTX ISA: refused when newer than the driver accepts (not checked when the driver is unknown).
// Survivors are ranked (SASS, then LTO-IR, then PTX; see rank_of) and the loader tries them in that order,
// falling back along it when the driver refuses one anyway.
#include "fatpack/core/select.hpp"

#include "fatpack/core/arch_table.hpp"

#include <algorithm>
#include <array>

namespace fatpack::core {
namespace {

std::string cc(std::uint32_t arch) { return std::to_string(arch / 10) + "." + std::to_string(arch % 10); }

std::string cc_list(const std::vector<std::uint32_t>& archs) {
  std::string s;
  for (std::uint32_t a : archs) s += (s.empty() ? "" : ", ") + cc(a);
  return s;
}

const char* kind_word(entry_kind k) {
  switch (k) {
    case entry_kind::sass: return "SASS";
    case entry_kind::ptx: return "PTX";
    case entry_kind::ltoir: return "LTO-IR";
  }
  return "?";
}

int variant_rank(arch_variant v) {  // at the same arch: a > f > plain (the driver prefers `a` too)
  switch (v) {
    case arch_variant::arch_specific: return 2;
    case arch_variant::family: return 1;
    case arch_variant::plain: return 0;
  }
  return 0;
}

std::string device_text(const device_desc& dev) {
  return "the device is CC " + cc(dev.arch) + (dev.tegra ? " (Tegra)" : "");
}

// Why target t cannot run on dev by NVIDIA's architecture rules; empty when it can. Ignores the
// PTX ISA and the policy (later checks).
std::string arch_refusal(const target& t, const device_desc& dev) {
  const std::string what = t.str() + " " + kind_word(t.kind);
  switch (t.variant) {
    case arch_variant::arch_specific:
      if (t.arch == dev.arch) return {};
      return what + " runs only on CC " + cc(t.arch) + " exactly; " + device_text(dev);
    case arch_variant::family:
      if (family_contains(t.arch, dev.arch)) return {};
      return what + " runs only on the " + std::to_string(t.arch) + "f family (CC " + cc_list(family_members(t.arch)) +
             "); " + device_text(dev);
    case arch_variant::plain:
      break;
  }
  if (t.kind != entry_kind::sass) {  // PTX and LTO-IR: the JIT compiles them for any newer CC
    if (t.arch <= dev.arch) return {};
    return what + " needs CC " + cc(t.arch) + " or newer; " + device_text(dev);
  }
  // Plain SASS.
  if (dev.tegra) {
    // "Binary compatibility is supported only for the desktop. It is not supported for Tegra."
    if (t.arch == dev.arch) return {};
    return what + " runs only on CC " + cc(t.arch) + " exactly on Tegra (no minor-version compatibility); " +
           device_text(dev);
  }
  const std::string major = std::to_string(t.major());
  if (t.major() != dev.arch / 10) return what + " runs only on CC " + major + ".x; " + device_text(dev);
  if (t.minor() > dev.arch % 10)
    return what + " needs CC " + cc(t.arch) + " or a higher " + major + ".x minor; " + device_text(dev);
  return {};
}

// Compared lexicographically, larger is better; std::stable_sort keeps entry order for ties.
//   [0] SASS before LTO-IR before PTX (docs/selection.md: LTO-IR is what the user built with -dlto
//       for, cross-file optimisation; nvJitLink falls back to the PTX when it cannot link)
//   [1] SASS for the exact CC first, [2] and there a > f > plain
//   [3] then the highest arch (SASS: the highest lower minor; PTX: the highest compute_XY)
//   [4] at the same arch a > f > plain
//   [5..6] at the same PTX target, the newest ISA (older ISAs stay behind it as fallbacks)
using rank_key = std::array<int, 7>;

rank_key rank_of(const entry_desc& e, const device_desc& dev) {
  const target& t = e.target;
  const int v = variant_rank(t.variant);
  if (t.kind == entry_kind::sass) {
    const bool exact = t.arch == dev.arch;
    return {2, exact ? 1 : 0, exact ? v : 0, int(t.arch), v, 0, 0};
  }
  if (t.kind == entry_kind::ltoir) return {1, 0, 0, int(t.arch), v, 0, 0};
  return {0, 0, 0, int(t.arch), v, int(e.ptx_isa.major), int(e.ptx_isa.minor)};
}

// Why an entry with rank `lower` comes after the chosen one (rank `best`): the first rule that
// separates them.
const char* rank_rule(const rank_key& best, const rank_key& lower) {
  std::size_t i = 0;
  while (i < best.size() && best[i] == lower[i]) ++i;
  const bool sass = best[0] == 2;
  switch (i) {
    case 0:
      if (sass) return lower[0] == 1 ? "SASS loads without a link, so it ranks before LTO-IR"
                                     : "SASS loads without JIT, so it ranks before PTX";
      return "LTO-IR is optimised across files at link time (built with -dlto for that), so it ranks before PTX";
    case 1: return "SASS for the exact CC ranks first";
    case 2: return "at the exact CC, a SASS ranks before f before plain";
    case 3: return sass ? "the highest compatible minor ranks first" : best[0] == 1 ? "the highest LTO-IR arch ranks first" : "the highest PTX arch ranks first";
    case 4: return sass ? "at the same arch, f SASS ranks before plain" : "at the same arch, a PTX ranks before f before plain";
    case 5:
    case 6: return "the newest PTX ISA ranks first; older ones stay as fallbacks";
    default: return "same rank, the earlier entry ranks first";
  }
}

// How reasons name an entry another reason refers to: "sm_89", "compute_90 (ISA 9.0)".
std::string entry_name(const entry_desc& e) {
  std::string s = e.target.str();
  if (e.target.kind == entry_kind::ptx && e.ptx_isa.known()) s += " (ISA " + e.ptx_isa.str() + ")";
  return s;
}

struct driver_facts {
  int version = 0;     // cuDriverGetVersion format, 0 = unknown
  ptx_isa max_isa;     // {0,0} when unknown
  bool isa_checked() const { return version > 0 && max_isa.known(); }
  // "9.0", or "9.5, extrapolated: ..." for a driver newer than arch_table knows (see there): the
  // user should know when the limit is an assumption.
  std::string limit() const {
    const bool assumed = version > ptx_isa_table().back().cuda_version;
    return max_isa.str() + (assumed ? ", extrapolated for a driver newer than fatpack's table" : "");
  }
  std::string text() const {  // for the nothing-fits paragraph
    if (isa_checked()) return "a CUDA " + cuda_version_str(version) + " driver (PTX ISA up to " + limit() + ")";
    if (version > 0) return "a CUDA " + cuda_version_str(version) + " driver (PTX ISA limit unknown, not checked)";
    return "an unknown driver (PTX ISA not checked)";
  }
};

std::string usable_reason(const entry_desc& e, const device_desc& dev, const driver_facts& drv, int nvjitlink_version) {
  const target& t = e.target;
  if (t.kind == entry_kind::sass) {
    if (t.arch == dev.arch) {
      const char* flavour = t.variant == arch_variant::arch_specific ? "arch-specific "
                            : t.variant == arch_variant::family      ? "family-specific "
                                                                     : "";
      return std::string("exact ") + flavour + "SASS for CC " + cc(dev.arch);
    }
    if (t.variant == arch_variant::family)
      return t.str() + " SASS runs on CC " + cc(dev.arch) + " (a member of the " + std::to_string(t.arch) + "f family)";
    return t.str() + " SASS runs on CC " + cc(dev.arch) + " (same major, lower minor)";
  }
  if (t.kind == entry_kind::ltoir)
    return t.str() + " LTO-IR links for CC " + cc(dev.arch) + " through nvJitLink " + cuda_version_str(nvjitlink_version) +
           (nvjitlink_version > 13000 ? " (assumed to know the CC: newer than fatpack's table)" : "");
  std::string s = t.str() + " PTX (ISA " + (e.ptx_isa.known() ? e.ptx_isa.str() : std::string("unknown")) +
                  ") JIT-compiles for CC " + cc(dev.arch);
  if (drv.isa_checked() && e.ptx_isa.known())
    s += "; the CUDA " + cuda_version_str(drv.version) + " driver accepts up to ISA " + drv.limit();
  else if (drv.version <= 0)
    s += "; driver version unknown, PTX ISA not checked";
  else
    s += "; PTX ISA not checked";
  return s;
}

}  // namespace

selection select(const std::vector<entry_desc>& entries, device_desc device, int driver_version, policy p,
                 int nvjitlink_version) {
  driver_facts drv;
  drv.version = driver_version > 0 ? driver_version : 0;
  drv.max_isa = max_ptx_isa_for_driver(drv.version);

  struct ranked {
    std::size_t entry;
    rank_key key;
  };
  std::vector<ranked> usable;
  std::vector<candidate> rejected;

  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry_desc& e = entries[i];
    const target& t = e.target;
    auto reject = [&](std::string why) { rejected.push_back({i, verdict::rejected, std::move(why)}); };

    if (std::string why = arch_refusal(t, device); !why.empty()) {
      reject(std::move(why));
      continue;
    }
    if (t.kind == entry_kind::ltoir) {
      if (p != policy::prefer_sass) {
        reject(t.str() + " LTO-IR fits CC " + cc(device.arch) + ", but policy " + policy_name(p) +
               (p == policy::force_ptx ? " loads only PTX" : " never JIT-compiles"));
        continue;
      }
      if (nvjitlink_version <= 0) {
        reject(t.str() + " LTO-IR needs nvJitLink, and none is loaded (libnvJitLink.so.13, or FATPACK_NVJITLINK)");
        continue;
      }
      if (!nvjitlink_knows_arch(nvjitlink_version, device.arch)) {
        reject(t.str() + " LTO-IR: nvJitLink " + cuda_version_str(nvjitlink_version) + " cannot link for CC " +
               cc(device.arch) + " (it knows the archs of CUDA " + cuda_version_str(nvjitlink_version) + ")");
        continue;
      }
    }
    if (t.kind == entry_kind::sass && p == policy::force_ptx) {
      reject(t.str() + " SASS fits CC " + cc(device.arch) + ", but policy force_ptx loads only PTX");
      continue;
    }
    if (t.kind == entry_kind::ptx && p == policy::sass_only) {
      reject(t.str() + " PTX fits CC " + cc(device.arch) + ", but policy sass_only never JIT-compiles");
      continue;
    }
    if (t.kind == entry_kind::ptx && drv.isa_checked() && e.ptx_isa.known() && drv.max_isa < e.ptx_isa) {
      reject(t.str() + " PTX ISA " + e.ptx_isa.str() + " needs a CUDA " +
             cuda_version_str(min_driver_for_ptx_isa(e.ptx_isa)) + " driver; the driver is CUDA " +
             cuda_version_str(drv.version) + " (accepts up to ISA " + drv.limit() + ")");
      continue;
    }
    usable.push_back({i, rank_of(e, device)});
  }
  std::stable_sort(usable.begin(), usable.end(), [](const ranked& a, const ranked& b) { return a.key > b.key; });

  selection out;
  out.candidates.reserve(entries.size());
  for (std::size_t r = 0; r < usable.size(); ++r) {
    const entry_desc& e = entries[usable[r].entry];
    std::string reason = usable_reason(e, device, drv, nvjitlink_version);
    if (r > 0)
      reason += "; ranked below " + entry_name(entries[usable[0].entry]) + ": " + rank_rule(usable[0].key, usable[r].key);
    out.candidates.push_back({usable[r].entry, r == 0 ? verdict::chosen : verdict::usable, std::move(reason)});
  }
  if (!usable.empty()) out.chosen = usable.front().entry;
  for (auto& c : rejected) out.candidates.push_back(std::move(c));

  if (!out.chosen) {
    // Entries are named by their reasons, which all start with the target ("sm_80 SASS ..."), not by
    // index: callers select over one module's entries, whose indices differ from the package's.
    std::string s = "no entry can run on CC " + cc(device.arch) + (device.tegra ? " (Tegra)" : "") + " with " +
                    drv.text() + " under policy " + policy_name(p);
    if (entries.empty()) {
      s += ": the module has no entries.";
    } else {
      s += " (" + std::to_string(entries.size()) + (entries.size() == 1 ? " entry" : " entries") + "):";
      for (const auto& c : out.candidates) s += " " + c.reason + ".";
    }
    out.nothing_fits = std::move(s);
  }
  return out;
}

}  // namespace fatpack::core
