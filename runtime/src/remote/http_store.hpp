// The HTTP(S) backend of the fleet cache (remote_store.hpp, docs/cache.md §12): GET, HEAD and PUT of
// `<base>/<key>` through libcurl, which is dlopen-ed ("libcurl.so.4") at the first store made, so a
// product that configures no remote never loads it (the runtime links no libcurl; <curl/curl.h> is
// used at compile time for types only). Built without curl's headers, make_http_store only says so.
//
// Requests: get_many runs its GETs in parallel on one curl multi handle (200 hit, 404/410 miss, any
// other status a fault); put_if_absent sends HEAD (200: exists), then PUT with "If-None-Match: *"
// (200/201/204 stored, 412 exists); leases are unsupported. Redirects are not followed; proxies come
// from the environment (libcurl's http_proxy, https_proxy, all_proxy, no_proxy).
#pragma once

#include "remote/remote_store.hpp"

#include <memory>
#include <string>

namespace fatpack::detail::remote {

// A store for `s.url` (http:// or https://), or null and `why` (the URL does not parse, libcurl is
// not installed: the message names the package, credentials given twice). Never throws.
std::unique_ptr<remote_store> make_http_store(const store_settings& s, std::string& why);

// For tests: the same, loading libcurl from `library` instead of "libcurl.so.4" (a name that does
// not exist shows the message a machine without libcurl gets). Not cached: each call dlopens.
std::unique_ptr<remote_store> make_http_store_with(const store_settings& s, const char* library, std::string& why);

}  // namespace fatpack::detail::remote
