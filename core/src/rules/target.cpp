// Target and version spellings: nvcc's (sm_90, sm_90a, sm_100f, compute_120f, lto_90) and CUDA's
// version numbers (cuDriverGetVersion's 13000 = "13.0").
//
// Policy: parsing is strict, so that a typo on a command line or in a build file is an error that
// names the text instead of a silently different target. str() and parse() round-trip exactly:
// there is one spelling per target (no leading zeros, lower-case suffix).
#include "fatpack/core/target.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace fatpack::core {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A decimal number of 1..max_digits digits without a leading zero (except "0" itself when
// allow_zero). No std::stoul: it accepts signs and spaces and throws on overflow.
bool parse_small_uint(std::string_view s, std::size_t max_digits, bool allow_zero, std::uint32_t* out) {
  if (s.empty() || s.size() > max_digits) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  if (s[0] == '0' && !(allow_zero && s.size() == 1)) return false;
  std::uint32_t v = 0;
  for (char c : s) v = v * 10 + std::uint32_t(c - '0');
  *out = v;
  return true;
}

}  // namespace

const char* kind_name(entry_kind k) noexcept {
  switch (k) {
    case entry_kind::sass: return "sass";
    case entry_kind::ptx: return "ptx";
    case entry_kind::ltoir: return "ltoir";
  }
  return "unknown";
}

const char* variant_suffix(arch_variant v) noexcept {
  switch (v) {
    case arch_variant::arch_specific: return "a";
    case arch_variant::family: return "f";
    case arch_variant::plain: break;
  }
  return "";
}

std::string target::str() const {
  const char* prefix = kind == entry_kind::sass ? "sm_" : kind == entry_kind::ptx ? "compute_" : "lto_";
  return prefix + std::to_string(arch) + variant_suffix(variant);
}

std::string sm_name(std::uint32_t arch, arch_variant v) { return target{entry_kind::sass, arch, v}.str(); }

std::string cc_str(std::uint32_t arch) { return std::to_string(arch / 10) + "." + std::to_string(arch % 10); }

result<std::uint32_t> parse_compute_capability(std::string_view text, cc_suffix suffix) {
  auto bad = [&](const char* why) {
    return make_error(errc::invalid_argument, "'" + std::string(text) + "' is not a compute capability (" + why +
                                                  "; expected e.g. sm_86, 86 or 8.6)");
  };
  std::string_view t = text;
  for (std::string_view prefix : {std::string_view("sm_"), std::string_view("compute_")})
    if (t.substr(0, prefix.size()) == prefix) {
      t.remove_prefix(prefix.size());
      break;
    }
  if (!t.empty() && (t.back() == 'a' || t.back() == 'f')) {
    if (suffix == cc_suffix::reject) return bad("an a or f suffix names code, not a GPU");
    t.remove_suffix(1);
  }
  auto digits = [](std::string_view s, std::size_t lo, std::size_t hi, std::uint32_t* out) {
    if (s.size() < lo || s.size() > hi) return false;
    std::uint32_t v = 0;
    for (char c : s) {
      if (!is_digit(c)) return false;
      v = v * 10 + std::uint32_t(c - '0');
    }
    *out = v;
    return true;
  };
  // What failed, said as it is: sm_0 and sm_99999 are numbers, of the wrong length.
  auto all_digits = [](std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); };
  std::uint32_t v = 0;
  if (const std::size_t dot = t.find('.'); dot != std::string_view::npos) {
    std::uint32_t major = 0, minor = 0;
    if (!all_digits(t.substr(0, dot)) || !all_digits(t.substr(dot + 1))) return bad("not a number");
    if (!digits(t.substr(0, dot), 1, 3, &major) || !digits(t.substr(dot + 1), 1, 1, &minor))
      return bad("a major of 1 to 3 digits and a minor of 1 digit");
    v = major * 10 + minor;
  } else if (!all_digits(t)) {
    return bad("not a number");
  } else if (!digits(t, 2, 4, &v)) {
    return bad("2 to 4 digits: major and minor");
  }
  if (v < 10) return bad("below 1.0");
  return v;
}

result<target> target::parse(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "invalid target '" + std::string(text) + "': " + why +
                          " (expected sm_XY, compute_XY or lto_XY with an optional a or f suffix, e.g. sm_90, sm_90a, "
                          "sm_100f, compute_120f, lto_90)");
  };
  target t;
  std::string_view rest;
  bool matched = false;
  for (const auto& [prefix, kind] : {std::pair<std::string_view, entry_kind>{"sm_", entry_kind::sass},
                                     {"compute_", entry_kind::ptx},
                                     {"lto_", entry_kind::ltoir}}) {
    if (text.substr(0, prefix.size()) == prefix) {
      t.kind = kind;
      rest = text.substr(prefix.size());
      matched = true;
      break;
    }
  }
  if (!matched) return bad("unknown prefix");
  if (rest.empty()) return bad("no architecture number");

  std::string_view number = rest;
  if (rest.back() == 'a' || rest.back() == 'f') {
    t.variant = rest.back() == 'a' ? arch_variant::arch_specific : arch_variant::family;
    number = rest.substr(0, rest.size() - 1);
  }
  // Two or three digits: major*10+minor with a major of 1..99 (sm_75 ... sm_121, sm_200).
  if (number.size() < 2 || !parse_small_uint(number, 3, false, &t.arch)) return bad("not an architecture number");
  // nvcc has arch-specific targets from sm_90a and family targets from sm_100f on; anything older
  // does not exist and is a typo.
  if (t.variant == arch_variant::arch_specific && t.arch < 90)
    return bad("arch-specific (a) targets start at 90");
  if (t.variant == arch_variant::family && t.arch < 100) return bad("family (f) targets start at 100");
  return t;
}

std::string ptx_isa::str() const { return std::to_string(major) + "." + std::to_string(minor); }

std::string cuda_version_str(int version) {
  if (version <= 0) return "unknown";
  // cuDriverGetVersion: 1000*major + 10*minor.
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

result<int> parse_cuda_version(std::string_view text) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      "invalid CUDA version '" + std::string(text) + "' (expected MAJOR or MAJOR.MINOR, e.g. 12.4 or 13.0)");
  };
  const std::size_t dot = text.find('.');
  const std::string_view maj = text.substr(0, dot);
  std::uint32_t major = 0, minor = 0;
  if (!parse_small_uint(maj, 2, false, &major)) return bad();
  if (dot != std::string_view::npos) {
    const std::string_view min = text.substr(dot + 1);
    // Minor 0..99: the encoding has room for two digits (12.10 would be 12100).
    if (!parse_small_uint(min, 2, true, &minor)) return bad();
  }
  return int(major * 1000 + minor * 10);
}

}  // namespace fatpack::core
