// The HTTP(S) backend of the fleet cache (remote_store.hpp): GET/HEAD/PUT of <base>/<key> through
// libcurl, dlopen-ed at first use.
#pragma once

#include "remote/remote_store.hpp"

namespace fatpack::detail::remote {

std::unique_ptr<remote_store> make_http_store(const store_settings& s, std::string& why);

}  // namespace fatpack::detail::remote
