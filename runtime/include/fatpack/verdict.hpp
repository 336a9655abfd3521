// fatpack::verdict: the selector's verdict on one entry (docs/selection.md): chosen (the one to
// load), usable (a fallback, in rank order), rejected (cannot run on the device; the reason says why).
//
// One enum for the whole project, like fatpack/policy.hpp: the public load_report and core's selector
// (fatpack/core/select.hpp, where core::verdict names the same type) both use it. This header includes
// only fatpack/export.h (macros); core may include it (scripts/check-layers.py).
#pragma once

#include "fatpack/export.h"

FATPACK_BEGIN_HIDDEN
namespace fatpack {

enum class verdict { chosen, usable, rejected };

// "chosen", "usable", "rejected".
inline const char* verdict_name(verdict v) noexcept {
  switch (v) {
    case verdict::chosen: return "chosen";
    case verdict::usable: return "usable";
    case verdict::rejected: return "rejected";
  }
  return "unknown";
}

}  // namespace fatpack
FATPACK_END_HIDDEN
