// The one reader of boolean environment variables (FATPACK_FORCE_PTX_JIT, CUDA_FORCE_PTX_JIT,
// CUDA_DISABLE_PTX_JIT, FATPACK_CACHE_DISABLE, FATPACK_CACHE_READONLY, FATPACK_CACHE_OTHER_DRIVER).
//
// Rule (docs/runtime.md): 1, true, yes, on mean on and 0, false, no, off mean off, in any letter
// case; unset, empty or anything else means the variable's default (`fallback`), so a typo never
// turns a switch on.
#pragma once

#include "platform/os.hpp"

#include <cctype>
#include <optional>
#include <string>

namespace fatpack::detail {

// A variable's value in lower case (empty for null): the variables that take words read them in
// any letter case (these switches, FATPACK_LOG, FATPACK_JIT_BACKEND).
inline std::string lower_word(const char* value) {
  std::string v;
  for (const char* p = value; p && *p; ++p) v += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  return v;
}

// true / false for a recognised word, nullopt otherwise (null, empty, "2", "enabled").
inline std::optional<bool> parse_flag(const char* value) {
  if (!value) return std::nullopt;
  const std::string v = lower_word(value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

inline bool env_flag(const char* name, bool fallback = false) { return parse_flag(os::getenv(name)).value_or(fallback); }

}  // namespace fatpack::detail
