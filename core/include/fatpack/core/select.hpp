// Selection: which entry of a module a device should load, and why every other entry was refused.
// A pure function of (entries, device, driver, policy): the runtime, `fatpack plan` and
// FATPACK_LOG=info all call this, so what the tool predicts is what the product does.
// The rules are docs/design.md §2 (docs/selection.md); the facts they use live in arch_table.hpp.
#pragma once

#include "fatpack/core/target.hpp"
#include "fatpack/policy.hpp"   // fatpack::policy: the public API's enum, dependency-free
#include "fatpack/verdict.hpp"  // fatpack::verdict, likewise

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fatpack::core {

struct entry_desc {
  core::target target;
  core::ptx_isa ptx_isa;  // PTX only
};

struct device_desc {
  std::uint32_t arch = 0;  // compute capability as major*10+minor: 90 for CC 9.0, 121 for 12.1
  bool tegra = false;      // Tegra/Jetson: no SASS minor-version compatibility
};

// The public enum itself (fatpack/verdict.hpp): one type, also spelled core::verdict here.
using fatpack::verdict;
using fatpack::verdict_name;

struct candidate {
  std::size_t entry = 0;  // index into the entries given to select()
  core::verdict verdict = verdict::rejected;
  std::string reason;     // one sentence: "exact SASS for CC 9.0", "sm_80 SASS runs only on CC 8.x ..."
};

struct selection {
  // Usable entries first, best first (the first one is `chosen`; the loader falls back along this
  // order), then rejected entries in entry order.
  std::vector<candidate> candidates;
  std::optional<std::size_t> chosen;  // entry index
  // When nothing fits: one paragraph naming the device's CC, the driver's PTX ISA limit and every
  // entry with its reason. Empty otherwise.
  std::string nothing_fits;
};

// driver_version: cuDriverGetVersion() format (13000); 0 = unknown (no PTX ISA check).
// nvjitlink_version: the nvJitLink the runtime loaded, as nvJitLinkVersion() major*1000+minor*10
// (13000 for 13.0); 0 = none loaded, so LTO-IR entries are refused.
selection select(const std::vector<entry_desc>& entries, device_desc device, int driver_version,
                 fatpack::policy p = fatpack::policy::prefer_sass, int nvjitlink_version = 0);

}  // namespace fatpack::core
