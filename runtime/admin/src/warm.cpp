// `fatpack warm` (cache_admin.hpp): compiles the PTX a GPU of each target CC would need into a cache
// directory. It runs the runtime's own pipeline: the runtime's selection (policy from the
// environment, Tegra for Tegra CCs, the driver's PTX ISA), the JIT service (the same key, cache
// lookup, cross-process lock, compile, publish) with the directory installed as its cache; a CC
// other than the device's is compiled through the driver's cross-target JIT (CU_JIT_TARGET).
#include "admin_impl.hpp"

#include "cache/directory.hpp"
#include "cache/disk_cache.hpp"
#include "jit/service.hpp"
#include "load/pieces.hpp"
#include "load/selection.hpp"
#include "platform/device.hpp"
#include "platform/os.hpp"
#include "registry/registry.hpp"
#include "remote/remote_cache.hpp"
#include "remote/remote_config.hpp"

#include "fatpack/core/arch_table.hpp"

#include <cstdlib>

namespace fatpack::detail::cache {

const char* outcome_name(warm_item::outcome o) noexcept {
  switch (o) {
    case warm_item::outcome::compiled: return "compiled";
    case warm_item::outcome::already_cached: return "already_cached";
    case warm_item::outcome::has_sass: return "has_sass";
    case warm_item::outcome::no_ptx: return "no_ptx";
    case warm_item::outcome::failed: return "failed";
    case warm_item::outcome::pulled: return "pulled";
    case warm_item::outcome::not_found: return "not_found";
  }
  return "failed";
}

result<std::uint32_t> parse_warm_target(const std::string& text) {
  auto cc = core::parse_compute_capability(text, core::cc_suffix::ignore);
  if (!cc) return error{errc::invalid_argument, 0, cc.error().message, {}};
  return *cc;
}

namespace {

// Installs `c` as the JIT service's cache for the scope; what was installed before comes back.
class scoped_cache {
 public:
  explicit scoped_cache(std::shared_ptr<sass_cache> c) {
    had_ = sass_cache_installed();
    if (had_) previous_ = get_sass_cache();
    set_sass_cache(std::move(c));
  }
  ~scoped_cache() {
    jit_service::instance().flush_stores();
    if (had_) set_sass_cache(previous_);
    else uninstall_sass_cache();
  }
  scoped_cache(const scoped_cache&) = delete;
  scoped_cache& operator=(const scoped_cache&) = delete;

 private:
  bool had_ = false;
  std::shared_ptr<sass_cache> previous_;
};

// One request (a whole entry, or one piece of it): already in this directory, pulled from the
// remote, compiled here, or why not. Only result, message and jit_ms are set.
warm_item warm_request(const jit_request& req, jit_service& jit, disk_cache& disk, remote::remote_cache* layer,
                       const std::string& root, const warm_options& options) {
  warm_item it;
  const jit_key key = jit.cache_key_for(req);
  if (auto here = disk.find(key, false)) {
    it.result = warm_item::outcome::already_cached;
    if (layer) layer->upload(key, core::byte_span(here->sass.data(), here->sass.size()));  // --push
  } else if (layer && layer->find(key, false)) {
    it.result = warm_item::outcome::pulled;  // copied into this directory by the layer's queue
  } else if (!options.compile) {
    it.result = warm_item::outcome::not_found;
    it.message = "neither in " + root + " nor in " + remote::redact_url(options.remote.url);
  } else {
    auto r = jit.compile(req);
    if (!r) {
      it.message = r.error().message;
    } else if (r->from_cache) {
      it.result = warm_item::outcome::already_cached;  // published by another process meanwhile
    } else {
      it.jit_ms = r->jit_ms;
      // The store runs on the pool; wait for it and check that the entry is there.
      jit.flush_stores();
      if (disk.find(key, false)) {
        it.result = warm_item::outcome::compiled;
      } else if (r->reused) {
        // Compiled earlier in this process (another package with the same PTX, or a piece the pool
        // compiled) under a cache that is gone: store it here directly.
        disk.store(key, core::byte_span(r->sass->data(), r->sass->size()));
        it.result = disk.find(key, false) ? warm_item::outcome::compiled : warm_item::outcome::failed;
        if (it.result == warm_item::outcome::failed) it.message = "compiled, but not stored in " + root;
      } else {
        it.message = "compiled, but not stored in " + root + " (FATPACK_LOG=debug says why)";
      }
    }
  }
  return it;
}

}  // namespace

result<std::vector<warm_item>> warm_packages(admin& a, const std::vector<std::string>& package_files,
                                             const warm_options& options) {
  auto& impl = static_cast<admin_impl&>(a);
  cache_dir& cache = impl.dir();
  if (!cache.writable()) return error{errc::invalid_argument, 0, cache.root() + ": opened read-only; warm needs read-write", {}};
  const auto& ds = load_devices();
  if (!ds) return ds.error();
  const device_set& set = **ds;
  if (auto s = usable_in_this_process(*set.drv); !s) return s.error();
  const driver& drv = *set.drv;
  const device& ctx_dev = set.devices.front();  // its primary context hosts every cross-target JIT

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

  auto disk = disk_cache::over(impl.shared_dir());
  // With a remote: the runtime's own fleet layer over this directory (lookups, checks, signatures,
  // uploads exactly as a program does them).
  std::shared_ptr<remote::remote_cache> layer;
  if (!options.remote.url.empty()) {
    remote::remote_config cfg = remote::config_from_options(to_options(options.remote));
    if (!cfg.problems.empty()) return error{errc::invalid_argument, 0, cfg.problems.front(), {}};
    std::string why;
    auto store = remote::open_store(cfg.store, why);
    if (!store) return error{errc::invalid_argument, 0, why, {}};
    layer = remote::remote_cache::over(disk, cfg, std::move(store), format_dir(cache.root()));
  }
  if (!options.compile && !layer) return error{errc::invalid_argument, 0, "pull: no remote URL", {}};
  scoped_cache installed(layer ? std::shared_ptr<sass_cache>(layer) : std::shared_ptr<sass_cache>(disk));
  jit_service& jit = jit_service::instance();
  const policy pol = resolve_policy(std::nullopt);  // FATPACK_POLICY / CUDA_FORCE_PTX_JIT, as a load

  // What each job selects: the device the runtime would see, a GPU of this CC, Tegra when the CC is
  // a Tegra one, with this driver.
  std::vector<module_selection> selected;
  selected.reserve(jobs.size());
  for (const auto& j : jobs)
    selected.push_back(
        select_entries(entries_of_module(j.pkg, j.module), j.target, core::is_tegra_arch(j.target), drv.version, pol));
  auto request_for = [&](const job& j, std::size_t entry) {
    jit_request req;
    req.package = j.pkg;
    req.entry = entry;
    req.drv = &drv;
    req.dev = &ctx_dev;
    req.module = j.module;
    req.target_arch = j.target;
    return req;
  };
  auto ptx_chosen = [&](std::size_t i) {
    const auto& chosen = selected[i].sel.chosen;
    return chosen && jobs[i].pkg->view.entries().at(*chosen).target.kind == core::entry_kind::ptx;
  };

  // The requests a load would make for each job: one per piece where the runtime compiles the
  // module in pieces (load/pieces.hpp), else the whole entry. Made once; an error is the job's.
  std::vector<result<std::vector<jit_request>>> requests;
  requests.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!ptx_chosen(i)) {
      requests.emplace_back(std::vector<jit_request>{});
      continue;
    }
    requests.push_back(requests_as_loaded(request_for(jobs[i], *selected[i].sel.chosen)));
  }

  // With a remote: what this directory lacks is looked up in one batch first (Redis MGET, parallel
  // HTTP GETs) instead of one request per item.
  if (layer) {
    std::vector<jit_key> wanted;
    for (const auto& reqs : requests) {
      if (!reqs) continue;
      for (const auto& req : *reqs) {
        const jit_key key = jit.cache_key_for(req);
        if (!disk->find(key, false)) wanted.push_back(key);
      }
    }
    layer->prefetch(wanted);
  }

  std::vector<warm_item> items;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const job& j = jobs[i];
    warm_item it;
    it.package = j.pkg->name;
    it.module = j.module;
    it.target = j.target;
    const auto& es = j.pkg->view.entries();
    const module_selection& ms = selected[i];
    if (!ms.sel.chosen) {
      it.result = warm_item::outcome::no_ptx;
      it.message = ms.sel.nothing_fits;
    } else {
      const auto& e = es.at(*ms.sel.chosen);
      it.entry = describe_target(e);
      if (!ptx_chosen(i)) {
        it.result = warm_item::outcome::has_sass;
        it.message = ms.sel.candidates.front().reason;
      } else {
        if (!requests[i]) {
          it.message = requests[i].error().message;
        } else {
          const auto& reqs = *requests[i];
          // Pieces compile in parallel on the JIT pool; each is then waited for below in order.
          if (options.compile && reqs.size() > 1)
            for (const auto& req : reqs)
              if (!disk->find(jit.cache_key_for(req), false) && !(layer && layer->find(jit.cache_key_for(req), false)))
                (void)jit.enqueue(req);
          // The item's outcome over its requests (one, or one per piece): the first failure, else
          // compiled when any was, else pulled when any was, else already cached.
          bool any_compiled = false, any_pulled = false, all_cached = true, stopped = false;
          for (const auto& req : reqs) {
            warm_item one = warm_request(req, jit, *disk, layer.get(), cache.root(), options);
            it.jit_ms += one.jit_ms;
            if (one.result == warm_item::outcome::compiled) any_compiled = true;
            if (one.result == warm_item::outcome::pulled) any_pulled = true;
            if (one.result != warm_item::outcome::already_cached) all_cached = false;
            if (one.result == warm_item::outcome::failed || one.result == warm_item::outcome::not_found) {
              it.result = one.result;
              it.message = reqs.size() > 1 ? req.module + ": " + one.message : one.message;
              stopped = true;
              break;
            }
          }
          if (!stopped) {
            it.result = any_compiled ? warm_item::outcome::compiled
                        : any_pulled ? warm_item::outcome::pulled
                        : all_cached ? warm_item::outcome::already_cached
                                     : warm_item::outcome::failed;
          }
          if (reqs.size() > 1) it.pieces = reqs.size();
        }
      }
    }
    items.push_back(std::move(it));
    if (options.progress) options.progress(items.back(), items.size(), jobs.size());
  }
  if (layer) {
    jit.flush_stores();  // the stores queue the uploads
    layer->flush(-1);    // uploads and local copies; each request is bounded by the timeouts
  }
  return items;
}

}  // namespace fatpack::detail::cache
