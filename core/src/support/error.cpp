// Names of error codes, as they appear in diagnostics and in the C API's error strings. They are
// part of the interface (tests and scripts match on them): never rename one, only add.
#include "fatpack/core/error.hpp"

namespace fatpack::core {

const char* errc_name(errc code) noexcept {
  switch (code) {
    case errc::io: return "io";
    case errc::truncated: return "truncated";
    case errc::bad_magic: return "bad_magic";
    case errc::unsupported_version: return "unsupported_version";
    case errc::malformed: return "malformed";
    case errc::checksum: return "checksum";
    case errc::codec: return "codec";
    case errc::unknown_kind: return "unknown_kind";
    case errc::unsupported: return "unsupported";
    case errc::invalid_argument: return "invalid_argument";
  }
  // A value outside the enum (e.g. cast from a corrupted integer): still a valid C string.
  return "unknown";
}

}  // namespace fatpack::core
