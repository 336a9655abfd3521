// load_report::trace(): the FATPACK_LOG=info text of one load (format in docs/runtime.md).
//
//   module 'vadd' (package 'app') on device 0 (NVIDIA H200, CC 9.0): driver CUDA 13.0, PTX ISA <= 9.0, policy prefer_sass
//     candidate entry 4 sm_90: chosen: exact SASS for CC 9.0
//     candidate entry 0 sm_75: rejected: sm_75 SASS runs only on CC 7.x ...
//     try entry 4 sm_90: ok (decompress 0.012 ms, load 0.110 ms)
//     loaded entry 4 sm_90 (SASS): exact SASS for CC 9.0 [select 0.004 ms, context 0.002 ms, decompress 0.012 ms, jit 0.000 ms, load 0.110 ms, total 0.150 ms]
#include "fatpack/fatpack.hpp"

#include "fatpack/core/target.hpp"

#include <cstdio>

namespace fatpack {

namespace {

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", v);
  return buf;
}

std::string indent_log(const std::string& log) {
  std::string out;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t nl = log.find('\n', pos);
    out += "      | " + log.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) + "\n";
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

}  // namespace

std::string load_report::trace() const {
  std::string s = "module '" + module + "' (package '" + package + "') on device " + std::to_string(device) + " (" +
                   (device_name.empty() ? "unnamed" : device_name) + ", CC " + std::to_string(arch / 10) + "." +
                   std::to_string(arch % 10) + "): driver CUDA " + core::cuda_version_str(driver_version) +
                   ", PTX ISA <= " + (max_ptx_isa.empty() ? "?" : max_ptx_isa) + ", policy " + policy_name(policy) + "\n";
  for (const auto& c : candidates)
    s += "  candidate entry " + std::to_string(c.entry) + " " + c.target + ": " + verdict_name(c.verdict) + ": " + c.reason + "\n";
  for (const auto& a : attempts) {
    s += "  try entry " + std::to_string(a.entry) + " " + a.target + ": ";
    if (a.ok) {
      s += "ok (";
      // A reuse says where from, as the `loaded` line does: the JIT cache (its path names the layer,
      // e.g. "culink (cache user)"; a module in pieces has its own line below) or a compile earlier
      // in this process.
      const bool layer_named = !a.jit_path.empty() && a.jit_path != "pieces";
      if (a.jit && a.jit_reused)
        s += "JIT reused " + ms(a.jit_ms) +
             (a.jit_from_cache ? " from the JIT cache" + (layer_named ? ", " + a.jit_path : std::string())
                               : std::string(" from this process's compile")) + ", ";
      else if (a.jit)
        s += "JIT " + ms(a.jit_ms) + (a.jit_path.empty() ? "" : " via " + a.jit_path) + ", ";
      s += "decompress " + ms(a.decompress_ms) + ", load " + ms(a.load_ms) + ")\n";
    } else {
      s += "refused: " + a.message + "; trying the next candidate\n";
    }
    if (!a.log.empty() && !a.ok) s += indent_log(a.log);
  }
  if (!upgrade.empty()) s += "  background upgrade: " + upgrade + "\n";
  if (!pieces.empty()) s += "  kernel-granular JIT: " + pieces + " (split " + ms(split_ms) + ")\n";
  std::string phases = "[select " + ms(select_ms) + ", context " + ms(context_ms) + ", decompress " + ms(decompress_ms) + ", jit " + ms(jit_ms) +
                       ", load " + ms(load_ms) + ", total " + ms(total_ms) + "]";
  if (loaded) {
    // An LTO-IR group's target starts with lto_ (describe_target): linked by nvJitLink, not from PTX.
    const std::string from = target.rfind("lto_", 0) == 0 ? "LTO-IR" : "PTX";
    // ", SASS reused" stays the prefix (scripts match it); where the SASS came from follows, so a
    // JIT cache hit reads apart from a compile earlier in this process.
    const std::string reused = std::string(", SASS reused") + (jit_from_cache ? " from the JIT cache" : "");
    s += "  loaded entry " + std::to_string(entry) + " " + target +
         (jit ? (jit_reused ? " (JIT from " + from + reused + ")" : " (JIT from " + from + ")") : std::string(" (SASS)")) +
         ": " + reason + " " + phases;
  } else if (attempts.empty() && !candidates.empty() && candidates.front().verdict != verdict::rejected) {
    s += "  planned entry " + std::to_string(candidates.front().entry) + " " + candidates.front().target + ": " +
         candidates.front().reason;
  } else if (attempts.empty()) {
    s += "  failed: no entry can run on this device " + phases;
  } else {
    s += "  failed: every usable entry was refused " + phases;
  }
  return s;
}

}  // namespace fatpack
