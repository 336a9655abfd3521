// The C++ API (fatpack/fatpack.hpp): thin glue over driver, devices, registry, selection, loader, JIT.
#include "fatpack/fatpack.hpp"

#include "api/wiring.hpp"
#include "jit/service.hpp"
#include "load/kernel_lookup.hpp"
#include "load/loader.hpp"
#include "load/module_table.hpp"
#include "load/selection.hpp"
#include "platform/device.hpp"
#include "platform/log.hpp"
#include "registry/registry.hpp"

#include <algorithm>
#include <condition_variable>
#include <iterator>
#include <mutex>

namespace fatpack {

namespace detail {

struct module_access {
  static module make(std::shared_ptr<module_state> s) { return module(std::move(s)); }
  static library make_library(std::shared_ptr<module_state> s) { return library(std::move(s)); }
  static const std::shared_ptr<module_state>& state(const module& m) { return m.state_; }
  static std::shared_ptr<warm_handle::state>& state(warm_handle& w) { return w.state_; }
};

}  // namespace detail

struct warm_handle::state {
  std::vector<std::shared_ptr<detail::jit_task>> tasks;
  status failed;  // why nothing could be queued (no driver, no packages)
};

// ---- version --------------------------------------------------------------------------------------

int version() noexcept { return FATPACK_VERSION_NUMBER; }
const char* version_string() noexcept { return FATPACK_VERSION_STRING; }

// ---- driver and devices -------------------------------------------------------------------------

status init() {
  const auto& d = detail::load_devices();
  if (!d) return d.error();
  return detail::usable_in_this_process(*(*d)->drv);
}

result<int> driver_version() {
  const auto& d = detail::load_driver();
  if (!d) return d.error();
  return (*d)->version;
}

std::string driver_library() { return detail::driver_path(); }

result<int> device_count() {
  const auto& d = detail::load_devices();
  if (!d) return d.error();
  return static_cast<int>((*d)->devices.size());
}

result<device_info> device(int ordinal) {
  const auto& d = detail::load_devices();
  if (!d) return d.error();
  if (ordinal < 0) return error{errc::invalid_device, 0, "device " + std::to_string(ordinal) + " does not exist", {}};
  auto dev = detail::pick_device(**d, ordinal);
  if (!dev) return std::move(dev).error();
  return (*dev)->info();
}

result<void*> driver_entry_point(const char* symbol, int cuda_version) {
  if (!symbol || !*symbol) return error{errc::invalid_argument, 0, "driver_entry_point: empty symbol name", {}};
  const auto& d = detail::load_driver();
  if (!d) return d.error();
  // 0: cuda.h 13.0's ABI, or the driver's own where the driver is older (a 12.x driver refuses a
  // request for 13000, and it has no 13.0 entry points to give).
  if (cuda_version == 0) cuda_version = std::min(13000, (*d)->version);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = (*d)->get_proc(symbol, &fn, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT, &q);
  if (r != CUDA_SUCCESS || !fn)
    return detail::cuda_error(errc::driver_symbol_missing, r,
                              (*d)->path + ": driver entry point " + symbol + " (CUDA " +
                                  core::cuda_version_str(cuda_version) + " ABI) not found");
  return fn;
}

void set_jit_threads(unsigned n) { detail::jit_service::instance().set_threads(n); }

// ---- registry ------------------------------------------------------------------------------------

status add_package_file(const std::string& path) { return detail::registry::instance().add_file(path); }

status add_package_memory(const void* data, std::size_t size, std::string_view source, ownership own) {
  return detail::registry::instance().add_memory(data, size, source, own);
}

status add_image(const void* data, std::size_t size, std::string_view module_name, std::string_view package_name) {
  return detail::registry::instance().add_image(data, size, module_name, package_name);
}

result<std::vector<package_info>> packages() {
  auto ps = detail::registry::instance().packages();
  if (!ps) return std::move(ps).error();
  std::vector<package_info> out;
  for (const auto& p : *ps) {
    package_info i;
    i.name = p->name;
    i.source = p->source;
    i.entries = p->view.entries().size();
    i.modules = p->modules;
    out.push_back(std::move(i));
  }
  return out;
}

// ---- modules -------------------------------------------------------------------------------------

namespace {

struct resolved {
  const detail::device_set* set = nullptr;
  const detail::device* dev = nullptr;
  detail::module_entries me;
  policy pol = policy::prefer_sass;
};

// A fork() child of the process that initialised CUDA: an error, checked before any lock is taken
// (the parent's threads may have held them at fork time).
status usable_here() {
  const auto& d = detail::load_driver();
  if (!d) return {};  // no driver: the caller reports that
  return detail::usable_in_this_process(**d);
}

result<resolved> resolve(std::string_view module_name, const load_options& options) {
  if (module_name.empty()) return error{errc::invalid_argument, 0, "load_module: empty module name", {}};
  if (auto s = usable_here(); !s) return s.error();
  // The registry first: "no packages" is the more useful message when both are missing.
  auto me = detail::registry::instance().find_module(module_name, options.package);
  if (!me) return std::move(me).error();
  const auto& ds = detail::load_devices();
  if (!ds) {
    error e = ds.error();
    e.message = "cannot load module '" + std::string(module_name) + "': " + e.message;
    return e;
  }
  auto dev = detail::pick_device(**ds, options.device);
  if (!dev) return std::move(dev).error();
  resolved r;
  r.set = *ds;
  r.dev = *dev;
  r.me = std::move(me.value());
  r.pol = detail::resolve_policy(options.policy);
  return r;
}

}  // namespace

result<module> load_module(std::string_view module_name, const load_options& options) {
  auto r = resolve(module_name, options);
  if (!r) return std::move(r).error();
  detail::arm_default_cache();  // opened if the load needs the JIT
  const detail::driver& drv = *r->set->drv;
  auto ctx = detail::choose_context(drv, *r->dev);
  if (!ctx) {
    error e = ctx.error();
    e.message = "cannot load module '" + std::string(module_name) + "': " + e.message;
    return e;
  }
  const bool thread_had_none = ctx->thread_had_none;
  CUcontext primary = ctx->primary ? ctx->ctx : nullptr;
  const detail::piece_policy pieces =
      !options.pieces ? detail::piece_policy_in_use()
      : *options.pieces == jit_pieces::off       ? detail::piece_policy::off
      : *options.pieces == jit_pieces::on_demand ? detail::piece_policy::on_demand
                                                 : detail::piece_policy::background;
  auto st = detail::module_table::instance().get_or_load(drv, *r->dev, r->me, r->pol, std::move(ctx.value()), false, pieces);
  if (!st) return std::move(st).error();
  // A thread without a current context gets the device's primary context, the one the module is in
  // (as cudart's first call does), so that cuLaunchKernel right after the load finds it. A thread
  // with a context keeps it.
  if (thread_had_none && primary) {
    CUresult cr = drv.cuCtxSetCurrent(primary);
    if (cr != CUDA_SUCCESS)
      return detail::cuda_error(errc::cuda, cr,
                                "module '" + std::string(module_name) + "' loaded on " + r->dev->identify() +
                                    ", but its primary context could not be made current: " +
                                    drv.call_failed("cuCtxSetCurrent", cr) + " (driver " + drv.identify() + ")");
  }
  return detail::module_access::make(std::move(st.value()));
}

result<library> load_library(std::string_view module_name, const load_options& options) {
  auto r = resolve(module_name, options);
  if (!r) return std::move(r).error();
  const detail::driver& drv = *r->set->drv;
  if (!drv.cuLibraryLoadData || !drv.cuLibraryGetKernel || !drv.cuKernelGetFunction || !drv.cuLibraryUnload)
    return error{errc::driver_symbol_missing, 0,
                 "cannot load module '" + std::string(module_name) + "' as a library on " + r->dev->identify() +
                     ": the driver " + drv.identify() +
                     " has no cuLibraryLoadData (CUDA 12.0); use load_module, whose modules work with every driver",
                 {}};
  detail::arm_default_cache();  // opened if the load needs the JIT
  detail::target_context none;  // a library belongs to no context
  auto st = detail::module_table::instance().get_or_load(drv, *r->dev, r->me, r->pol, std::move(none), true);
  if (!st) return std::move(st).error();
  return detail::module_access::make_library(std::move(st.value()));
}

namespace {

// "kernel 'k' in module 'm' (package 'p', sm_90) on device 0 (...), driver ...: <call failed>; the
// module has: ..." (a driver call on a kernel that resolve_kernel found in the entry's list).
error kernel_error(const detail::module_state& s, std::string_view query, const std::string& symbol, const char* call,
                   CUresult r) {
  return detail::cuda_error(r == CUDA_ERROR_NOT_FOUND ? errc::not_found : errc::cuda, r,
                            detail::kernel_where(s, query) + (symbol == query ? "" : " (symbol " + symbol + ")") +
                                ": " + s.drv->call_failed(call, r) + "; the module has: " +
                                core::list_kernels(detail::kernel_names(s), false));
}

// The symbol to ask the driver for: the one resolve_kernel found in the entry's kernel list; for a
// name that is not in the list, the name itself (a list that missed a kernel must not hide one the
// driver has; when the driver does not know it either, resolve_kernel's error is returned), except
// a name with a NUL byte, which the driver would read cut short.
result<std::string> symbol_to_ask(const detail::module_state& s, std::string_view query, result<std::string>& resolved) {
  resolved = detail::resolve_kernel(s, query);
  if (resolved) return *resolved;
  if (resolved.error().code == errc::not_found && query.find('\0') == std::string_view::npos) return std::string(query);
  return resolved.error();
}

// Entries of module::function's cache keyed by the caller's spelling: bounded, so that a caller
// asking with ever new spellings cannot grow it without end (past the bound, lookups still work).
std::size_t function_cache_limit(const detail::module_state& s) { return 4 * s.kernels.size() + 16; }

}  // namespace

result<cu_kernel> library::kernel(std::string_view name) const {
  if (!state_) return error{errc::invalid_argument, 0, "kernel(): empty library handle", {}};
  result<std::string> resolved = std::string();
  auto symbol = symbol_to_ask(*state_, name, resolved);
  if (!symbol) return std::move(symbol).error();
  CUkernel k = nullptr;
  CUresult r = state_->drv->cuLibraryGetKernel(&k, state_->lib, symbol->c_str());
  if (r != CUDA_SUCCESS || !k) {
    if (!resolved) return std::move(resolved).error();
    return kernel_error(*state_, name, *symbol, "cuLibraryGetKernel", r);
  }
  return k;
}

result<cu_function> library::function(std::string_view name) const {
  auto k = kernel(name);
  if (!k) return std::move(k).error();
  CUfunction f = nullptr;
  CUresult r = state_->drv->cuKernelGetFunction(&f, *k);
  if (r != CUDA_SUCCESS || !f) return kernel_error(*state_, name, std::string(name), "cuKernelGetFunction", r);
  return f;
}

cu_library library::handle() const noexcept { return state_ ? state_->lib : nullptr; }

result<load_report> plan_module(std::string_view module_name, const load_options& options) {
  auto r = resolve(module_name, options);
  if (!r) return std::move(r).error();
  return detail::plan_entries(*r->dev, r->me, r->pol);
}

result<cu_function> module::function(std::string_view kernel) const {
  if (!state_) return error{errc::invalid_argument, 0, "function(): empty module handle", {}};
  auto& s = *state_;
  if (auto alive = s.check_context(); !alive) return alive.error();
  std::string name(kernel);
  detail::log_deferral defer;  // a lookup may log; the lines go out after s.mu is released
  std::unique_lock<std::mutex> lock(s.mu);
  auto it = s.functions.find(name);
  if (it != s.functions.end()) return it->second;
  result<std::string> resolved = std::string();
  auto symbol = symbol_to_ask(s, kernel, resolved);
  if (!symbol) return std::move(symbol).error();
  CUfunction f = nullptr;
  if (auto known = s.functions.find(*symbol); known != s.functions.end()) {
    f = known->second;
  } else {
    CUmodule mod = s.mod;
    if (s.pieces) {
      // Kernel-granular JIT: the kernel's own piece, compiled and loaded without the module's lock
      // (another thread may be asking for a kernel of another piece meanwhile).
      const std::uint32_t piece = s.pieces->find(*symbol);
      if (piece != detail::piece_set::none) {
        lock.unlock();
        auto m = detail::load_piece(*s.pieces, piece, s.ctx.ctx);
        if (!m) return std::move(m).error();
        lock.lock();
        mod = *m;
      }
    }
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (mod) {
      detail::scoped_context current(*s.drv, s.ctx.ctx);
      r = s.drv->cuModuleGetFunction(&f, mod, symbol->c_str());
    }
    if (r != CUDA_SUCCESS || !f) {
      if (!resolved) return std::move(resolved).error();
      return kernel_error(s, kernel, *symbol, "cuModuleGetFunction", r);
    }
    s.functions.emplace(*symbol, f);
  }
  if (name != *symbol && s.functions.size() < function_cache_limit(s)) s.functions.emplace(std::move(name), f);
  return f;
}

cu_module module::handle() const noexcept { return state_ ? state_->mod : nullptr; }
cu_context module::context() const noexcept { return state_ ? state_->ctx.ctx : nullptr; }
bool module::primary_context() const noexcept { return state_ && state_->ctx.primary; }

status module::check() const {
  if (!state_) return error{errc::invalid_argument, 0, "check(): empty module handle", {}};
  return state_->check_context();
}
int loaded_code::device() const noexcept { return state_ ? state_->dev->ordinal : -1; }

const std::string& loaded_code::package_name() const noexcept {
  static const std::string empty;
  return state_ ? state_->package->name : empty;
}
const std::string& loaded_code::name() const noexcept {
  static const std::string empty;
  return state_ ? state_->module_name : empty;
}
std::vector<std::string> loaded_code::kernels() const { return state_ ? state_->kernels : std::vector<std::string>{}; }
const load_report& loaded_code::report() const noexcept {
  static const load_report empty;
  return state_ ? state_->report : empty;
}

// ---- warm-up -------------------------------------------------------------------------------------

warm_handle warm(const warm_options& options) {
  warm_handle h;
  auto st = std::make_shared<warm_handle::state>();
  detail::module_access::state(h) = st;
  if (auto s = usable_here(); !s) {
    st->failed = s.error();
    return h;
  }
  auto ps = detail::registry::instance().packages();
  if (!ps) {
    st->failed = ps.error();
    return h;
  }
  const auto& ds = detail::load_devices();
  if (!ds) {
    st->failed = ds.error();
    return h;
  }
  if (options.device < -1 || options.device >= static_cast<int>((*ds)->devices.size())) {
    // Before, warmed every device (-2) or none (an ordinal past the last) without a word.
    st->failed = error{errc::invalid_device, 0,
                       "warm: device " + std::to_string(options.device) + " does not exist (-1 means every device; " +
                           std::to_string((*ds)->devices.size()) + " device(s) present)",
                       {}};
    return h;
  }
  detail::arm_default_cache();  // opened if a module needs the JIT
  policy pol = detail::resolve_policy(std::nullopt);
  // Every compile of every module first, then queued largest first across modules (a program that
  // warms many modules waits for the sum of their JITs over the threads, not for a large piece of
  // the last module queued).
  std::vector<detail::jit_request> all;
  for (const auto& p : *ps) {
    if (!options.package.empty() && p->name != options.package) continue;
    for (const auto& m : p->modules) {
      const detail::module_entries me = detail::entries_of_module(p, m);
      const auto& es = p->view.entries();
      for (const auto& dev : (*ds)->devices) {
        if (options.device >= 0 && dev.ordinal != options.device) continue;
        auto sel = detail::select_entries(me, dev.arch, dev.tegra, dev.driver_version, pol);
        if (!sel.sel.chosen) continue;
        const auto& e = es.at(*sel.sel.chosen);
        if (e.target.kind != core::entry_kind::ptx) continue;  // SASS needs no compile
        detail::jit_request req;
        req.package = p;
        req.entry = *sel.sel.chosen;
        req.drv = (*ds)->drv;
        req.dev = &dev;
        req.module = m;
        // As load_module will compile it: in pieces where it splits them (load/pieces.hpp).
        auto reqs = detail::requests_as_loaded(req);
        if (!reqs) {
          if (st->failed.ok()) st->failed = std::move(reqs).error();
          continue;
        }
        detail::log_line(log_level::debug, "warm: queueing " + m + " (" + detail::describe_target(e) + ", " +
                                               std::to_string(reqs->size()) + " compile(s)) for " + dev.identify());
        all.insert(all.end(), std::make_move_iterator(reqs->begin()), std::make_move_iterator(reqs->end()));
      }
    }
  }
  detail::largest_first(all);
  for (const auto& one : all) {
    auto task = detail::jit_service::instance().enqueue(one);
    if (!task) {
      if (st->failed.ok()) st->failed = std::move(task).error();
      continue;
    }
    st->tasks.push_back(std::move(task.value()));
  }
  return h;
}

bool warm_handle::done() const {
  if (!state_) return true;
  for (const auto& t : state_->tasks) {
    if (!detail::jit_task_done(t)) return false;
  }
  return true;
}

status warm_handle::wait() const {
  if (!state_) return {};
  status first = state_->failed;
  if (auto s = usable_here(); !s) return first.ok() ? s : first;
  for (const auto& t : state_->tasks) {
    auto r = detail::jit_service::instance().wait(t);
    if (!r) {
      detail::log_line(log_level::warn, "warm-up: " + r.error().message);
      if (first.ok()) first = r.error();
    }
  }
  return first;
}

std::size_t warm_handle::jobs() const { return state_ ? state_->tasks.size() : 0; }

}  // namespace fatpack
