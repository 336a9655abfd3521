// The context loaded code is used in (see code_context.hpp).
#include "api/code_context.hpp"

namespace fatpack::detail {

result<CUcontext> code_context(const module_state& s) {
  const driver& d = *s.drv;
  if (!s.lib) {
    if (auto alive = s.check_context(); !alive) return alive.error();
    return s.ctx.ctx;
  }
  CUcontext cur = nullptr;
  CUdevice cur_dev = 0;
  if (d.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && d.cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS &&
      cur_dev == s.dev->handle)
    return cur;
  // No context on the library's device here: its primary context, which keep_primary_context holds
  // for the process (the reference taken here goes at once; the kept one stays).
  if (auto k = keep_primary_context(d, *s.dev); !k) return k.error();
  auto pc = primary_context::retain(d, *s.dev);
  if (!pc) return std::move(pc).error();
  return pc->get();
}

std::string code_where(const module_state& s) {
  return "module '" + s.module_name + "' (package '" + s.package->name + "', " + s.report.target + ") on " +
         s.dev->identify() + ", driver " + s.drv->identify();
}

}  // namespace fatpack::detail
