// Cache statistics (stats.hpp).
#include "cache/stats.hpp"

namespace fatpack::detail::cache {

counters& stats() {
  static auto* c = new counters();  // leaked: updated by pool threads until exit
  return *c;
}

}  // namespace fatpack::detail::cache
