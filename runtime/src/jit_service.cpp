// The JIT service (see jit_service.hpp for the policy).
#include "jit_service.hpp"

#include "cache/disk_cache.hpp"
#include "cache/stats.hpp"

#include "clock.hpp"
#include "jit_nvjitlink.hpp"
#include "log.hpp"
#include "os.hpp"
#include "selection.hpp"

#include "fatpack/core/hex.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace fatpack::detail {

enum class task_state { queued, running, done };

class jit_task {
 public:
  jit_task(jit_request r, std::string k) : req(std::move(r)), key(std::move(k)) {}
  const jit_request req;
  const std::string key;
  std::mutex mu;
  std::condition_variable cv;
  task_state state = task_state::queued;
  std::optional<result<jit_result>> outcome;

  // queued -> running; false if someone else has it.
  bool claim() {
    std::lock_guard<std::mutex> lock(mu);
    if (state != task_state::queued) return false;
    state = task_state::running;
    return true;
  }
};

namespace {

// The disk cache from the environment, created at first use (cache/disk_cache.hpp).
std::shared_ptr<sass_cache>& cache_slot() {
  static auto* c = new std::shared_ptr<sass_cache>(cache::make_default_sass_cache());
  return *c;
}
std::mutex& cache_mu() {
  static auto* m = new std::mutex();
  return *m;
}

}  // namespace

void set_sass_cache(std::shared_ptr<sass_cache> cache) {
  std::lock_guard<std::mutex> lock(cache_mu());
  cache_slot() = cache ? std::move(cache) : std::make_shared<null_sass_cache>();
}

std::shared_ptr<sass_cache> get_sass_cache() {
  std::lock_guard<std::mutex> lock(cache_mu());
  return cache_slot();
}

std::string jit_key::str() const {
  std::string s = backend;
  s += "|ptx=" + core::hex16(ptx_xxh3) + ":" + std::to_string(ptx_size);
  s += "|src=" + ptx_target.str() + "@" + ptx_isa.str();
  s += "|cc=" + std::to_string(target_arch) + core::variant_suffix(target_variant);
  s += "|opt=" + options;
  s += "|drv=" + std::to_string(driver_version);
  return s;
}

jit_key make_jit_key(const jit_request& req) {
  return make_jit_key(req.package->view.entries().at(req.entry), req.dev->arch, req.drv->version);
}

jit_key make_jit_key(const core::entry_info& e, std::uint32_t target_arch, int driver_version) {
  jit_key k;
  k.ptx_xxh3 = e.raw_xxh3;
  k.ptx_size = e.raw_size;
  k.ptx_target = e.target;
  k.ptx_isa = e.ptx_isa;
  k.target_arch = target_arch;
  // a/f PTX compiles to a/f SASS for the device; plain PTX to plain SASS.
  k.target_variant = e.target.variant;
  k.options = std::string(e.options);
  k.backend = jit_backend_in_use() == jit_backend::nvjitlink ? "nvjitlink" : "culink";
  k.driver_version = driver_version;
  return k;
}

namespace {
std::atomic<int> g_backend{-1};  // -1: not set through the API (FATPACK_JIT_BACKEND decides)
}  // namespace

jit_backend jit_backend_in_use() {
  int b = g_backend.load();
  if (b >= 0) return static_cast<jit_backend>(b);
  const char* env = os::getenv("FATPACK_JIT_BACKEND");
  return env && std::string(env) == "nvjitlink" ? jit_backend::nvjitlink : jit_backend::culink;
}

jit_service& jit_service::instance() {
  static jit_service* s = new jit_service();  // leaked: pool threads may outlive static destruction
  return *s;
}

void jit_service::set_threads(unsigned n) {
  std::lock_guard<std::mutex> lock(mu_);
  threads_ = n;
}

std::size_t jit_service::compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiles_;
}

core::thread_pool& jit_service::pool() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pool_) {
    unsigned n = threads_;
    if (n == 0) {
      const char* env = os::getenv("FATPACK_JIT_THREADS");
      if (env && *env) n = static_cast<unsigned>(std::strtoul(env, nullptr, 10));
    }
    if (n == 0) n = os::hardware_threads();
    // Leaked with the service (fatpack/core/thread_pool.hpp: workers start as work arrives).
    pool_.reset(new core::thread_pool(n));
    log_line(log_level::debug, "JIT pool: " + std::to_string(n) + " threads");
  }
  return *pool_;
}

std::shared_ptr<jit_task> jit_service::get_or_create(const jit_request& req, bool& created) {
  std::string key = make_jit_key(req).str();
  std::lock_guard<std::mutex> lock(mu_);
  created = false;
  auto it = tasks_.find(key);
  if (it != tasks_.end()) return it->second;
  auto t = std::make_shared<jit_task>(req, key);
  tasks_.emplace(key, t);
  created = true;
  return t;
}

namespace {

// Decompresses the request's PTX entry (only that one, NUL-terminated) and compiles it: nvJitLink
// when `nvj` is given, else cuLink in the device's primary context. `arch_unknown`: nvJitLink does
// not know the device (a GPU newer than the library); the caller then retries with cuLink.
result<jit_output> compile_entry(const jit_request& req, const nvjitlink_lib* nvj, bool& arch_unknown, std::string& path,
                                 double& decompress_ms) {
  const auto& e = req.package->view.entries().at(req.entry);
  const std::string name = req.module + ": " + describe_target(e);
  stopwatch sw;
  // +1 for the NUL both JITs require.
  std::vector<std::uint8_t> ptx(static_cast<std::size_t>(e.raw_size) + 1);
  if (auto s = req.package->view.decompress_into(req.entry, ptx.data(), std::min(8u, os::hardware_threads())); !s)
    return error{errc::bad_package, 0, s.err().message, {}};
  ptx.back() = 0;
  decompress_ms = sw.ms();
  const core::byte_span ptx_bytes(ptx.data(), ptx.size());
  const jit_options opts = parse_jit_options(e.options);
  arch_unknown = false;
  if (nvj) {
    path = nvj->identify();
    return nvjitlink_compile(*nvj, ptx_bytes, name, opts, req.dev->arch, e.target.variant, arch_unknown);
  }
  auto ctx = primary_context::retain(*req.drv, *req.dev);
  if (!ctx) return ctx.error();
  scoped_context current(*req.drv, ctx->get());
  if (!current.ok())
    return error{errc::cuda, 0, req.dev->identify() + ": cannot make the primary context current for the JIT", {}};
  path = "culink";
  return jit_link(*req.drv, ptx_bytes, name, opts, std::nullopt);
}

}  // namespace

void jit_service::run(const std::shared_ptr<jit_task>& t) {
  const jit_request& req = t->req;
  const auto& e = req.package->view.entries().at(req.entry);
  std::string name = req.module + ": " + describe_target(e);
  auto& counters = cache::stats();

  auto finish = [&](result<jit_result> r) {
    bool ok = r.has_value();
    {
      std::lock_guard<std::mutex> lock(t->mu);
      t->outcome.emplace(std::move(r));
      t->state = task_state::done;
    }
    t->cv.notify_all();
    if (!ok) {
      // Forget failures: a later load may try again (the waiters have the error already).
      std::lock_guard<std::mutex> lock(mu_);
      auto it = tasks_.find(t->key);
      if (it != tasks_.end() && it->second == t) tasks_.erase(it);
    }
  };

  auto cache = get_sass_cache();
  const nvjitlink_lib* nvj = nullptr;
  // A hit: used at once. One from another driver is valid SASS too; it is re-JIT-ed for this driver
  // in the background, so the next process gets an exact hit (and a driver update never brings back
  // a slow start).
  auto try_cache = [&](const jit_key& key) -> bool {
    auto hit = cache->lookup(key);
    if (!hit) return false;
    jit_result jr;
    jr.sass = std::make_shared<const std::vector<std::uint8_t>>(std::move(hit->sass));
    jr.reused = jr.from_cache = true;
    jr.path = key.backend + " (cache " + hit->where + (hit->exact ? "" : ", other driver") + ")";
    (hit->exact ? counters.hits_exact : counters.hits_other_driver)++;
    log_line(log_level::debug, "JIT cache hit (" + hit->where + (hit->exact ? "" : ", built by another driver") + "): " + name);
    if (!hit->exact && cache->refresh_other_driver()) refresh(req, key, nvj);
    finish(std::move(jr));
    return true;
  };

  // nvJitLink when asked for and usable; the key names the path that produces the bytes.
  if (jit_backend_in_use() == jit_backend::nvjitlink) {
    const auto& lib = load_nvjitlink();
    if (lib) {
      nvj = *lib;
    } else {
      static std::once_flag warned;
      std::call_once(warned, [&] { log_line(log_level::warn, lib.error().message + "; using the driver's cuLink JIT"); });
    }
  }
  jit_key key = make_jit_key(req);
  if (nvj) key.backend = "nvjitlink-" + std::to_string(nvj->major) + "." + std::to_string(nvj->minor);
  if (try_cache(key)) return;
  // Cross-process single flight: wait for another process compiling this key, then look again.
  std::unique_ptr<compile_guard> guard = cache->begin_compile(key);
  if (try_cache(key)) return;
  counters.misses++;

  jit_result jr;
  bool arch_unknown = false;
  result<jit_output> out = compile_entry(req, nvj, arch_unknown, jr.path, jr.decompress_ms);
  if (!out && nvj && arch_unknown) {
    // A GPU newer than this nvJitLink: only the driver knows it.
    log_line(log_level::info, out.error().message + "; using the driver's cuLink JIT");
    key.backend = "culink";
    nvj = nullptr;
    guard.reset();
    if (try_cache(key)) return;
    guard = cache->begin_compile(key);
    if (try_cache(key)) return;
    double d2 = 0;
    out = compile_entry(req, nullptr, arch_unknown, jr.path, d2);
    jr.decompress_ms += d2;
  }
  if (!out) {
    error err = std::move(out).error();
    err.message = req.dev->identify() + ": " + err.message;
    finish(std::move(err));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++compiles_;
  }
  counters.jits++;
  counters.jit_us += static_cast<std::uint64_t>(out->wall_ms * 1000);
  jr.jit_ms = out->wall_ms;
  jr.info_log = std::move(out->info_log);
  cache->store(key, core::byte_span(out->sass.data(), out->sass.size()));
  guard.reset();  // after the entry is published: waiters find it when they get the lock
  jr.sass = std::make_shared<const std::vector<std::uint8_t>>(std::move(out->sass));
  log_line(log_level::debug, "JIT " + name + " for " + req.dev->identify() + " via " + jr.path + ": " +
                                 std::to_string(jr.jit_ms) + " ms, " + std::to_string(jr.sass->size()) + " bytes of SASS");
  finish(std::move(jr));
}

void jit_service::refresh(const jit_request& req, const jit_key& key, const nvjitlink_lib* nvj) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++refresh_pending_;
  }
  pool().submit([this, req, key, nvj] {
    auto cache = get_sass_cache();
    auto guard = cache->begin_compile(key);
    if (!cache->find(key, false)) {  // another process may have refreshed it meanwhile
      bool arch_unknown = false;
      std::string path;
      double decompress_ms = 0;
      auto out = compile_entry(req, nvj, arch_unknown, path, decompress_ms);
      if (out) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++compiles_;
        }
        auto& counters = cache::stats();
        counters.jits++;
        counters.refreshes++;
        counters.jit_us += static_cast<std::uint64_t>(out->wall_ms * 1000);
        cache->store(key, core::byte_span(out->sass.data(), out->sass.size()));
        log_line(log_level::debug, "JIT cache: re-JIT-ed " + req.module + " for this driver (" +
                                       std::to_string(out->wall_ms) + " ms)");
      } else {
        log_line(log_level::warn, "JIT cache: background re-JIT of " + req.module + " failed: " + out.error().message);
      }
    }
    guard.reset();
    std::lock_guard<std::mutex> lock(mu_);
    --refresh_pending_;
    refresh_cv_.notify_all();
  });
}

void jit_service::wait_refreshes() {
  std::unique_lock<std::mutex> lock(mu_);
  refresh_cv_.wait(lock, [&] { return refresh_pending_ == 0; });
}

result<jit_result> jit_service::wait(const std::shared_ptr<jit_task>& t) {
  bool mine = t->claim();
  if (mine) run(t);
  std::unique_lock<std::mutex> lock(t->mu);
  t->cv.wait(lock, [&] { return t->state == task_state::done; });
  result<jit_result> r = *t->outcome;  // a copy: several waiters
  if (r && !mine) {
    r->reused = true;
    r->jit_ms = 0;
    r->decompress_ms = 0;
  }
  return r;
}

bool jit_task_done(const std::shared_ptr<jit_task>& t) {
  std::lock_guard<std::mutex> lock(t->mu);
  return t->state == task_state::done;
}

result<jit_result> jit_service::compile(const jit_request& req) {
  bool created = false;
  auto t = get_or_create(req, created);
  return wait(t);
}

std::shared_ptr<jit_task> jit_service::enqueue(const jit_request& req) {
  bool created = false;
  auto t = get_or_create(req, created);
  if (created) {
    pool().submit([this, t] {
      if (t->claim()) run(t);
    });
  }
  return t;
}

}  // namespace fatpack::detail

namespace fatpack {

void set_jit_backend(jit_backend b) { detail::g_backend.store(static_cast<int>(b)); }

}  // namespace fatpack
