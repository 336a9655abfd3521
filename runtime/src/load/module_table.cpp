// The module table (see module_table.hpp).
#include "load/module_table.hpp"

#include "platform/log.hpp"

#include <cstdio>

namespace fatpack::detail {

module_table& module_table::instance() {
  static module_table* t = new module_table();  // leaked: modules may be released from static destructors
  return *t;
}

result<std::shared_ptr<module_state>> module_table::get_or_load(const driver& drv, const device& dev,
                                                                const module_entries& me, policy p,
                                                                target_context ctx, bool library, piece_policy pieces) {
  // choose_context gives an own context only with an id (module_table.hpp).
  // A library belongs to no context: one per device.
  const std::string ctx_key = library ? "library " + std::to_string(dev.ordinal)
                              : ctx.has_id ? "ctx " + std::to_string(ctx.id) : "primary " + std::to_string(dev.ordinal);
  // The package object's address identifies it (names are unique in the registry, but a package can
  // only be replaced by a different object).
  char pkg[32];
  std::snprintf(pkg, sizeof pkg, "%p", static_cast<const void*>(me.package.get()));
  std::string key = std::string(pkg) + '\0' +
                    std::string(me.package->view.entries().at(me.entries.front()).module_name) + '\0' +
                    ctx_key + '\0' + policy_name(p) + '\0' + (pieces == piece_policy::off ? "whole" : "pieces");
  std::shared_ptr<slot> s;
  std::uint64_t seen = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& sp = slots_[key];
    if (!sp) sp = std::make_shared<slot>();
    s = sp;
    seen = s->generation;
  }
  // A load (selection, a JIT on this thread) logs; the lines go out after the slot's lock is
  // released, so a log callback never waits for a lock while another loader of this slot waits for it.
  log_deferral defer;
  std::lock_guard<std::mutex> load_lock(s->mu);
  if (auto live = s->loaded.lock()) return live;
  std::uint64_t now = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = s->generation;
  }
  // An attempt finished while this thread waited, and it failed: share its error.
  if (now != seen && s->last_error) return *s->last_error;

  auto r = load_entries(drv, dev, me, p, std::move(ctx), library, pieces);
  if (r) {
    s->loaded = r.value();
    s->last_error.reset();
  } else {
    s->last_error = std::make_shared<const error>(r.error());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++s->generation;
  }
  return r;
}

}  // namespace fatpack::detail
