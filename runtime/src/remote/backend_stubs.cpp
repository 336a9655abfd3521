// TEMPORARY until the backends land: the Redis backend reports that they are not built.
#include "remote/redis_store.hpp"

namespace fatpack::detail::remote {

std::unique_ptr<remote_store> make_redis_store(const store_settings&, std::string& why) {
  why = "the Redis backend is not built";
  return nullptr;
}

}  // namespace fatpack::detail::remote
