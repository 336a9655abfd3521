// PROVISIONAL (wt-http branch): the minimal open_store and redact_url the HTTP backend and its tests
// need; the lead's remote_store.cpp (with the Redis backend) replaces this file.
#include "remote/remote_store.hpp"

#include "remote/http_store.hpp"

#include <algorithm>
#include <cctype>

namespace fatpack::detail::remote {

std::unique_ptr<remote_store> open_store(const store_settings& s, std::string& why) {
  std::string scheme;
  if (const std::size_t colon = s.url.find("://"); colon != std::string::npos && colon <= 16)
    for (std::size_t i = 0; i < colon; ++i) scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(s.url[i])));
  if (scheme == "http" || scheme == "https") return make_http_store(s, why);
  why = "the fleet cache URL " + redact_url(s.url) + " has no supported scheme (http://, https://)";
  return nullptr;
}

std::string redact_url(const std::string& url) {
  const std::size_t colon = url.find("://");
  if (colon == std::string::npos) return "(not a URL)";
  const std::size_t start = colon + 3;
  const std::size_t end = std::min(url.find_first_of("/?#", start), url.size());
  std::string out = url.substr(0, start);
  const std::size_t at = url.rfind('@', end == 0 ? 0 : end - 1);
  out += at != std::string::npos && at >= start ? "***@" + url.substr(at + 1, end - at - 1) : url.substr(start, end - start);
  const std::size_t query = url.find_first_of("?#", end);
  out += url.substr(end, (query == std::string::npos ? url.size() : query) - end);
  if (query != std::string::npos && url[query] == '?') out += "?***";
  return out;
}

}  // namespace fatpack::detail::remote
