// The HTTP store of a fatpack built without libcurl's headers (CMake found no curl/curl.h): every
// call says so, and how to get one that has it.
#include "remote/http_store.hpp"

namespace fatpack::detail::remote {

namespace {
const char* const k_not_built = "this fatpack was built without libcurl's headers (libcurl4-openssl-dev)";
}

std::unique_ptr<remote_store> make_http_store(const store_settings&, std::string& why) {
  why = k_not_built;
  return nullptr;
}

std::unique_ptr<remote_store> make_http_store_with(const store_settings&, const char*, std::string& why) {
  why = k_not_built;
  return nullptr;
}

}  // namespace fatpack::detail::remote
