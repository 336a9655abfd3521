// `fatpack doctor` (doctor.hpp): the runtime's own answers, collected without changing anything.
// The driver and devices come from platform (load_driver, load_devices), the choice per device from
// load/selection (the selector a load runs, with the policy from the environment), the cache key from
// the JIT service (cache_key_for: the JIT path resolved as a compile would resolve it), and the
// lookup from a disk_cache built from the environment like the runtime's, but read-only. The packages
// go into the registry as a program's do (add_package_memory, borrowed bytes).
#include "fatpack/admin/cache_admin.hpp"
#include "fatpack/admin/doctor.hpp"

#include "cache/config.hpp"
#include "cache/directory.hpp"
#include "cache/disk_cache.hpp"
#include "cache/fs.hpp"
#include "cache/key.hpp"
#include "jit/service.hpp"
#include "load/pieces.hpp"
#include "load/selection.hpp"
#include "platform/device.hpp"
#include "platform/driver.hpp"
#include "registry/registry.hpp"

#include "fatpack/core/arch_table.hpp"
#include "fatpack/policy.hpp"

namespace fatpack::detail::doctor {
namespace {

namespace dc = fatpack::detail::cache;

// One directory's report; the counts come from the admin library's own stats (read-only open).
layer_report layer_of(const std::string& role, const std::string& path) {
  layer_report l;
  l.role = role;
  l.path = path;
  dc::file_stat st;
  if (dc::current_fs().stat(dc::format_dir(path), st) != 0) {
    l.state = "missing";
    return l;
  }
  auto a = dc::admin::open(path, true);
  if (!a) {
    l.state = "refused";
    l.problem = a.error().message;
    return l;
  }
  const dc::disk_stats s = (*a)->stats();
  l.state = "present";
  l.entries = s.entries;
  l.bytes = s.bytes;
  l.cubin_bytes = s.cubin_bytes;
  l.temp_files = s.temp_files;
  l.index_ok = s.index_ok;
  return l;
}

// The mode a program would get for its per-user cache, decided by the same directory policy
// (prepare_user_dir), asked not to create anything.
void predict_mode(const dc::config& cfg, cache_report& c) {
  if (cfg.disabled) {
    c.mode = "disabled";
    c.why = "FATPACK_CACHE_DISABLE is set";
    return;
  }
  const dc::dir_verdict v = dc::prepare_user_dir(cfg.path, true);
  if (v.access == dc::dir_access::refused) {
    if (!v.warning.empty()) {
      c.mode = "memory-only";
      c.why = v.warning;
    } else if (cfg.read_only) {
      c.mode = "read-only";
      c.why = "FATPACK_CACHE_READONLY is set (and " + cfg.path + " does not exist yet)";
    } else {
      c.mode = "read-write";
      c.why = cfg.path + " does not exist yet: the first JIT creates it (mode 0700)";
    }
    return;
  }
  if (!v.warning.empty()) {  // a network file system
    c.mode = "read-only";
    c.why = v.warning;
  } else if (cfg.read_only) {
    c.mode = "read-only";
    c.why = "FATPACK_CACHE_READONLY is set";
  } else {
    // The directory is ours and private (prepare_user_dir checked): writable, unless its file
    // system is mounted read-only, which the first store finds and reports.
    c.mode = "read-write";
  }
}

}  // namespace

report diagnose(const std::vector<package_bytes>& packages) {
  report r;
  r.policy = policy_name(resolve_policy(std::nullopt));

  // The cache, as the environment configures it.
  const dc::config cfg = dc::config_from_env();
  r.cache.max_bytes = cfg.max_bytes;
  r.cache.use_other_driver = cfg.use_other_driver;
  r.cache.warnings = cfg.warnings;
  predict_mode(cfg, r.cache);
  if (!cfg.disabled) {
    for (const auto& p : cfg.prebuilt) r.cache.layers.push_back(layer_of("prebuilt", p));
    if (!cfg.path.empty()) r.cache.layers.push_back(layer_of("user", cfg.path));
  }
  std::shared_ptr<dc::disk_cache> disk;
  if (!cfg.disabled) {
    dc::config ro = cfg;
    ro.read_only = true;  // look, never write (and never create the directory)
    disk = dc::disk_cache::create(ro);
  }

  // The packages, registered as a program's are: the registry's walker and validation, the same
  // bytes twice counted once, a different package under a name already in use refused.
  registry& reg = registry::instance();
  for (const auto& p : packages)
    if (auto st = reg.add_memory(p.data, p.size, p.source, ownership::borrow); !st)
      r.package_errors.push_back(st.error().message);
  std::vector<package_ptr> pkgs;
  if (!packages.empty()) {
    if (auto all = reg.packages()) pkgs = std::move(all).value();
  }
  for (const auto& pkg : pkgs) {
    package_report pr;
    pr.name = pkg->name;
    pr.source = pkg->source;
    pr.entries = pkg->view.entries().size();
    pr.modules = pkg->modules;
    for (const auto& e : pkg->view.entries()) pr.targets.push_back(describe_target(e));
    r.packages.push_back(std::move(pr));
  }

  // The driver and devices.
  r.driver.library = driver_path();
  const auto& drv = load_driver();
  if (!drv) {
    r.driver.error = drv.error().message;
    return r;
  }
  const driver& d = **drv;
  r.driver.loaded = true;
  r.driver.library = d.path;
  r.driver.version = d.version;
  r.driver.version_text = core::cuda_version_str(d.version);
  r.driver.max_ptx_isa = core::max_ptx_isa_for_driver(d.version).str();
  r.driver.cache_identity = dc::make_driver_id(d.version).text;
  const auto& ds = load_devices();
  if (!ds) {
    r.driver.error = ds.error().message;
    return r;
  }
  for (const auto& dev : (*ds)->devices)
    r.devices.push_back({dev.ordinal, dev.name, dev.arch, dev.tegra, uuid_string(dev.uuid)});

  const policy pol = resolve_policy(std::nullopt);
  jit_service& jit = jit_service::instance();
  for (const auto& pkg : pkgs) {
    for (const auto& mod : pkg->modules) {
      module_entries me;
      me.package = pkg;
      const auto& es = pkg->view.entries();
      for (std::size_t i = 0; i < es.size(); ++i)
        if (es[i].module_name == mod) me.entries.push_back(i);
      for (const auto& dev : (*ds)->devices) {
        module_report m;
        m.package = pkg->name;
        m.module = mod;
        m.device = dev.ordinal;
        m.arch = dev.arch;
        const module_selection ms = select_entries(me, dev.arch, dev.tegra, dev.driver_version, pol);
        if (!ms.sel.chosen) {
          m.reason = ms.sel.nothing_fits;
          r.modules.push_back(std::move(m));
          continue;
        }
        const core::entry_info& e = es.at(*ms.sel.chosen);
        m.fits = true;
        m.loads = describe_target(e);
        for (const auto& c : ms.sel.candidates) {
          if (c.verdict == core::verdict::rejected) continue;
          if (c.entry == *ms.sel.chosen) m.reason = c.reason;
          else ++m.fallbacks;
        }
        m.jit = e.target.kind == core::entry_kind::ptx;
        if (m.jit) {
          jit_request req;
          req.package = pkg;
          req.entry = *ms.sel.chosen;
          req.drv = &d;
          req.dev = &dev;
          req.module = mod;
          // As a load compiles it: in pieces where the runtime splits it (load/pieces.hpp).
          auto reqs = requests_as_loaded(req);
          std::vector<jit_request> asked = reqs ? std::move(*reqs) : std::vector<jit_request>{req};
          const jit_key key = jit.cache_key_for(asked.front());
          m.jit_path = key.backend;
          m.code_key = dc::make_code_key(key).text;
          if (asked.size() > 1) m.pieces = asked.size();
          if (!disk) {
            m.cache = "disabled";
          } else {
            bool all_exact = true;
            for (const auto& one : asked) {
              auto hit = disk->find(jit.cache_key_for(one), true);
              if (!hit) continue;
              ++m.pieces_cached;
              all_exact = all_exact && hit->exact;
              if (m.cache_layer.empty()) m.cache_layer = hit->where;
            }
            if (m.pieces_cached == asked.size()) m.cache = all_exact ? "hit" : "other-driver";
            else m.cache = m.pieces_cached ? "partial" : "miss";
            if (!m.pieces) m.pieces_cached = 0;
          }
        }
        r.modules.push_back(std::move(m));
      }
    }
  }
  return r;
}

}  // namespace fatpack::detail::doctor
