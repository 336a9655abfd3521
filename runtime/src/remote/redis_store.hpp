// The Redis backend of the fleet cache's store seam (remote_store.hpp, docs/cache.md §12b): entries are
// Redis strings under their 64-hex keys, read with MGET, published once with SET NX; a compile lease is
// `SET lease:<key> <owner> NX PX <ttl>`. LRU is the server's business (maxmemory-policy).
//
// hiredis is dlopen-ed at the first make_redis_store, by the exact soname of the headers this file was
// compiled against (libhiredis.so.0.14 on Debian bookworm): the runtime links no hiredis, and a product
// that configures no Redis remote never loads it.
#pragma once

#include <memory>
#include <string>

#include "remote/remote_store.hpp"

namespace fatpack::detail::remote {

// A store for `s.url`, redis://[[user]:password@]host[:port][/db] (port 6379 and db 0 by default; db
// 0-15; host a name, an IPv4 address or a bracketed IPv6 address; the user and password may be
// percent-encoded). Opens no connection yet: the first call does. Null, and `why` (without the
// password), when the URL is not such a URL or hiredis cannot be loaded.
std::unique_ptr<remote_store> make_redis_store(const store_settings& s, std::string& why);

}  // namespace fatpack::detail::remote
