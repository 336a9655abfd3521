// Target and version spellings: nvcc's (sm_90a, compute_120f, lto_90) and CUDA's (13.0 = 13000).
#include "fatpack/core/target.hpp"

#include <cctype>
#include <string>

namespace fatpack::core {

const char* kind_name(entry_kind k) noexcept {
  switch (k) {
    case entry_kind::sass: return "sass";
    case entry_kind::ptx: return "ptx";
    case entry_kind::ltoir: return "ltoir";
  }
  return "unknown";
}

std::string target::str() const {
  const char* prefix = kind == entry_kind::sass ? "sm_" : kind == entry_kind::ptx ? "compute_" : "lto_";
  std::string s = prefix + std::to_string(arch);
  if (variant == arch_variant::arch_specific) s += 'a';
  if (variant == arch_variant::family) s += 'f';
  return s;
}

result<target> target::parse(std::string_view text) {
  auto bad = [&] {
    return make_error(errc::invalid_argument, "invalid target '" + std::string(text) +
                                                  "' (expected e.g. sm_90, sm_90a, sm_100f, compute_90, lto_90)");
  };
  target t;
  std::string_view rest;
  for (auto [prefix, kind] : {std::pair<std::string_view, entry_kind>{"sm_", entry_kind::sass},
                              {"compute_", entry_kind::ptx},
                              {"lto_", entry_kind::ltoir}}) {
    if (text.substr(0, prefix.size()) == prefix) {
      t.kind = kind;
      rest = text.substr(prefix.size());
      break;
    }
  }
  if (rest.empty()) return bad();
  std::size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  if (digits < 2 || digits > 4) return bad();
  const std::string_view suffix = rest.substr(digits);
  if (suffix == "a") t.variant = arch_variant::arch_specific;
  else if (suffix == "f") t.variant = arch_variant::family;
  else if (!suffix.empty()) return bad();
  t.arch = std::uint32_t(std::stoul(std::string(rest.substr(0, digits))));
  if (t.arch < 10) return bad();
  return t;
}

std::string ptx_isa::str() const { return std::to_string(major) + "." + std::to_string(minor); }

std::string cuda_version_str(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

result<int> parse_cuda_version(std::string_view text) {
  auto bad = [&] {
    return make_error(errc::invalid_argument, "invalid CUDA version '" + std::string(text) + "' (expected e.g. 12.4 or 13.0)");
  };
  const auto dot = text.find('.');
  const std::string_view maj = text.substr(0, dot), min = dot == std::string_view::npos ? "0" : text.substr(dot + 1);
  auto all_digits = [](std::string_view s) {
    if (s.empty() || s.size() > 2) return false;
    for (char c : s)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  };
  if (!all_digits(maj) || !all_digits(min)) return bad();
  const int major = std::stoi(std::string(maj)), minor = std::stoi(std::string(min));
  if (major < 1 || minor > 9) return bad();
  return major * 1000 + minor * 10;
}

}  // namespace fatpack::core
