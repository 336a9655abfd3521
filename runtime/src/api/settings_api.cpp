// The public API's process-wide settings (fatpack.hpp): the default policy, the JIT back end and
// logging.
#include "jit/service.hpp"
#include "load/selection.hpp"
#include "platform/log.hpp"

#include "fatpack/fatpack.hpp"

namespace fatpack {

void set_policy(policy p) { detail::set_default_policy(p); }
policy effective_policy() { return detail::resolve_policy(std::nullopt); }
void set_background_upgrade(bool on) { detail::set_background_upgrade_override(on); }
bool background_upgrade() { return detail::background_upgrade_enabled(); }

void set_jit_backend(jit_backend b) { detail::set_jit_backend_override(b); }

void set_log_level(log_level level) { detail::set_log_threshold(level); }
log_level get_log_level() { return detail::log_threshold(); }
void set_log_callback(std::function<void(log_level, std::string_view)> callback) {
  detail::set_log_sink(std::move(callback));
}

}  // namespace fatpack
