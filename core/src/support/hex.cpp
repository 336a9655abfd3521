// Hex formatting (fatpack/core/hex.hpp).
#include "fatpack/core/hex.hpp"

namespace fatpack::core {
namespace {
constexpr char digits[] = "0123456789abcdef";
}  // namespace

std::string hex_bytes(const std::uint8_t* p, std::size_t n) {
  std::string s(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

std::string hex16(std::uint64_t v) {
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[std::size_t(i)] = digits[v & 15];
  return s;
}

std::string hex(std::uint64_t v) {
  std::string s = hex16(v);
  const std::size_t first = s.find_first_not_of('0');
  return "0x" + (first == std::string::npos ? std::string("0") : s.substr(first));
}

std::string printable_text(std::string_view s, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  if (s.size() > limit) out += "...";
  return out;
}

std::string terminal_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += (c < 0x20 && c != '\t') || c == 0x7f ? '?' : static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, the second byte's range from RFC 3629
    // (no overlong forms, no surrogates, nothing past U+10FFFF), the rest continuation bytes.
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c == 0xe0) n = 3, lo = 0xa0;
    else if (c >= 0xe1 && c <= 0xef) n = 3, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c == 0xf0) n = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) n = 4;
    else if (c == 0xf4) n = 4, hi = 0x8f;
    bool ok = n != 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = k == 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xbf;
    }
    if (ok && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) <= 0x9f) ok = false;  // C1: U+0080..U+009F
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

}  // namespace fatpack::core
