// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the fleet cache: remote keys are SHA-256 hex
// (what bazel-remote and most content-addressed stores expect of a key) and remote entries are signed
// with HMAC-SHA256 (signature.hpp). Small and dependency-free on purpose: the runtime links no crypto
// library, and these two functions are all it needs. Not constant-time beyond what HMAC requires
// (the comparison of tags is; see signature.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fatpack::detail::remote {

using sha256_digest = std::array<std::uint8_t, 32>;

class sha256 {
 public:
  sha256();
  void update(const void* data, std::size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  sha256_digest finish();

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t used_ = 0;
  std::uint64_t total_ = 0;
};

sha256_digest sha256_of(const void* data, std::size_t size);
inline sha256_digest sha256_of(std::string_view s) { return sha256_of(s.data(), s.size()); }
std::string to_hex(const sha256_digest& d);

// HMAC-SHA256 over the concatenation of `parts` (so a caller signs a key and a body without copying).
sha256_digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);

}  // namespace fatpack::detail::remote
