// Selection glue (see selection.hpp).
#include "load/selection.hpp"

#include "platform/clock.hpp"
#include "platform/env.hpp"
#include "jit/nvjitlink.hpp"

#include <atomic>

namespace fatpack::detail {

namespace {

std::atomic<int> g_default_policy{static_cast<int>(policy::prefer_sass)};
std::atomic<int> g_background_upgrade{-1};  // -1: not set by the API, the environment decides

}  // namespace

void set_default_policy(policy p) { g_default_policy.store(static_cast<int>(p)); }

policy resolve_policy(std::optional<policy> explicit_policy) {
  if (explicit_policy) return *explicit_policy;
  if (env_flag("FATPACK_FORCE_PTX_JIT") || env_flag("CUDA_FORCE_PTX_JIT")) return policy::force_ptx;
  if (env_flag("CUDA_DISABLE_PTX_JIT")) return policy::sass_only;
  return static_cast<policy>(g_default_policy.load());
}

bool background_upgrade_enabled() {
  const int v = g_background_upgrade.load();
  if (v >= 0) return v != 0;
  return env_flag("FATPACK_BACKGROUND_UPGRADE");
}

void set_background_upgrade_override(bool on) { g_background_upgrade.store(on ? 1 : 0); }

module_selection select_entries(const module_entries& me, std::uint32_t arch, bool tegra, int driver_version,
                                policy p) {
  module_selection out;
  stopwatch sw;
  const auto& es = me.package->view.entries();
  std::vector<core::entry_desc> descs;
  descs.reserve(me.entries.size());
  bool ltoir = false;
  for (std::size_t i : me.entries) {
    descs.push_back(core::entry_desc{es[i].target, es[i].ptx_isa});
    ltoir = ltoir || es[i].target.kind == core::entry_kind::ltoir;
  }
  core::device_desc dev;
  dev.arch = arch;
  dev.tegra = tegra;
  // LTO-IR is usable only through nvJitLink, whose version tells the selector which CCs it can link
  // for. Loading it (a dlopen of a large library: 6 ms on the H200's host, once per process) is paid
  // only when an LTO-IR entry could be the one loaded: not when SASS fits the device, which ranks
  // before LTO-IR. Then the LTO-IR entries stay unranked, and a refused SASS falls back to the PTX.
  out.sel = core::select(descs, dev, driver_version, p, 0);
  const bool sass_chosen = out.sel.chosen && descs[*out.sel.chosen].target.kind == core::entry_kind::sass;
  if (ltoir && sass_chosen) {
    for (auto& c : out.sel.candidates)
      if (descs[c.entry].target.kind == core::entry_kind::ltoir)
        c.reason = descs[c.entry].target.str() + " LTO-IR not considered: SASS fits the device, so nvJitLink was not loaded";
  } else if (ltoir) {
    if (const auto& lib = load_nvjitlink(); lib)
      out.sel = core::select(descs, dev, driver_version, p, int((*lib)->major * 1000 + (*lib)->minor * 10));
  }
  // Map the selector's indices (into `descs`) back to package entry indices.
  for (auto& c : out.sel.candidates) c.entry = me.entries.at(c.entry);
  if (out.sel.chosen) out.sel.chosen = me.entries.at(*out.sel.chosen);
  out.ms = sw.ms();
  for (const auto& c : out.sel.candidates)
    out.candidates.push_back(candidate_info{c.entry, describe_target(es[c.entry]), c.verdict, c.reason});
  return out;
}

}  // namespace fatpack::detail
