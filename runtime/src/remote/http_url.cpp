// Base URLs of HTTP stores (see http_url.hpp).
#include "remote/http_url.hpp"

#include <cctype>
#include <cstddef>

namespace fatpack::detail::remote {

namespace {

constexpr std::size_t k_max_url = 8192;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 percent-decoding of the user info ("p%40ss" -> "p@ss"); false on a bad escape or a
// decoded control character (it would end up in an Authorization header).
bool percent_decode(const std::string& in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
    out += c;
  }
  return true;
}

bool is_printable_ascii(const std::string& s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  return true;
}

}  // namespace

std::string http_url::url_of(const std::string& key) const {
  std::string out = scheme + "://" + authority + path + "/" + key;
  if (!query.empty()) out += "?" + query;
  return out;
}

std::string http_url::describe() const {
  std::string out = scheme + "://" + authority + path;
  if (!query.empty()) out += "?***";
  return out;
}

bool parse_http_url(const std::string& url, http_url& out, std::string& why) {
  out = http_url{};
  if (url.size() > k_max_url) {
    why = "the URL is " + std::to_string(url.size()) + " characters long, more than " + std::to_string(k_max_url);
    return false;
  }
  const std::size_t colon = url.find("://");
  if (colon == std::string::npos) {
    why = "not a URL (no scheme://)";
    return false;
  }
  for (std::size_t i = 0; i < colon; ++i) out.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(url[i])));
  if (out.scheme != "http" && out.scheme != "https") {
    why = "the scheme '" + out.scheme.substr(0, 16) + "' is not http or https";
    return false;
  }
  // The fragment is never sent; the query is kept apart (it may hold a signature).
  std::string rest = url.substr(colon + 3);
  if (const std::size_t hash = rest.find('#'); hash != std::string::npos) rest.resize(hash);
  if (const std::size_t q = rest.find('?'); q != std::string::npos) {
    out.query = rest.substr(q + 1);
    rest.resize(q);
  }
  const std::size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? std::string() : rest.substr(slash);
  // User info: everything before the last '@' of the authority (a password may hold '@' unescaped).
  if (const std::size_t at = authority.rfind('@'); at != std::string::npos) {
    const std::string info = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const std::size_t sep = info.find(':');
    if (!percent_decode(info.substr(0, sep), out.user) ||
        (sep != std::string::npos && !percent_decode(info.substr(sep + 1), out.password))) {
      why = "the URL's user info is not valid percent-encoding";  // never repeated: it is a secret
      return false;
    }
    out.has_user_info = true;
  }
  if (authority.empty()) {
    why = "the URL has no host";
    return false;
  }
  if (!is_printable_ascii(authority) || !is_printable_ascii(path) || !is_printable_ascii(out.query)) {
    why = "the URL holds spaces or characters outside printable ASCII (percent-encode them)";
    return false;
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  out.authority = authority;
  out.path = path;
  return true;
}

}  // namespace fatpack::detail::remote
