// Cache keys (docs/design.md §3.2), in two tiers:
//  - the code key: everything that decides what SASS is valid — the PTX bytes (XXH3 + size), the PTX
//    target and ISA, the target CC with its a/f letter, every JIT option, the JIT path, and the
//    cache format version. Its canonical text is stored in each entry; its XXH3-128 names the file.
//  - the driver identity: cuDriverGetVersion plus the driver build string (from
//    /proc/driver/nvidia/version where present; FATPACK_DRIVER_VERSION_FILE overrides the path, a
//    test seam). An exact hit matches both; same code key + other driver is still valid SASS.
// Never file times: a key is a pure function of its inputs.
#pragma once

#include "cache/sass_cache.hpp"

#include "fatpack/core/hex.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fatpack::detail::cache {

inline constexpr std::uint16_t format_major = 1;  // also in the directory name (v1/)
inline constexpr std::uint16_t format_minor = 2;  // 1.1: stored entries (codec 0); 1.2: stored cubins 64-byte aligned

struct code_key {
  std::array<std::uint8_t, 16> hash{};  // XXH3-128 of text, big-endian (high 64 bits first)
  std::string text;                     // canonical: "v1|culink|ptx=<xxh3>:<size>|src=...|cc=90a|opt=..."
  std::string hex() const;              // 32 hex digits
  std::uint64_t lo64() const;           // first 8 bytes, for hashing into the index
};

struct driver_id {
  std::uint64_t hash = 0;               // XXH3-64 of text
  std::string text;                     // "13000|580.159.04" or "13000" without a build string
  std::string hex() const;              // 16 hex digits
};

struct full_key {
  code_key code;
  driver_id driver;
  // The entry's file name: "<code hex>-<driver hex>.fpc".
  std::string file_name() const;
};

code_key make_code_key(const jit_key& k);
// The code key of a canonical text (as stored in an entry).
code_key code_key_of_text(std::string text);
// A stored code key text as a message shows it ("entry holds another key (...)"). fatpack::compile's
// keys (compile_api.cpp cache_key_of) put other things in the JIT key's fields (ptx=: the hash and
// size of the source key's own text; src=: a placeholder; opt=source=: the key's XXH3-128): quoted,
// they read as a PTX key. Such a text, exactly as that function makes it, is named by its kind, its
// hash (compile_report::cache_key) and target: "NVRTC source key <32 hex>, sm_90", or "NVRTC
// PTX-path JIT key ..." for the PTX path's key. Any other text is quoted: printable, at most `limit`
// bytes (a planted one may be 64 KiB).
std::string describe_code_text(std::string_view text, std::size_t limit = 160);
// What a stored code key text is: the JIT of a PTX entry (its format and back end), one of
// fatpack::compile's keys (exactly as it makes them), or unknown (not a text this version writes);
// `name`, for fatpack::compile's: how describe_code_text names it.
enum class code_text_kind { ptx_jit, nvrtc_source, nvrtc_ptx_jit, unknown };
code_text_kind read_code_text(std::string_view text, std::string* name = nullptr);
// The driver identity for a cuDriverGetVersion value: adds this machine's driver build string
// (read once per process).
driver_id make_driver_id(int driver_version);
driver_id make_driver_id(int driver_version, const std::string& build);
full_key make_full_key(const jit_key& k);

// The build string of the NVIDIA kernel module ("580.159.04") from the text of
// /proc/driver/nvidia/version; "" when it is not in the expected form.
std::string parse_driver_build(const std::string& proc_version_text);
// The build string of this machine, read once (FATPACK_DRIVER_VERSION_FILE, else
// /proc/driver/nvidia/version); "" when absent.
const std::string& machine_driver_build();

// Parses "<32 hex>-<16 hex>.fpc"; false for any other name.
bool parse_file_name(const std::string& name, std::array<std::uint8_t, 16>& code, std::uint64_t& driver);

}  // namespace fatpack::detail::cache
