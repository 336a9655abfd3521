// The one place that wires the cache into the JIT service: the public API calls this before anything
// that can compile (load_module, warm), so the disk cache from the environment is in place for the
// first compile and never built by a getter (cache_status, fatpack_cache_path) or by the JIT service.
#pragma once

#include "cache/disk_cache.hpp"
#include "remote/remote_cache.hpp"

#include <memory>

namespace fatpack::detail {

// Installs the disk cache configured by the environment unless a cache is installed already.
void wire_default_cache();
// The same when the JIT first asks for the cache (jit/service.hpp arm_sass_cache): what a load
// calls, so that loading SASS never opens (or creates) the cache directory.
void arm_default_cache();
// The installed disk cache, or null (none installed yet, disabled, or another cache installed).
std::shared_ptr<cache::disk_cache> active_disk_cache();
// The installed fleet cache layer, or null (none configured).
std::shared_ptr<remote::remote_cache> active_remote_cache();
// fatpack::set_cache_remote.
status set_remote(const remote_cache_options& o);

}  // namespace fatpack::detail
