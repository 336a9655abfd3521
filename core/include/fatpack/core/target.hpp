// What an entry is built for: kind (SASS, PTX, LTO-IR) x architecture x variant (plain, a, f),
// spelled the way nvcc spells it: sm_90, sm_90a, sm_100f, compute_90, compute_120f, lto_90.
#pragma once

#include "fatpack/core/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace fatpack::core {

enum class entry_kind : std::uint8_t { sass = 1, ptx = 2, ltoir = 3 };
enum class arch_variant : std::uint8_t { plain = 0, arch_specific = 1 /* a */, family = 2 /* f */ };

const char* kind_name(entry_kind k) noexcept;  // "sass", "ptx", "ltoir"
const char* variant_suffix(arch_variant v) noexcept;  // "", "a", "f"

struct target {
  entry_kind kind = entry_kind::sass;
  std::uint32_t arch = 0;  // major*10 + minor: 75, 90, 100, 120 (CC 12.1 -> 121)
  arch_variant variant = arch_variant::plain;

  std::uint32_t major() const { return arch / 10; }
  std::uint32_t minor() const { return arch % 10; }
  std::string str() const;  // "sm_90a", "compute_90", "lto_100f"
  // Parses "sm_90", "sm_90a", "sm_100f", "compute_90", "compute_120f", "lto_90".
  static result<target> parse(std::string_view text);
  friend bool operator==(const target& a, const target& b) {
    return a.kind == b.kind && a.arch == b.arch && a.variant == b.variant;
  }
  friend bool operator!=(const target& a, const target& b) { return !(a == b); }
};

// The one spelling of SASS for `arch`: sm_90, sm_90a, sm_100f (= target{sass, arch, v}.str()).
std::string sm_name(std::uint32_t arch, arch_variant v = arch_variant::plain);

// A GPU's compute capability as a user names it: "sm_86", "compute_86", "86" or "8.6" (also
// "sm_8.6") -> 86; two to four digits, or MAJOR.MINOR with a one-digit minor; the result is at
// least 10 (CC 1.0). A GPU is a compute capability and a or f name code, not devices, so a suffix
// (sm_90a, 100f) is an error unless `suffix` is cc_suffix::ignore (then sm_90a -> 90). Errors read
// "'TEXT' is not a compute capability (...)".
enum class cc_suffix { reject, ignore };
result<std::uint32_t> parse_compute_capability(std::string_view text, cc_suffix suffix = cc_suffix::reject);
// 86 -> "8.6", 120 -> "12.0".
std::string cc_str(std::uint32_t arch);

// A PTX ISA version (".version 9.0" -> {9, 0}); {0, 0} means "not PTX / unknown".
struct ptx_isa {
  std::uint16_t major = 0;
  std::uint16_t minor = 0;
  bool known() const { return major != 0 || minor != 0; }
  std::string str() const;  // "9.0"
  friend bool operator<(ptx_isa a, ptx_isa b) { return a.major != b.major ? a.major < b.major : a.minor < b.minor; }
  friend bool operator<=(ptx_isa a, ptx_isa b) { return !(b < a); }
  friend bool operator==(ptx_isa a, ptx_isa b) { return a.major == b.major && a.minor == b.minor; }
};

// CUDA version as cuDriverGetVersion() reports it: 13000 = 13.0, 12040 = 12.4. 0 = unknown.
std::string cuda_version_str(int version);         // "13.0"
result<int> parse_cuda_version(std::string_view);  // "13.0" -> 13000, "12.4" -> 12040

}  // namespace fatpack::core
