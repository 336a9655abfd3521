// What a remote store holds under a key (docs/cache.md §12.3): a 48-byte envelope, then a cache entry
// file exactly as the local cache writes it (cache/entry.hpp: key texts, sizes, checksums, the
// cubin's SM). The envelope carries an HMAC-SHA256 signature by the node that compiled it:
//
//   0  "FPRS"        magic
//   4  u8 version    1
//   5  u8 kind       0 unsigned, 1 HMAC-SHA256
//   6  u16 reserved  0
//   8  8 bytes       key id: the first 8 bytes of SHA-256("fatpack remote key id\n" + key) (0 unsigned)
//   16 32 bytes      tag: HMAC-SHA256(key, "fatpack remote v1\n" + remote key + "\n" + entry) (0 unsigned)
//   48 ...           the entry
//
// The tag covers the remote key, so a signed entry cannot be replayed under another key; the entry's
// own checks (full key text, checksums, SM) run after, exactly as for a local file. Checksums say
// the bytes are intact; only the signature says who wrote them.
#pragma once

#include "cache/key.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fatpack::detail::remote {

inline constexpr std::size_t envelope_size = 48;

// The remote key of a full cache key: 64 hex digits of SHA-256 over the code key's and the driver
// identity's canonical texts (what bazel-remote's /ac/ and content-addressed stores expect).
std::string remote_key(const cache::full_key& k);

// The envelope + entry for upload; signed when `signing_key` is not empty.
std::vector<std::uint8_t> seal(const std::string& rkey, const std::vector<std::uint8_t>& entry,
                               const std::string& signing_key);

// Checks the envelope. With a signing key: only entries signed with it pass. Without one: any
// well-formed envelope passes (a read-only remote trusts its writers; docs/cache.md §12.4). On
// success returns the offset of the entry; otherwise nullopt and `why`.
std::optional<std::size_t> open_envelope(const std::string& rkey, const std::vector<std::uint8_t>& body,
                                         const std::string& signing_key, std::string& why);

// The key id of a signing key, 16 hex digits (for messages: never the key).
std::string key_id_hex(const std::string& signing_key);

}  // namespace fatpack::detail::remote
