// The process's table of loaded modules: one loaded CUmodule per (package, module, context, policy),
// shared by every handle. The context is keyed by its cuCtxGetId, not its address: a destroyed
// context's address can come back as a new context, whose modules are new ones. Without cuCtxGetId
// (a driver that lacks it) only primary contexts are used (choose_context), keyed by their device:
// fatpack holds a reference on each, so it stays the same context. Policy: the table holds weak references, so the last
// fatpack::module handle unloads the module; a load that finds a live module returns it without
// loading (choosing the context takes a few driver calls: current context, its id).
// Loads of the same key from several threads are serialised on a per-key mutex: the first one
// loads (and compiles), the others receive its module, or its error when they were waiting for that
// very attempt (so a failing JIT is not repeated once per waiting thread).
#pragma once

#include "load/loader.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace fatpack::detail {

class module_table {
 public:
  static module_table& instance();
  result<std::shared_ptr<module_state>> get_or_load(const driver& drv, const device& dev, const module_entries& me,
                                                    policy p, target_context ctx, bool library = false,
                                                    piece_policy pieces = piece_policy::off);

 private:
  struct slot {
    std::mutex mu;                       // held while loading
    std::weak_ptr<module_state> loaded;  // guarded by mu
    std::uint64_t generation = 0;        // attempts completed; guarded by module_table::mu_
    std::shared_ptr<const error> last_error;  // of the last attempt; guarded by mu
  };
  module_table() = default;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<slot>> slots_;
};

}  // namespace fatpack::detail
