// The fleet cache's store seam (docs/cache.md §12): a remote key-value store of cache entries that
// already exists somewhere (an HTTP file server, WebDAV, bazel-remote, an object store; Redis). The
// remote layer (remote_cache.hpp) decides what to look up, checks and signs what it gets and puts;
// a store only moves bytes. Two backends implement it: HTTP(S) through libcurl (http_store.hpp) and
// Redis through hiredis (redis_store.hpp), both dlopen-ed at first use, so a product that does not
// configure a remote loads neither.
//
// Contract for implementations:
//  - every call may come from several threads at once; none throws; none blocks longer than the
//    configured timeouts (connect + transfer) per request, whatever the server does;
//  - errors are values: a miss is not an error; a fault (connection refused, timeout, 5xx, refused
//    authentication, a body larger than the bound, a truncated body) is `fault` with a message that
//    names the store and the key but never a secret (a password, a token, a URL's user info);
//  - a body is never larger than `max_body` (the transfer is stopped and it is a fault);
//  - keys are 64 lower-case hex digits (remote_key.hpp): safe in a URL path and as a Redis key.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fatpack::detail::remote {

enum class outcome {
  hit,       // get: the body is in `body`
  miss,      // get: no such key (HTTP 404, Redis nil)
  stored,    // put: written
  exists,    // put_if_absent: the key was there already (nothing written)
  acquired,  // lease: this process holds it now
  held,      // lease: another node holds it
  fault,     // anything else: `message` says what (one warning and a miss for the layer above)
  unsupported,  // the backend cannot do this (lease over HTTP)
};

struct reply {
  outcome what = outcome::fault;
  std::vector<std::uint8_t> body;  // get: the bytes
  std::string message;             // fault/unsupported: why, for one warning (no secrets)
};

struct store_settings {
  std::string url;                   // as configured; may hold user info (never logged as is)
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds transfer_timeout{3000};  // per request, connect included
  std::uint64_t max_body = 256ull << 20;
  // HTTP authentication (none, or exactly one): "Authorization: Bearer <token>" or basic user/password.
  std::string bearer_token;
  std::string basic_user, basic_password;
  std::string ca_file;               // HTTPS: a CA bundle instead of the system's ("" = system)
};

class remote_store {
 public:
  virtual ~remote_store() = default;
  // Several keys at once (Redis MGET; parallel HTTP requests): one reply per key, in order.
  virtual std::vector<reply> get_many(const std::vector<std::string>& keys) noexcept = 0;
  reply get(const std::string& key) noexcept { return std::move(get_many({key}).at(0)); }
  // Publish once: writes `body` unless the key exists (Redis SET NX; HTTP HEAD, then PUT with
  // If-None-Match: *). `stored` or `exists`, or a fault.
  virtual reply put_if_absent(const std::string& key, const std::vector<std::uint8_t>& body) noexcept = 0;
  // A compile lease across nodes (Redis SET NX PX): `acquired` or `held`; `unsupported` where the
  // store has none (HTTP). `owner` names this node and process (for an operator reading the store).
  virtual reply lease(const std::string& key, const std::string& owner, std::chrono::milliseconds ttl) noexcept = 0;
  // Releases a lease this process holds (best effort: the TTL ends it anyway).
  virtual void release(const std::string& key, const std::string& owner) noexcept = 0;
  // For messages: the URL without user info or password ("redis://cache:6379/0", "https://host/base").
  virtual std::string describe() const = 0;
};

// The store for `s.url` (http://, https://, redis://), or a fault reply's message in `why` (an unknown
// scheme, a URL that does not parse, the client library not installed: the message names the package).
std::unique_ptr<remote_store> open_store(const store_settings& s, std::string& why);

// The URL with its user info (and a Redis password) replaced by "***", for messages.
std::string redact_url(const std::string& url);

}  // namespace fatpack::detail::remote
