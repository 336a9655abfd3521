// What `fatpack verify` checks in a parsed package (see input.hpp): the format's own checks, then
// what only the image format can tell, that no SASS entry is a relocatable cubin.
#include "fatpack/core/input.hpp"
#include "fatpack/core/package.hpp"

namespace fatpack::core {

status verify_package_images(const package_view& pkg) {
  if (auto st = pkg.verify(); !st) return st;
  for (std::size_t i = 0; i < pkg.entries().size(); ++i) {
    if (pkg.entries()[i].target.kind != entry_kind::sass) continue;
    auto raw = pkg.decompress(i);
    if (!raw) return raw.error();
    if (auto st = refuse_relocatable_cubin(byte_span(*raw), std::string(pkg.source()) + ": " + pkg.entries()[i].describe());
        !st)
      return st;
  }
  return {};
}

}  // namespace fatpack::core
