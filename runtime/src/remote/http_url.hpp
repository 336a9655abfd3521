// An HTTP(S) store's base URL taken apart (http_store.cpp, and redact_url for messages): the parts a
// request needs (scheme, host, path, query) apart from the parts that are secrets (user info, and the
// query, which carries a pre-signed URL's signature or a SAS token). Only http:// and https://.
#pragma once

#include <string>

namespace fatpack::detail::remote {

struct http_url {
  std::string scheme;     // "http" or "https" (lower case)
  std::string authority;  // host[:port], as written ("[::1]:8080" for IPv6)
  std::string path;       // "" or "/base/dir", never ending with '/'
  std::string query;      // after '?', without it; appended to every request's URL (secret)
  std::string user, password;  // from "user:password@", percent-decoded (secret)
  bool has_user_info = false;

  // The URL of `key` under the base: scheme://authority/path/key[?query] (no user info: credentials
  // go to libcurl separately, never in a URL it could print).
  std::string url_of(const std::string& key) const;
  // For messages: scheme://authority/path, with "?***" when there is a query. No secret.
  std::string describe() const;
};

// Parses `url`; false and `why` (which never repeats the user info or the query) when it is not an
// http:// or https:// URL with a host. Bounded: a URL longer than 8 KiB is refused.
bool parse_http_url(const std::string& url, http_url& out, std::string& why);

}  // namespace fatpack::detail::remote
