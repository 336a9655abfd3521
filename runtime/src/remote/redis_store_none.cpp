// make_redis_store for a build without the hiredis headers (libhiredis-dev): a redis:// remote is
// refused with a message that says why (runtime/CMakeLists.txt picks this file or redis_store.cpp).
#include "remote/redis_store.hpp"

namespace fatpack::detail::remote {

std::unique_ptr<remote_store> make_redis_store(const store_settings&, std::string& why) {
  why = "this fatpack was built without hiredis headers (libhiredis-dev)";
  return nullptr;
}

}  // namespace fatpack::detail::remote
