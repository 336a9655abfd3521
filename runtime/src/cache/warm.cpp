// `fatpack warm` (cache_admin.hpp): compiles the PTX a GPU of each target CC would need into a cache
// directory, through the driver's cross-target JIT (CU_JIT_TARGET).
#include "cache/admin_internal.hpp"

#include "cache/key.hpp"
#include "clock.hpp"
#include "device.hpp"
#include "jit.hpp"
#include "jit_service.hpp"
#include "os.hpp"
#include "registry.hpp"
#include "selection.hpp"

#include "fatpack/core/select.hpp"

#include <cstdlib>

namespace fatpack::detail::cache {

const char* outcome_name(warm_item::outcome o) noexcept {
  switch (o) {
    case warm_item::outcome::compiled: return "compiled";
    case warm_item::outcome::already_cached: return "already_cached";
    case warm_item::outcome::has_sass: return "has_sass";
    case warm_item::outcome::no_ptx: return "no_ptx";
    case warm_item::outcome::failed: return "failed";
  }
  return "failed";
}

result<std::uint32_t> parse_warm_target(const std::string& text) {
  auto cc = core::parse_compute_capability(text, core::cc_suffix::ignore);
  if (!cc) return error{errc::invalid_argument, 0, cc.err().message, {}};
  return *cc;
}

result<std::vector<warm_item>> warm_packages(admin& a, const std::vector<std::string>& package_files,
                                             const warm_options& options) {
  cache_dir& cache = static_cast<admin_impl&>(a).dir();
  if (!cache.writable()) return error{errc::invalid_argument, 0, cache.root() + ": opened read-only; warm needs read-write", {}};
  const auto& ds = load_devices();
  if (!ds) return ds.error();
  const device_set& set = **ds;
  const driver& drv = *set.drv;
  const device& ctx_dev = set.devices.front();  // its primary context hosts every cuLink

  std::vector<std::uint32_t> targets = options.targets;
  if (targets.empty())
    for (const auto& d : set.devices)
      if (std::find(targets.begin(), targets.end(), d.arch) == targets.end()) targets.push_back(d.arch);

  // Every package of every file.
  std::vector<std::shared_ptr<registered_package>> pkgs;
  for (const auto& file : package_files) {
    std::string why;
    auto m = os::map_file(file, why);
    if (!m) return error{errc::io, 0, file + ": " + why, {}};
    auto parsed = parse_all(core::byte_span(m->data(), m->size()), file, m);
    if (!parsed) return parsed.error();
    for (auto& p : *parsed) pkgs.push_back(p);
  }
  struct job {
    std::shared_ptr<registered_package> pkg;
    std::string module;
    std::uint32_t target;
  };
  std::vector<job> jobs;
  for (const auto& p : pkgs)
    for (const auto& m : p->modules)
      for (std::uint32_t t : targets) jobs.push_back({p, m, t});

  auto ctx = primary_context::retain(drv, ctx_dev);
  if (!ctx) return ctx.error();

  std::vector<warm_item> items;
  for (const auto& j : jobs) {
    warm_item it;
    it.package = j.pkg->name;
    it.module = j.module;
    it.target = j.target;
    const auto& es = j.pkg->view.entries();
    std::vector<std::size_t> idx;
    std::vector<core::entry_desc> descs;
    for (std::size_t i = 0; i < es.size(); ++i)
      if (es[i].module_name == j.module) {
        idx.push_back(i);
        descs.push_back(core::entry_desc{es[i].target, es[i].ptx_isa});
      }
    core::selection sel = core::select(descs, core::device_desc{j.target, false}, drv.version);
    if (!sel.chosen) {
      it.result = warm_item::outcome::no_ptx;
      it.message = sel.nothing_fits;
    } else {
      const auto& e = es[idx[*sel.chosen]];
      it.entry = describe_target(e);
      if (e.target.kind != core::entry_kind::ptx) {
        it.result = warm_item::outcome::has_sass;
        it.message = sel.candidates.front().reason;
      } else {
        jit_key key = make_jit_key(e, j.target, drv.version);
        key.backend = "culink";  // warm compiles through the driver's cuLink
        const full_key fk = make_full_key(key);
        if (cache.read_exact(fk, j.target)) {
          it.result = warm_item::outcome::already_cached;
        } else {
          std::vector<std::uint8_t> ptx(static_cast<std::size_t>(e.raw_size) + 1);
          auto s = j.pkg->view.decompress_into(idx[*sel.chosen], ptx.data());
          ptx.back() = 0;
          if (!s) {
            it.message = s.err().message;
          } else {
            scoped_context current(drv, ctx->get());
            std::uint32_t cu_target = j.target;
            if (e.target.variant == core::arch_variant::arch_specific) cu_target += 0x10000;  // CU_COMPUTE_ACCELERATED_TARGET_BASE
            if (e.target.variant == core::arch_variant::family) cu_target += 0x20000;         // CU_COMPUTE_FAMILY_TARGET_BASE
            auto out = jit_link(drv, core::byte_span(ptx.data(), ptx.size()), j.module + ": " + it.entry,
                                parse_jit_options(e.options), cu_target);
            if (!out) {
              it.message = out.error().message;
            } else {
              it.jit_ms = out->wall_ms;
              std::string why;
              if (int err = cache.write(fk, core::byte_span(out->sass.data(), out->sass.size()), why)) {
                it.message = "compiled, but not stored: " + why;
                (void)err;
              } else {
                it.result = warm_item::outcome::compiled;
              }
            }
          }
        }
      }
    }
    items.push_back(std::move(it));
    if (options.progress) options.progress(items.back(), items.size(), jobs.size());
  }
  return items;
}

}  // namespace fatpack::detail::cache
