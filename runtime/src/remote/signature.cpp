// Remote envelopes and signatures (signature.hpp).
#include "remote/signature.hpp"

#include "remote/sha256.hpp"

#include <cstring>

namespace fatpack::detail::remote {

namespace {

constexpr char signature_magic[4] = {'F', 'P', 'R', 'S'};
constexpr std::uint8_t version = 1, kind_unsigned = 0, kind_hmac = 1;

std::array<std::uint8_t, 8> key_id(const std::string& key) {
  sha256 h;
  h.update("fatpack remote key id\n");
  h.update(key);
  auto d = h.finish();
  std::array<std::uint8_t, 8> id{};
  std::memcpy(id.data(), d.data(), id.size());
  return id;
}

sha256_digest tag_of(const std::string& key, const std::string& rkey, const std::uint8_t* entry, std::size_t n) {
  return hmac_sha256(key, {"fatpack remote v1\n", rkey, "\n",
                           std::string_view(reinterpret_cast<const char*>(entry), n)});
}

// Compares every byte whatever differs first: the time taken says nothing of where a forged tag
// goes wrong.
bool equal_constant_time(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  std::uint8_t d = 0;
  for (std::size_t i = 0; i < n; ++i) d |= static_cast<std::uint8_t>(a[i] ^ b[i]);
  return d == 0;
}

}  // namespace

std::string remote_key(const cache::full_key& k) {
  sha256 h;
  h.update("fatpack-remote-v1\n");
  h.update(k.code.text);
  h.update("\n");
  h.update(k.driver.text);
  return to_hex(h.finish());
}

std::string key_id_hex(const std::string& signing_key) {
  auto id = key_id(signing_key);
  sha256_digest d{};
  std::memcpy(d.data(), id.data(), id.size());
  return to_hex(d).substr(0, 16);
}

std::vector<std::uint8_t> seal(const std::string& rkey, const std::vector<std::uint8_t>& entry,
                               const std::string& signing_key) {
  std::vector<std::uint8_t> out(envelope_size + entry.size(), 0);
  std::memcpy(out.data(), signature_magic, 4);
  out[4] = version;
  out[5] = signing_key.empty() ? kind_unsigned : kind_hmac;
  if (!signing_key.empty()) {
    auto id = key_id(signing_key);
    std::memcpy(out.data() + 8, id.data(), id.size());
    auto tag = tag_of(signing_key, rkey, entry.data(), entry.size());
    std::memcpy(out.data() + 16, tag.data(), tag.size());
  }
  if (!entry.empty()) std::memcpy(out.data() + envelope_size, entry.data(), entry.size());
  return out;
}

std::optional<std::size_t> open_envelope(const std::string& rkey, const std::vector<std::uint8_t>& body,
                                         const std::string& signing_key, std::string& why) {
  if (body.size() < envelope_size) {
    why = "shorter than its envelope (" + std::to_string(body.size()) + " bytes)";
    return std::nullopt;
  }
  if (std::memcmp(body.data(), signature_magic, 4) != 0) {
    why = "not a fatpack remote entry (bad magic)";
    return std::nullopt;
  }
  if (body[4] != version) {
    why = "envelope version " + std::to_string(body[4]) + " (this fatpack reads 1)";
    return std::nullopt;
  }
  const std::uint8_t kind = body[5];
  if ((kind != kind_unsigned && kind != kind_hmac) || body[6] != 0 || body[7] != 0) {
    why = "unknown envelope kind or flags";
    return std::nullopt;
  }
  if (signing_key.empty()) return envelope_size;
  if (kind == kind_unsigned) {
    why = "unsigned, and this node requires entries signed with its key";
    return std::nullopt;
  }
  auto id = key_id(signing_key);
  if (std::memcmp(body.data() + 8, id.data(), id.size()) != 0) {
    sha256_digest other{};
    std::memcpy(other.data(), body.data() + 8, 8);
    why = "signed with another key (key id " + to_hex(other).substr(0, 16) + ", this node's is " +
          key_id_hex(signing_key) + ")";
    return std::nullopt;
  }
  auto tag = tag_of(signing_key, rkey, body.data() + envelope_size, body.size() - envelope_size);
  if (!equal_constant_time(tag.data(), body.data() + 16, tag.size())) {
    why = "bad signature (altered, or stored under another key)";
    return std::nullopt;
  }
  return envelope_size;
}

}  // namespace fatpack::detail::remote
