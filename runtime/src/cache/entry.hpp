// Cache entry files (docs/cache.md §3): immutable and self-describing. One file holds a fixed
// 128-byte header (magic, format version, sizes, the code-key hash and driver hash, the cubin's SM,
// XXH3 of the payload and of the cubin, XXH3 of the header itself), the canonical key texts, then the
// cubin as blocked LZ4 (the package format's payload layout, docs/format.md §5). Every read validates all of it (docs/design.md §3.1); anything wrong is a miss
// with a reason, never bytes.
#pragma once

#include "cache/key.hpp"

#include "fatpack/core/error.hpp"
#include "fatpack/core/target.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

inline constexpr std::size_t entry_header_size = 128;
inline constexpr std::uint64_t max_cubin_bytes = 1ull << 30;  // larger cubins are not cached

struct entry_header {
  std::uint16_t major = 0, minor = 0;
  std::uint32_t header_size = 0;
  std::uint32_t flags = 0;
  std::uint32_t code_text_size = 0, driver_text_size = 0;
  std::uint32_t sm = 0;                   // sm_word(): arch | 0x10000 (a) | 0x20000 (f)
  std::array<std::uint8_t, 16> code_hash{};
  std::uint64_t driver_hash = 0;
  std::uint64_t cubin_size = 0, payload_size = 0;
  std::uint64_t payload_xxh3 = 0, cubin_xxh3 = 0;
  std::int64_t created_unix_ns = 0;
  std::uint32_t block_size = 0;           // of the blocked LZ4 payload (docs/format.md §5)
  std::uint64_t file_size() const { return header_size + code_text_size + driver_text_size + payload_size; }
};

// SM of a cubin from its ELF header (e_flags) and .nv.compat, as one word; nullopt when the bytes
// are not a cubin fatpack can read (such output is not cached).
std::optional<std::uint32_t> cubin_sm_word(core::byte_span cubin);
std::uint32_t sm_arch(std::uint32_t word);
core::arch_variant sm_variant(std::uint32_t word);  // from the a / f bits

// The whole file for `key` holding `cubin` (LZ4 HC, 256 KiB blocks); nullopt when the cubin is not cacheable
// (not a readable cubin, too large). `why` says which.
std::optional<std::vector<std::uint8_t>> encode_entry(const full_key& key, core::byte_span cubin,
                                                      std::int64_t created_unix_ns, std::string& why);

// Parses and checks the header (magic, major version, unknown flags, header checksum, sizes against
// `file_size`). An error text, or nullopt when it is fine.
std::optional<std::string> parse_header(core::byte_span bytes, std::uint64_t file_size, entry_header& h);

struct expected_key {
  const code_key* code = nullptr;        // required
  const driver_id* driver = nullptr;     // null: any driver (an other-driver hit)
  std::uint32_t target_arch = 0;         // the SM the cubin must be for (0: not checked)
};

// Validates a whole entry file against the key and returns its cubin; on failure nullopt and
// `problem` says what (for logs and `fatpack cache verify`). Reads the key texts too (`driver_text`).
std::optional<std::vector<std::uint8_t>> decode_entry(core::byte_span file, const expected_key& want,
                                                      entry_header& h, std::string& driver_text, std::string& problem);

}  // namespace fatpack::detail::cache
