// fatpack::policy: which entries of a module may be used (docs/design.md §2, docs/selection.md).
//
// One enum for the whole project: the public API (fatpack.hpp: set_policy, load_options, reports)
// and core's selector (fatpack/core/select.hpp, used by the runtime and `fatpack plan`) both take
// it, so nothing maps one policy onto another. This header includes only fatpack/export.h (macros)
// and is installed with the runtime's public headers; core may include it and nothing else of
// runtime/ (scripts/check-layers.py).
#pragma once

#include "fatpack/export.h"

FATPACK_BEGIN_HIDDEN
namespace fatpack {

enum class policy { prefer_sass, force_ptx, sass_only };

// "prefer_sass", "force_ptx", "sass_only".
inline const char* policy_name(policy p) noexcept {
  switch (p) {
    case policy::prefer_sass: return "prefer_sass";
    case policy::force_ptx: return "force_ptx";
    case policy::sass_only: return "sass_only";
  }
  return "unknown";
}

}  // namespace fatpack
FATPACK_END_HIDDEN
