// The public API's process-wide settings (fatpack.hpp): the default policy, the JIT back end and
// logging.
#include "jit/service.hpp"
#include "load/pieces.hpp"
#include "load/selection.hpp"
#include "platform/log.hpp"

#include "fatpack/fatpack.hpp"

namespace fatpack {

void set_policy(policy p) { detail::set_default_policy(p); }
policy effective_policy() { return detail::resolve_policy(std::nullopt); }
void set_background_upgrade(bool on) { detail::set_background_upgrade_override(on); }
bool background_upgrade() { return detail::background_upgrade_enabled(); }

void set_jit_pieces(jit_pieces mode) {
  detail::set_piece_policy_override(mode == jit_pieces::off         ? detail::piece_policy::off
                                    : mode == jit_pieces::on_demand ? detail::piece_policy::on_demand
                                                                    : detail::piece_policy::background);
}
jit_pieces get_jit_pieces() {
  switch (detail::piece_policy_in_use()) {
    case detail::piece_policy::off: return jit_pieces::off;
    case detail::piece_policy::on_demand: return jit_pieces::on_demand;
    case detail::piece_policy::background: break;
  }
  return jit_pieces::background;
}

void set_jit_backend(jit_backend b) { detail::set_jit_backend_override(b); }

void set_log_level(log_level level) { detail::set_log_threshold(level); }
log_level get_log_level() { return detail::log_threshold(); }
void set_log_callback(std::function<void(log_level, std::string_view)> callback) {
  detail::set_log_sink(std::move(callback));
}

}  // namespace fatpack
