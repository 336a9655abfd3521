// Choosing a backend by URL, and URLs fit for messages (remote_store.hpp).
#include "remote/remote_store.hpp"

#include "remote/http_store.hpp"
#include "remote/redis_store.hpp"

namespace fatpack::detail::remote {

std::string redact_url(const std::string& url) {
  std::string out = url;
  const auto scheme_end = out.find("://");
  const std::size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto path_start = out.find_first_of("/?#", host_start);
  const auto at = out.rfind('@', path_start == std::string::npos ? std::string::npos : path_start);
  if (at != std::string::npos && at >= host_start) out.replace(host_start, at - host_start, "***");
  // A query can hold a pre-signed URL's signature or a token.
  if (auto q = out.find('?', host_start); q != std::string::npos) out.replace(q + 1, std::string::npos, "***");
  // Control characters and the like would reach a terminal or a log as they are.
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return out;
}

std::unique_ptr<remote_store> open_store(const store_settings& s, std::string& why) {
  auto starts = [&](const char* p) { return s.url.rfind(p, 0) == 0; };
  if (starts("http://") || starts("https://")) return make_http_store(s, why);
  if (starts("redis://")) return make_redis_store(s, why);
  why = "unsupported URL " + redact_url(s.url) + " (expected http://, https:// or redis://)";
  return nullptr;
}

}  // namespace fatpack::detail::remote
