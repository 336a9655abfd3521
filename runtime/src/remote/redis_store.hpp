// The Redis backend of the fleet cache (remote_store.hpp): MGET, SET NX, leases by SET NX PX, through
// hiredis, dlopen-ed at first use by the exact soname of the headers it was built with.
#pragma once

#include "remote/remote_store.hpp"

namespace fatpack::detail::remote {

std::unique_ptr<remote_store> make_redis_store(const store_settings& s, std::string& why);

}  // namespace fatpack::detail::remote
