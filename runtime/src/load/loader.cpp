// The loader (see loader.hpp for the policy).
#include "load/loader.hpp"

#include "platform/clock.hpp"
#include "jit/service.hpp"
#include "platform/log.hpp"
#include "platform/os.hpp"
#include "load/selection.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/input.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace fatpack::detail {

namespace {

// Large entries are decompressed on several threads (independent blocks, docs/format.md); the
// codec keeps small ones on the calling thread.
unsigned decompress_threads() {
  static const unsigned n = std::min(8u, std::max(1u, os::hardware_threads()));
  return n;
}

std::string where(const device& dev, const module_entries& me) {
  // The driver too: a load error is reported from machines nobody here can see (issue 10).
  const int v = dev.driver_version;
  return "module '" + std::string(me.package->view.entries().at(me.entries.front()).module_name) + "' of package '" +
         me.package->name + "' on " + dev.identify() + ", driver CUDA " + std::to_string(v / 1000) + "." +
         std::to_string(v % 1000 / 10) + " (" + std::to_string(v) + ")";
}

struct load_outcome {
  CUmodule mod = nullptr;
  CUresult status = CUDA_SUCCESS;
  std::string log;
};

// cuModuleLoadDataEx with the driver's error log captured, in `ctx`; or cuLibraryLoadData (no
// context) when `lib` is given. `preserved`: the image stays where it is, unchanged, until the
// library is unloaded (CU_LIBRARY_BINARY_IS_PRESERVED), so the driver need not copy it.
load_outcome load_image(const driver& d, CUcontext ctx, const void* image, CUlibrary* lib = nullptr,
                        bool preserved = false) {
  constexpr std::size_t log_size = 16 * 1024;
  auto err = std::make_unique<char[]>(log_size);
  err[0] = 0;
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {err.get(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(log_size - 1))};
  load_outcome out;
  if (lib) {
    CUlibraryOption lib_keys[] = {CU_LIBRARY_BINARY_IS_PRESERVED};
    void* lib_vals[] = {reinterpret_cast<void*>(std::uintptr_t{1})};
    out.status = d.cuLibraryLoadData(lib, image, keys, vals, 2, preserved ? lib_keys : nullptr,
                                     preserved ? lib_vals : nullptr, preserved ? 1u : 0u);
    if (out.status != CUDA_SUCCESS) {
      *lib = nullptr;
      out.log = std::string(err.get(), strnlen(err.get(), log_size));
    }
    return out;
  }
  scoped_context current(d, ctx);
  if (!current.ok()) {
    out.status = CUDA_ERROR_INVALID_CONTEXT;
    return out;
  }
  relaxed_capture relaxed(d);  // a load during the application's stream capture (platform/driver.hpp)
  out.status = d.cuModuleLoadDataEx(&out.mod, image, 2, keys, vals);
  if (out.status != CUDA_SUCCESS) {
    out.mod = nullptr;
    out.log = std::string(err.get(), strnlen(err.get(), log_size));
  }
  return out;
}

// The report's phases are those of every attempt, failed ones included (a refused entry's
// decompression and JIT were spent too).
void add_up_phases(load_report& rep) {
  rep.decompress_ms = rep.jit_ms = rep.load_ms = 0;
  for (const auto& a : rep.attempts) {
    rep.decompress_ms += a.decompress_ms;
    rep.jit_ms += a.jit_ms;
    rep.load_ms += a.load_ms;
  }
}

void fill_header(load_report& rep, const device& dev, const module_entries& me, policy p) {
  rep.package = me.package->name;
  rep.module = std::string(me.package->view.entries().at(me.entries.front()).module_name);
  rep.device = dev.ordinal;
  rep.device_name = dev.name;
  rep.arch = dev.arch;
  rep.driver_version = dev.driver_version;
  rep.max_ptx_isa = dev.max_ptx_isa.known() ? dev.max_ptx_isa.str() : std::string();
  rep.policy = p;
}


// Background upgrade (load/selection.hpp): decides it for a selection whose chosen entry is SASS
// that is not the device's own, and reorders `order` (the candidates in the order to try) so that
// a cached JIT of the module's best PTX comes first. Returns the report's `upgrade` text.
std::string plan_upgrade(const driver& drv, const device& dev, const module_entries& me, const std::string& module,
                         const core::selection& sel, std::vector<core::candidate>& order) {
  const auto& entries = me.package->view.entries();
  if (!sel.chosen) return {};
  const auto& chosen = entries.at(*sel.chosen);
  if (chosen.target.kind != core::entry_kind::sass) return {};
  // The device's own SASS (sm_90 on CC 9.0, sm_90a there too) is what a JIT would make.
  if (chosen.target.arch == dev.arch && chosen.target.variant != core::arch_variant::family) return {};
  auto ptx = std::find_if(order.begin(), order.end(), [&](const core::candidate& c) {
    return c.verdict != core::verdict::rejected && entries.at(c.entry).target.kind == core::entry_kind::ptx;
  });
  if (ptx == order.end()) return {};
  jit_request req;
  req.package = me.package;
  req.entry = ptx->entry;
  req.drv = &drv;
  req.dev = &dev;
  req.module = module;
  const std::string what = describe_target(entries.at(ptx->entry)) + " JIT for CC " + std::to_string(dev.arch / 10) +
                           "." + std::to_string(dev.arch % 10);
  const std::string sass = describe_target(chosen);
  auto& jit = jit_service::instance();
  if (jit.cached_exact(req)) {
    std::rotate(order.begin(), ptx, ptx + 1);
    return "used: " + what + " from the cache, instead of " + sass + " SASS";
  }
  if (!jit.upgrade(req)) return "not queued: " + what + " has no JIT cache to go to; " + sass + " SASS runs";
  return "queued: " + what + " in the background (" + sass + " SASS runs now); used from the next start";
}

}  // namespace

module_state::~module_state() {
  if (lib && drv) (void)drv->cuLibraryUnload(lib);  // context-independent: always still loaded
  // A module of a destroyed context went with it: its handle must not reach the driver again.
  if ((mod || pieces) && drv && context_alive(*drv, ctx.ctx, ctx.has_id, ctx.id)) {
    scoped_context current(*drv, ctx.ctx);
    if (mod) (void)drv->cuModuleUnload(mod);
    if (pieces) unload_pieces(*pieces, ctx.ctx);
  }
}

status module_state::check_context() const {
  if (lib) return {};
  if (context_alive(*drv, ctx.ctx, ctx.has_id, ctx.id)) return {};
  char c[32];
  std::snprintf(c, sizeof c, "%p", static_cast<const void*>(ctx.ctx));
  return cuda_error(errc::cuda, CUDA_ERROR_CONTEXT_IS_DESTROYED,
                    "module '" + module_name + "' of package '" + package->name + "' on " + dev->identify() +
                        ", driver " + drv->identify() + ": its " +
                        (ctx.primary ? "primary " : "") + "context " + c +
                        (ctx.has_id ? " (id " + std::to_string(ctx.id) + ")" : std::string()) +
                        " was destroyed, and the module with it; load the module again in a live context");
}

load_report plan_entries(const device& dev, const module_entries& me, policy p) {
  load_report rep;
  fill_header(rep, dev, me, p);
  auto ms = select_entries(me, dev.arch, dev.tegra, dev.driver_version, p);
  rep.candidates = std::move(ms.candidates);
  rep.select_ms = ms.ms;
  if (ms.sel.chosen) {
    rep.entry = *ms.sel.chosen;
    const auto& e = me.package->view.entries().at(rep.entry);
    rep.target = describe_target(e);
    rep.jit = e.target.kind != core::entry_kind::sass;
    for (const auto& c : ms.sel.candidates)
      if (c.entry == rep.entry) rep.reason = c.reason;
  }
  return rep;
}

result<std::shared_ptr<module_state>> load_entries(const driver& drv, const device& dev, const module_entries& me,
                                                   policy p, target_context ctx, bool library, piece_policy pp) {
  stopwatch total;
  auto st = std::make_shared<module_state>();
  st->drv = &drv;
  st->dev = &dev;
  st->package = me.package;
  load_report& rep = st->report;
  fill_header(rep, dev, me, p);
  st->module_name = rep.module;

  auto ms = select_entries(me, dev.arch, dev.tegra, dev.driver_version, p);
  rep.candidates = std::move(ms.candidates);
  rep.select_ms = ms.ms;
  const auto& entries = me.package->view.entries();

  if (!ms.sel.chosen) {
    rep.total_ms = total.ms();
    if (log_enabled(log_level::info)) log_line(log_level::info, rep.trace());
    return error{errc::no_compatible_entry, 0, "cannot load " + where(dev, me) + ": " + ms.sel.nothing_fits, {}};
  }

  rep.context_ms = ctx.ms;
  st->ctx = std::move(ctx);

  std::vector<core::candidate> order = ms.sel.candidates;
  if (p == policy::prefer_sass && background_upgrade_enabled())
    rep.upgrade = plan_upgrade(drv, dev, me, rep.module, ms.sel, order);

  bool any_load_refused = false, any_jit_failed = false;
  for (const auto& c : order) {
    if (c.verdict == core::verdict::rejected) continue;
    const auto& e = entries.at(c.entry);
    attempt_info a;
    a.entry = c.entry;
    a.target = describe_target(e);
    CUresult status = CUDA_SUCCESS;
    load_outcome lo;
    // Hands `image` to the driver in the module's context and records the outcome in `a`.
    auto load_and_record = [&](const void* image, const char* call, bool preserved = false) {
      stopwatch sw;
      lo = load_image(drv, st->ctx.ctx, image, library ? &st->lib : nullptr, preserved);
      a.load_ms = sw.ms();
      status = lo.status;
      if (status != CUDA_SUCCESS) {
        any_load_refused = true;
        a.message = drv.call_failed(library ? "cuLibraryLoadData" : call, status);
        a.log = lo.log;
      }
    };

    if (e.target.kind == core::entry_kind::sass) {
      stopwatch sw;
      // Only the entry being tried is decompressed, into a buffer that goes as soon as the driver has
      // the module. An uncompressed entry is handed to the driver in place (after its checksum, unless
      // this process wrote it: add_image); a compressed one is checked before decoding and after
      // (core's decompress_into), as verify does.
      std::unique_ptr<os::scratch_buffer> raw;
      const std::uint8_t* image = nullptr;
      std::string bad;
      if (e.codec == core::codec::none) {
        auto stored = me.package->view.stored_payload(c.entry);
        if (stored.size != e.raw_size || (!me.package->written_here && core::xxh3(stored) != e.raw_xxh3))
          bad = std::string(me.package->view.source()) + ": " + e.describe() + ": raw data checksum mismatch";
        image = stored.data;
      } else {
        raw = std::make_unique<os::scratch_buffer>(static_cast<std::size_t>(e.raw_size));
        if (!*raw) {
          bad = "out of host memory for " + std::to_string(e.raw_size) + " bytes";
        } else if (auto s = me.package->view.decompress_into(c.entry, raw->data(), decompress_threads()); !s) {
          bad = s.error().message;
        }
        image = raw ? raw->data() : nullptr;
      }
      a.decompress_ms = sw.ms();
      // A relocatable cubin (nvcc -rdc without a device link) loads and then finds no kernel: the
      // next candidate instead (pack and verify refuse one; a package from elsewhere may hold one).
      if (bad.empty())
        if (auto s = core::refuse_relocatable_cubin(core::byte_span(image, std::size_t(e.raw_size)),
                                                    std::string(me.package->view.source()) + ": " + e.describe());
            !s)
          bad = s.error().message;
      if (!bad.empty()) {
        a.message = std::move(bad);
        rep.attempts.push_back(std::move(a));
        continue;
      }
      // An uncompressed entry is loaded from the package itself, which the module state keeps (and,
      // for a package of an object that can be unloaded, pins): a library may then skip its own copy.
      // Not for borrowed bytes (the caller's promise is about the package, not the driver's life of
      // a library), a package registered by fatpack_register_embedded() (its object may be
      // dlclose()d and is not pinned), nor a decoded entry (its buffer goes after the load).
      const bool preserved = !raw && (me.package->keep || (me.package->embedded && !me.package->registered));
      load_and_record(image, "cuModuleLoadDataEx", preserved);
    } else {  // PTX through the driver's JIT or nvJitLink, LTO-IR through nvJitLink (jit/service)
      a.jit = true;
      jit_request req;
      req.package = me.package;
      req.entry = c.entry;
      req.drv = &drv;
      req.dev = &dev;
      req.module = rep.module;
      // Kernel-granular JIT: the pieces are compiled and loaded as their kernels are asked for.
      if (may_split(req, pp, library)) {
        if (auto s = me.package->view.check_stored(c.entry); !s) {
          a.message = s.error().message;
          rep.attempts.push_back(std::move(a));
          continue;
        }
        const std::size_t groups = piece_groups_in_use();
        auto split = split_entry(req, groups);
        if (!split) {
          a.message = split.error().message;
          rep.attempts.push_back(std::move(a));
          continue;
        }
        a.decompress_ms = (*split)->decompress_ms;
        rep.split_ms = (*split)->split_ms;
        if ((*split)->is_split()) {
          auto pieces = make_piece_set(req, **split);
          const std::size_t n = pieces->slots.size();
          if (pp == piece_policy::background) queue_pieces(*pieces);
          // One piece compiled now: a driver that refuses this PTX (its ISA, a JIT error) refuses it
          // here, and the next candidate is tried, as for a whole module.
          stopwatch probe_clock;
          piece_probe probed;
          if (auto s = probe_pieces(*pieces, &probed); !s) {
            any_jit_failed = true;
            a.cuda_status = s.error().cuda_status;
            a.message = s.error().message;
            a.log = s.error().log;
            a.jit_ms = probe_clock.ms();
            rep.attempts.push_back(std::move(a));
            continue;
          }
          a.jit_ms = probe_clock.ms();
          st->pieces = std::move(pieces);
          rep.pieces = std::to_string(n) + " pieces (" +
                       (groups ? "at most " + std::to_string(groups) + " balanced by size" : std::string("per kernel")) +
                       ((*split)->from_plan ? ", the package's plan" : ", split at load") + "), " + (pp == piece_policy::background ? "compiling in the background" : "compiled on demand") +
                       "; a kernel's piece is loaded when the kernel is first asked for";
          a.ok = true;
          a.jit_path = "pieces";
          a.jit_reused = probed.reused;  // the piece compiled at load: from the cache, or this process's
          a.jit_from_cache = probed.from_cache;
          rep.attempts.push_back(a);
          rep.loaded = true;
          rep.entry = c.entry;
          rep.target = a.target;
          rep.reason = c.reason;
          rep.jit = true;
          rep.jit_path = a.jit_path;
          rep.jit_reused = a.jit_reused;
          rep.jit_from_cache = a.jit_from_cache;
          st->kernels.assign(e.kernels.begin(), e.kernels.end());
          add_up_phases(rep);
          rep.total_ms = total.ms();
          if (log_enabled(log_level::info)) log_line(log_level::info, rep.trace());
          return st;
        }
        rep.pieces = (*split)->why_whole;
      }
      stopwatch sw;
      auto jr = jit_service::instance().compile(req);
      double waited = sw.ms();
      if (!jr) {
        any_jit_failed = true;
        a.cuda_status = jr.error().cuda_status;
        a.message = jr.error().message;
        a.log = jr.error().log;
        a.jit_ms = waited;
        rep.attempts.push_back(std::move(a));
        continue;
      }
      // The attempt's JIT fields from a result (`waited`: how long compile() took here).
      auto take_jit = [&](const jit_result& r, double waited_ms) {
        a.jit_reused = r.reused;
        a.jit_from_cache = r.from_cache;
        a.jit_path = r.path;
        a.jit_ms = r.reused ? waited_ms : r.jit_ms;
        a.log = r.info_log;
      };
      take_jit(*jr, waited);
      a.decompress_ms = jr->decompress_ms;
      load_and_record(jr->sass->data(), "cuModuleLoadDataEx (JIT output)");
      if (status != CUDA_SUCCESS && jr->from_cache) {
        // The driver refused SASS from the cache (built by another driver: a rollback, or a prebuilt
        // layer from a newer one). Compile it here instead, replacing the entry, rather than fail.
        log_line(log_level::warn, "JIT cache: the driver refused the cached SASS of " + rep.module + " (" +
                                      a.message + "); compiling it again");
        jit_service::instance().forget(req);
        req.bypass_cache = true;
        stopwatch again;
        auto fresh = jit_service::instance().compile(req);
        if (fresh) {
          a.message.clear();
          take_jit(*fresh, again.ms());
          load_and_record(fresh->sass->data(), "cuModuleLoadDataEx (JIT output, after the cache's was refused)");
        } else {
          a.message += "; compiling again failed: " + fresh.error().message;
        }
      }
    }

    a.cuda_status = static_cast<int>(status);
    a.ok = status == CUDA_SUCCESS;
    rep.attempts.push_back(a);
    if (!a.ok) continue;

    st->mod = lo.mod;
    rep.loaded = true;
    rep.entry = c.entry;
    rep.target = a.target;
    rep.reason = c.reason;
    rep.jit = a.jit;
    rep.jit_reused = a.jit_reused;
    rep.jit_from_cache = a.jit_from_cache;
    rep.jit_path = a.jit_path;
    st->kernels.assign(e.kernels.begin(), e.kernels.end());
    for (std::uint16_t part = 1; part < e.link_parts; ++part) {  // a link group's kernels are all its parts'
      const auto& more = entries.at(c.entry + part).kernels;
      st->kernels.insert(st->kernels.end(), more.begin(), more.end());
    }
    add_up_phases(rep);
    rep.total_ms = total.ms();
    if (log_enabled(log_level::info)) log_line(log_level::info, rep.trace());
    return st;
  }
  add_up_phases(rep);
  rep.total_ms = total.ms();
  if (log_enabled(log_level::info)) log_line(log_level::info, rep.trace());
  std::string msg = "cannot load " + where(dev, me) + ": every usable entry was refused:";
  std::string log;
  int last_status = 0;
  for (const auto& a : rep.attempts) {
    msg += "\n  entry " + std::to_string(a.entry) + " " + a.target + ": " + a.message;
    if (!a.log.empty()) log += (log.empty() ? "" : "\n") + ("entry " + std::to_string(a.entry) + " " + a.target + ":\n" + a.log);
    if (a.cuda_status) last_status = a.cuda_status;
  }
  return error{any_load_refused ? errc::load_failed : any_jit_failed ? errc::jit_failed : errc::bad_package, last_status, std::move(msg), std::move(log)};
}

}  // namespace fatpack::detail
