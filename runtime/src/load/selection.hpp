// Selection glue: the policy in force (API + environment) and the call into the pure selector that
// `fatpack plan` uses too (core::select), mapped onto a module's entries in its package.
//
// Policy precedence (docs/runtime.md): load_options::policy > FATPACK_FORCE_PTX_JIT=1 >
// CUDA_FORCE_PTX_JIT=1 > CUDA_DISABLE_PTX_JIT=1 > set_policy() > prefer_sass. NVIDIA's two variables
// keep their documented meaning: FORCE ignores binary code and JIT-compiles PTX (a module without
// PTX fails to load); DISABLE never JIT-compiles (a module without compatible SASS fails to load).
#pragma once

#include "registry/registry.hpp"

#include "fatpack/core/select.hpp"
#include "fatpack/fatpack.hpp"

#include <optional>
#include <string>
#include <vector>

namespace fatpack::detail {

policy resolve_policy(std::optional<policy> explicit_policy);
// What fatpack::set_policy (api/settings_api.cpp) sets: the default below the environment.
void set_default_policy(policy p);

// Background upgrade (docs/runtime.md §4, "Newer code in the background"): when the chosen SASS is
// not the device's own (a lower minor, or `f` SASS of another CC) and the module has PTX, run the
// SASS now and JIT the PTX for this device in the background; a later start loads that JIT's SASS
// from the cache. Opt-in: fatpack::set_background_upgrade() wins once called, else
// FATPACK_BACKGROUND_UPGRADE=1, else off.
bool background_upgrade_enabled();
void set_background_upgrade_override(bool on);

struct module_selection {
  core::selection sel;                     // candidate.entry indices are *package* entry indices
  std::vector<candidate_info> candidates;  // the same, for the report
  double ms = 0;
};
// Runs core::select over the module's entries for a device of `arch` and a driver of `driver_version`.
module_selection select_entries(const module_entries& me, std::uint32_t arch, bool tegra, int driver_version,
                                policy p);

}  // namespace fatpack::detail
