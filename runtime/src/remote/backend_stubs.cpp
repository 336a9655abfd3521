// TEMPORARY until the backends land: both backends report that they are not built.
#include "remote/http_store.hpp"
#include "remote/redis_store.hpp"

namespace fatpack::detail::remote {

std::unique_ptr<remote_store> make_http_store(const store_settings&, std::string& why) {
  why = "the HTTP backend is not built";
  return nullptr;
}
std::unique_ptr<remote_store> make_redis_store(const store_settings&, std::string& why) {
  why = "the Redis backend is not built";
  return nullptr;
}

}  // namespace fatpack::detail::remote
