// Fleet cache settings (docs/cache.md §12), from the environment or fatpack::set_cache_remote:
//   FATPACK_CACHE_REMOTE=URL               https://host/base, http://..., redis://[:password@]host:port/db
//   FATPACK_CACHE_REMOTE_MODE=read-only|read-write   (default read-only)
//   FATPACK_CACHE_REMOTE_KEY=FILE          signing key (HMAC-SHA256): uploads are signed with it and
//                                          entries without a valid signature are refused
//   FATPACK_CACHE_REMOTE_TRUST_ALL_WRITERS=1   allows a read-write remote without a key: whoever
//                                          can write the store can then run code on every node
//   FATPACK_CACHE_REMOTE_CONNECT_TIMEOUT_MS=n  (default 500)
//   FATPACK_CACHE_REMOTE_TIMEOUT_MS=n      per request, connect included (default 3000)
//   FATPACK_CACHE_REMOTE_LEASE_MS=n        Redis: a node compiling a key holds a lease of n ms, and
//                                          other nodes wait for its entry instead of compiling too
//                                          (default 0: off)
//   FATPACK_CACHE_REMOTE_CREDENTIALS=FILE  HTTP: a line "bearer TOKEN" or "basic USER:PASSWORD"
//   FATPACK_CACHE_REMOTE_TOKEN=TOKEN       HTTP bearer token (the credentials file wins)
//   FATPACK_CACHE_REMOTE_CA_FILE=FILE      HTTPS: CA bundle instead of the system's
//   FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS=n   how long an exiting process waits for its uploads
//                                          (default 5000)
// Proxies come from the usual http_proxy / https_proxy / no_proxy variables (libcurl reads them).
#pragma once

#include "remote/remote_store.hpp"

#include "fatpack/fatpack.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::detail::remote {

struct remote_config {
  store_settings store;               // url "" = no remote
  bool read_write = false;
  std::string key;                    // signing key bytes ("" = none); never logged
  std::string key_file;               // where it came from (for messages)
  bool trust_all_writers = false;
  std::chrono::milliseconds lease{0};
  std::chrono::milliseconds exit_flush{5000};
  std::vector<std::string> problems;  // settings refused or unreadable: each one warning, and no remote

  bool enabled() const { return !store.url.empty() && problems.empty(); }
};

// Reads the environment (and the key and credentials files it names). Problems go to `problems`.
remote_config remote_config_from_env();

// Reads a key file: a regular file (not a symlink), owned by this user or root, not readable by
// group or others, 32 bytes to 4 KiB (trailing whitespace dropped). An error text, or "" when fine.
std::string read_key_file(const std::string& path, std::string& key);
// Reads a credentials file ("bearer TOKEN" or "basic USER:PASSWORD", one line; same file checks as
// a key file). An error text, or "".
std::string read_credentials_file(const std::string& path, store_settings& s);
// The settings of fatpack::set_cache_remote (and the CLI's --remote options), checked: key and
// credentials files read, check_config applied, the URL's scheme known. Problems go to `problems`.
remote_config config_from_options(const remote_cache_options& o);
// Checks a configuration's coherence: a read-write remote needs a key or trust_all_writers.
void check_config(remote_config& c);

}  // namespace fatpack::detail::remote
