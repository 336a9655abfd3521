// Cache entry files (docs/cache.md §3): immutable and self-describing. One file holds a fixed
// 128-byte header (magic, format version, sizes, the code-key hash and driver hash, the cubin's SM,
// XXH3 of the payload and of the cubin, XXH3 of the header itself), the canonical key texts, then the
// cubin: stored as it is (codec 0, what the local cache writes: a hit reads it straight into the
// buffer the driver loads, no decoding) or as blocked LZ4 (codec 1, the package format's payload
// layout, docs/format.md §5: the fleet cache's entries, and the local cache's before format 1.1).
// Every read validates all of it (docs/design.md §3.1); anything wrong is a miss with a reason, never bytes.
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
// The longest key texts a valid entry holds: a reader that has this much of the file (or all of it)
// has the whole header and both texts.
inline constexpr std::size_t max_code_text = 64 * 1024, max_driver_text = 4096;
inline constexpr std::size_t max_entry_front = entry_header_size + max_code_text + max_driver_text;

// How the cubin is stored (the header's codec bits).
enum class entry_codec : std::uint32_t { stored = 0, lz4 = 1 };
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
  std::uint64_t payload_offset() const { return std::uint64_t(header_size) + code_text_size + driver_text_size; }
  entry_codec codec() const { return entry_codec(flags & 0xF); }
};

// SM of a cubin from its ELF header (e_flags) and .nv.compat, as one word; nullopt when the bytes
// are not a cubin fatpack can read (such output is not cached).
std::optional<std::uint32_t> cubin_sm_word(core::byte_span cubin);
std::uint32_t sm_arch(std::uint32_t word);
core::arch_variant sm_variant(std::uint32_t word);  // from the a / f bits

// The whole file for `key` holding `cubin` (stored, or LZ4 HC in 256 KiB blocks); nullopt when the
// cubin is not cacheable (not a readable cubin, too large). `why` says which.
std::optional<std::vector<std::uint8_t>> encode_entry(const full_key& key, core::byte_span cubin,
                                                      std::int64_t created_unix_ns, std::string& why,
                                                      entry_codec codec = entry_codec::lz4);

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

// The same in two steps, for a reader that reads a stored entry's cubin straight into the buffer it
// returns: check_front validates the header and the key texts (`front`: the file's first bytes, at
// least h.payload_offset() of them; `file_size`: the whole file's); check_stored_cubin then the
// cubin of a stored (codec 0) entry, read from the file at h.payload_offset(). An error text, or
// nullopt when all is well; decode_entry runs exactly these checks.
std::optional<std::string> check_front(core::byte_span front, std::uint64_t file_size, const expected_key& want,
                                       entry_header& h, std::string& driver_text);
std::optional<std::string> check_stored_cubin(const entry_header& h, core::byte_span cubin, const expected_key& want);

}  // namespace fatpack::detail::cache
