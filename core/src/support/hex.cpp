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

}  // namespace fatpack::core
