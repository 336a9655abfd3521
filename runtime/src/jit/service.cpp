// The JIT service (see service.hpp for the policy).
#include "jit/service.hpp"

#include "jit/nvjitlink.hpp"
#include "platform/clock.hpp"
#include "platform/env.hpp"
#include "platform/log.hpp"
#include "platform/os.hpp"

#include "fatpack/core/hex.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
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

// More JIT threads than this only add contention (the driver's JIT scales to about the core count).
constexpr unsigned max_jit_threads = 1024;

// The installed cache; null until the public API (or a test, or `fatpack warm`) installs one.
std::shared_ptr<sass_cache>& cache_slot() {
  static auto* c = new std::shared_ptr<sass_cache>();  // leaked: pool threads may use it until exit
  return *c;
}
std::mutex& cache_mu() {
  static auto* m = new std::mutex();
  return *m;
}
// What get_sass_cache() installs while nothing is (arm_sass_cache).
std::function<std::shared_ptr<sass_cache>()>& armed_cache() {
  static auto* f = new std::function<std::shared_ptr<sass_cache>()>();
  return *f;
}
// The installed cache, or null: an armed cache is not opened (what has nothing to flush).
std::shared_ptr<sass_cache> installed_cache() {
  std::lock_guard<std::mutex> lock(cache_mu());
  return cache_slot();
}

// Installs what `make` returns, the null cache where it returns null. Under cache_mu().
void install_made_cache(const std::function<std::shared_ptr<sass_cache>()>& make) {
  auto c = make();
  cache_slot() = c ? std::move(c) : std::make_shared<null_sass_cache>();
}

}  // namespace

void set_sass_cache(std::shared_ptr<sass_cache> cache) {
  std::lock_guard<std::mutex> lock(cache_mu());
  cache_slot() = cache ? std::move(cache) : std::make_shared<null_sass_cache>();
}

void install_sass_cache_if_none(const std::function<std::shared_ptr<sass_cache>()>& make) {
  std::lock_guard<std::mutex> lock(cache_mu());
  if (cache_slot()) return;
  install_made_cache(make);
}

void arm_sass_cache(std::function<std::shared_ptr<sass_cache>()> make) {
  std::lock_guard<std::mutex> lock(cache_mu());
  if (!cache_slot() && !armed_cache()) armed_cache() = std::move(make);
}

bool sass_cache_installed() {
  std::lock_guard<std::mutex> lock(cache_mu());
  return cache_slot() != nullptr;
}

void uninstall_sass_cache() {
  std::lock_guard<std::mutex> lock(cache_mu());
  cache_slot().reset();
  armed_cache() = nullptr;
}

std::shared_ptr<sass_cache> get_sass_cache() {
  std::lock_guard<std::mutex> lock(cache_mu());
  if (!cache_slot() && armed_cache()) {
    auto make = std::move(armed_cache());
    armed_cache() = nullptr;
    install_made_cache(make);
  }
  if (!cache_slot()) {
    static auto* none = new std::shared_ptr<sass_cache>(std::make_shared<null_sass_cache>());
    return *none;
  }
  return cache_slot();
}

std::string jit_key::str() const {
  std::string s = backend;
  s += "|ptx=" + core::hex16(ptx_xxh3) + ":" + std::to_string(ptx_size);
  if (!piece_of.empty()) s += "|entry=" + piece_of;
  s += "|src=" + ptx_target.str() + "@" + ptx_isa.str();
  s += "|cc=" + std::to_string(target_arch) + core::variant_suffix(target_variant);
  s += "|opt=" + options;
  if (!link_parts.empty()) s += "|link=" + link_parts;
  s += "|drv=" + std::to_string(driver_version);
  return s;
}

jit_key make_jit_key(const jit_request& req) {
  const core::entry_info& e = req.package->view.entries().at(req.entry);
  const std::uint32_t target_arch = req.target_arch ? req.target_arch : req.dev->arch;
  const int driver_version = req.drv->version;
  jit_key k;
  k.ptx_xxh3 = req.piece ? req.piece->xxh3 : e.raw_xxh3;
  k.ptx_size = req.piece ? req.piece->size : e.raw_size;
  // A piece's key also names its entry as the package declares it: a piece's own hash and size come
  // from the package's plan, which an edited package may keep while its PTX changes; with the entry
  // in the key such a package misses, and the piece is rebuilt from its PTX and checked.
  if (req.piece) k.piece_of = core::hex16(e.raw_xxh3) + ":" + std::to_string(e.raw_size);
  k.ptx_target = e.target;
  k.ptx_isa = e.ptx_isa;
  k.target_arch = target_arch;
  // a/f PTX compiles to a/f SASS for the device; plain PTX to plain SASS.
  k.target_variant = e.target.variant;
  // What the JIT is given, not the text: the same options spelt differently share a key, and text no
  // JIT applies (-v, an invalid value) changes nothing in the SASS.
  k.options = parse_jit_options(e.options).canonical();
  // LTO-IR has one path, nvJitLink, whatever backend PTX uses.
  k.backend = jit_backend_in_use() == jit_backend::nvjitlink || e.target.kind == core::entry_kind::ltoir ? "nvjitlink"
                                                                                                          : "culink";
  k.driver_version = driver_version;
  for (std::uint16_t part = 1; part < e.link_parts; ++part) {
    const core::entry_info& p = req.package->view.entries().at(req.entry + part);
    k.link_parts += (part > 1 ? "," : "") + core::hex16(p.raw_xxh3) + ":" + std::to_string(p.raw_size);
  }
  return k;
}

namespace {
std::atomic<int> g_backend{-1};  // -1: not set through the API (FATPACK_JIT_BACKEND decides)
}  // namespace

void set_jit_backend_override(jit_backend b) { g_backend.store(static_cast<int>(b)); }

jit_backend jit_backend_in_use() {
  int b = g_backend.load();
  if (b >= 0) return static_cast<jit_backend>(b);
  const char* env = os::getenv("FATPACK_JIT_BACKEND");
  if (!env || !*env) return jit_backend::culink;
  const std::string v = lower_word(env);
  if (v == "nvjitlink") return jit_backend::nvjitlink;
  if (v != "culink") {  // a typo must not pass unnoticed as the other back end
    static std::atomic<bool> warned{false};
    log_once(warned, log_level::warn,
             "FATPACK_JIT_BACKEND='" + core::printable_text(env, 64) + "' is neither culink nor nvjitlink; using culink");
  }
  return jit_backend::culink;
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
  log_deferral defer;  // the lines below go out after mu_ is released (platform/log.hpp)
  std::lock_guard<std::mutex> lock(mu_);
  if (!pool_) {
    unsigned n = std::min(threads_, max_jit_threads);
    if (n == 0) {
      const char* env = os::getenv("FATPACK_JIT_THREADS");
      if (env && *env) {
        // Digits only, 1..max_jit_threads; anything else gets one warning and the default.
        char* end = nullptr;
        errno = 0;
        const unsigned long v = std::strtoul(env, &end, 10);
        const bool digits = std::isdigit(static_cast<unsigned char>(env[0])) && end && *end == 0 && errno == 0;
        if (digits && v >= 1 && v <= max_jit_threads) {
          n = static_cast<unsigned>(v);
        } else {
          log_line(log_level::warn, std::string("FATPACK_JIT_THREADS=") + env + " is not a thread count (1.." +
                                        std::to_string(max_jit_threads) + "); using the hardware threads (" +
                                        std::to_string(os::hardware_threads()) + ")");
        }
      }
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

// "ptxas options not passed to the JIT: ..." for what parse_jit_options did not apply; "" when all was.
std::string dropped_options_note(const jit_options& o) {
  std::string s;
  auto list = [](const std::vector<std::string>& v) {
    std::string l;
    for (const auto& w : v) l += (l.empty() ? "" : ", ") + w;
    return l;
  };
  if (!o.invalid.empty()) s = "invalid ptxas options not passed to the JIT: " + list(o.invalid);
  if (!o.ignored.empty())
    s += (s.empty() ? "" : "; ") + std::string("ptxas options no JIT takes, not passed: ") + list(o.ignored);
  return s;
}

std::uint32_t target_of(const jit_request& req) { return req.target_arch ? req.target_arch : req.dev->arch; }

// Decompresses the request's PTX entry (only that one, NUL-terminated) and compiles it: nvJitLink
// when `nvj` is given, else cuLink in the device's primary context (for another CC than the
// device's, through CU_JIT_TARGET). `arch_unknown`: nvJitLink does not know the target (a GPU newer
// than the library); the caller then retries with cuLink.
result<jit_output> compile_entry(const jit_request& req, const nvjitlink_lib* nvj, bool& arch_unknown, std::string& path,
                                 double& decompress_ms) {
  const auto& e = req.package->view.entries().at(req.entry);
  const std::string name = req.module + ": " + describe_target(e);
  const std::uint32_t target = target_of(req);
  stopwatch sw;
  // Every part of a link group (the reader checked that they follow the first one), else the entry.
  const std::size_t parts = e.in_link_group() ? e.link_parts : 1;
  std::vector<std::vector<std::uint8_t>> ptx(parts);
  std::vector<core::byte_span> ptx_bytes;
  // A piece (load/pieces.hpp): its text with the NUL, checked against its plan when it was made.
  std::string made;
  if (req.piece) {
    const std::string* text = &req.piece->ptx;
    if (text->empty()) {
      if (!req.piece->make) return error{errc::jit_failed, 0, name + ": a piece without its text", {}};
      auto t = req.piece->make();
      if (!t) return t.error();
      made = std::move(*t);
      text = &made;
    }
    ptx_bytes.emplace_back(reinterpret_cast<const std::uint8_t*>(text->data()), text->size());
  }
  for (std::size_t k = 0; k < parts && !req.piece; ++k) {
    // +1 for the NUL both JITs require. raw_size is bounded by the package reader (blocks and block
    // size); an allocation that still fails throws bad_alloc, which run() turns into this task's error.
    const std::size_t index = req.entry + k;
    ptx[k].resize(static_cast<std::size_t>(req.package->view.entries().at(index).raw_size) + 1);
    if (auto s = req.package->view.decompress_into(index, ptx[k].data(), std::min(8u, os::hardware_threads())); !s) {
      return s.error();  // bad_package with the fault (checksum, codec, ...) as its reason
    }
    ptx[k].back() = 0;
    // PTX with its NUL; LTO-IR is binary and given exactly.
    ptx_bytes.emplace_back(ptx[k].data(), ptx[k].size() - (e.target.kind == core::entry_kind::ltoir ? 1 : 0));
  }
  decompress_ms = sw.ms();
  const jit_options opts = parse_jit_options(e.options);
  // Options the JIT is not given are said, in the compile's info log and once as a warning.
  auto say_dropped = [&](result<jit_output> out) {
    const std::string note = dropped_options_note(opts);
    if (out && !note.empty()) {
      log_line(log_level::warn, "package '" + std::string(req.package->view.name()) + "' (" +
                                    std::string(req.package->view.source()) + "), " + name + ": " + note);
      out->info_log += (out->info_log.empty() ? "" : "\n") + ("fatpack: " + note);
    }
    return out;
  };
  arch_unknown = false;
  if (e.target.kind == core::entry_kind::ltoir) {
    // Only nvJitLink links LTO-IR; selection admitted this entry because one is loaded.
    const auto& lib = load_nvjitlink();
    if (!lib) return error{errc::jit_failed, 0, name + ": LTO-IR needs nvJitLink: " + lib.error().message, {}};
    path = (*lib)->identify() + " (LTO)";
    return say_dropped(nvjitlink_compile(**lib, ptx_bytes, name, opts, target, e.target.variant, arch_unknown, true));
  }
  if (nvj) {
    path = nvj->identify();
    return say_dropped(nvjitlink_compile(*nvj, ptx_bytes, name, opts, target, e.target.variant, arch_unknown));
  }
  auto ctx = primary_context::retain(*req.drv, *req.dev);
  if (!ctx) return ctx.error();
  scoped_context current(*req.drv, ctx->get());
  if (!current.ok())
    return error{errc::cuda, 0, req.dev->identify() + ": cannot make the primary context current for the JIT", {}};
  path = "culink";
  relaxed_capture relaxed(*req.drv);  // a JIT on a thread that is capturing a stream (platform/driver.hpp)
  std::optional<std::uint32_t> cu_target;
  if (target != req.dev->arch) {
    cu_target = target;
    // CU_COMPUTE_ACCELERATED_TARGET_BASE / CU_COMPUTE_FAMILY_TARGET_BASE: a/f PTX gives a/f SASS.
    if (e.target.variant == core::arch_variant::arch_specific) *cu_target += 0x10000;
    if (e.target.variant == core::arch_variant::family) *cu_target += 0x20000;
  }
  return say_dropped(jit_link(*req.drv, ptx_bytes, name, opts, cu_target));
}

// nvJitLink when it was asked for and can be loaded; null for cuLink.
const nvjitlink_lib* pick_nvjitlink() {
  if (jit_backend_in_use() != jit_backend::nvjitlink) return nullptr;
  const auto& lib = load_nvjitlink();
  if (lib) return *lib;
  static std::atomic<bool> warned{false};
  log_once(warned, log_level::warn, lib.error().message + "; using the driver's cuLink JIT");
  return nullptr;
}

// The key the cache sees: it names the path that produces the bytes (LTO-IR: always nvJitLink).
jit_key cache_key(const jit_request& req, const nvjitlink_lib* nvj) {
  jit_key key = make_jit_key(req);
  if (req.package->view.entries().at(req.entry).target.kind == core::entry_kind::ltoir) {
    const auto& lib = load_nvjitlink();
    if (lib) nvj = *lib;
  }
  key.backend = nvj ? "nvjitlink-" + std::to_string(nvj->major) + "." + std::to_string(nvj->minor) : "culink";
  return key;
}

std::string describe_exception(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const std::bad_alloc&) {
    return "out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    return std::string("an exception: ") + e.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

// Exit: finish the stores still queued and the background re-JITs already running, for at most this long.
constexpr long exit_flush_ms = 10000;

}  // namespace

jit_key jit_service::cache_key_for(const jit_request& req) { return cache_key(req, pick_nvjitlink()); }

void jit_service::forget(const jit_request& req) {
  const std::string key = make_jit_key(req).str();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(key);
  if (it != tasks_.end() && jit_task_done(it->second)) tasks_.erase(it);
}

void jit_service::background(std::function<void()> job, bool store_queue) {
  // The job's lines go out when it has ended, after it counted itself done: flush_stores and the
  // exit flush may be waiting for it on a thread that holds the application's locks, which the
  // application's log callback may want (platform/log.hpp).
  auto deferred = [job] {
    log_deferral defer;
    job();
  };
  try {
    if (store_queue) {
      core::thread_pool* q;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!store_queue_) store_queue_.reset(new core::thread_pool(1));  // leaked with the service
        q = store_queue_.get();
      }
      q->submit(deferred);
    } else {
      pool().submit(deferred);
    }
  } catch (...) {
    job();  // no pool thread could be started: do it here rather than lose it
  }
}

void jit_service::at_exit_flush(bool after_jit) {
  // Two registrations, one body (it runs once, in whichever handler exit() calls first). The early
  // one (enqueue: queued pieces, warm-ups) exists before the pool can be inside the driver, so a
  // process that exits having compiled nothing itself (its own pieces were cache hits) still waits
  // for the compiles running on the pool. The late one (after a compile) is registered after what
  // the driver or nvJitLink registers lazily at a first JIT, so it runs before their teardown.
  static std::once_flag early, late;
  std::call_once(after_jit ? late : early, [] {
    std::atexit([] {
      static std::atomic<bool> ran{false};
      if (ran.exchange(true)) return;
      // In a fork() child flush_at_exit returns at once for the parent's work (parents_work) and
      // waits for the child's own.
      if (!instance().flush_at_exit(exit_flush_ms))
        log_line(log_level::warn, "JIT cache: exiting with stores or background re-JITs still running after " +
                                      std::to_string(exit_flush_ms / 1000) + " s; they are lost");
      // Then the cache's own background work (a fleet cache's uploads of what was just stored).
      std::shared_ptr<sass_cache> installed = installed_cache();
      if (installed && !instance().parents_work()) installed->flush_at_exit();
    });
  });
}

bool jit_service::flush_at_exit(long timeout_ms) {
  if (parents_work()) return true;  // see flush_stores
  exiting_.store(true);  // re-JITs not started yet are dropped (refresh)
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return stores_pending_ == 0 && refresh_pending_ == 0 && queued_running_ == 0; });
}

void jit_service::publish(std::shared_ptr<sass_cache> cache, const jit_key& key,
                          std::shared_ptr<const sass_bytes> sass, std::unique_ptr<compile_guard> guard) {
  at_exit_flush(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    adopt_counts_locked();
    ++stores_pending_;
  }
  std::shared_ptr<compile_guard> g(std::move(guard));
  background([this, cache, key, sass, g]() mutable {
    try {
      cache->store(key, core::byte_span(sass->data(), sass->size()));
    } catch (...) {
      // sass_cache::store is noexcept by contract; nothing of a store may stop the pool.
    }
    g.reset();  // after the entry is published: processes waiting on the lock find it
    std::lock_guard<std::mutex> lock(mu_);
    --stores_pending_;
    idle_cv_.notify_all();
  }, /*store_queue=*/true);
}

void jit_service::adopt_counts_locked() {
  const int me = os::process_id();
  if (work_pid_.load() == me) return;
  // A fork() child queueing its own first work: the counts it inherited are the parent's, whose
  // threads it does not have.
  refresh_pending_ = stores_pending_ = queued_running_ = queued_pending_ = 0;
  work_pid_.store(me);
}

bool jit_service::parents_work() const {
  const int owner = work_pid_.load();
  return owner != 0 && owner != os::process_id();
}

bool jit_service::flush_stores(long timeout_ms) {
  // Before any lock: in a fork() child the pending work is the parent's, and a parent thread may
  // have held mu_ at fork time. Nothing of it will ever finish here.
  if (parents_work()) return true;
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [&] { return stores_pending_ == 0; };
  if (timeout_ms < 0) {
    idle_cv_.wait(lock, idle);
    return true;
  }
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), idle);
}

void jit_service::count_compile(double ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++compiles_;
  }
  counters_.jits++;
  counters_.jit_us += static_cast<std::uint64_t>(ms * 1000);
}

void jit_service::run(const std::shared_ptr<jit_task>& t) {
  try {
    run_guarded(t);
  } catch (...) {
    const jit_request& req = t->req;
    std::string what = describe_exception(std::current_exception());
    error err{errc::jit_failed, 0,
              "module '" + req.module + "' entry " + std::to_string(req.entry) + " on " + req.dev->identify() +
                  ": the JIT failed with " + what,
              {}};
    {
      std::lock_guard<std::mutex> lock(t->mu);
      if (t->state == task_state::done) return;  // finished before the throw (a log line, say)
      t->outcome.emplace(std::move(err));
      t->state = task_state::done;
    }
    t->cv.notify_all();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tasks_.find(t->key);
    if (it != tasks_.end() && it->second == t) tasks_.erase(it);
  }
}

void jit_service::run_guarded(const std::shared_ptr<jit_task>& t) {
  const jit_request& req = t->req;
  const auto& e = req.package->view.entries().at(req.entry);
  std::string name = req.module + ": " + describe_target(e);

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
  const nvjitlink_lib* nvj = pick_nvjitlink();
  // A hit: used at once. One from another driver is valid SASS too; it is re-JIT-ed for this driver
  // in the background, so the next process gets an exact hit (and a driver update never brings back
  // a slow start).
  auto try_cache = [&](const jit_key& key) -> bool {
    if (req.bypass_cache) return false;
    auto hit = cache->lookup(key);
    if (!hit) return false;
    jit_result jr;
    jr.sass = std::make_shared<const sass_bytes>(std::move(hit->sass));
    jr.reused = jr.from_cache = true;
    jr.other_driver = !hit->exact;
    jr.path = key.backend + " (cache " + hit->where + (hit->exact ? "" : ", other driver") + ")";
    (hit->exact ? counters_.hits_exact : counters_.hits_other_driver)++;
    log_line(log_level::debug, "JIT cache hit (" + hit->where + (hit->exact ? "" : ", built by another driver") + "): " + name);
    if (!hit->exact && cache->refresh_other_driver()) refresh(req, key, nvj);
    finish(std::move(jr));
    return true;
  };

  jit_key key = cache_key(req, nvj);
  if (try_cache(key)) return;
  // Cross-process single flight: wait for another process compiling this key, then look again.
  std::unique_ptr<compile_guard> guard = cache->begin_compile(key);
  if (try_cache(key)) return;
  counters_.misses++;

  jit_result jr;
  bool arch_unknown = false;
  result<jit_output> out = compile_entry(req, nvj, arch_unknown, jr.path, jr.decompress_ms);
  if (!out && nvj && arch_unknown && e.target.kind != core::entry_kind::ltoir) {
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
  count_compile(out->wall_ms);
  jr.jit_ms = out->wall_ms;
  jr.info_log = std::move(out->info_log);
  jr.sass = std::make_shared<const sass_bytes>(std::move(out->sass));
  log_line(log_level::debug, "JIT " + name + " for " + req.dev->identify() + " via " + jr.path + ": " +
                                 std::to_string(jr.jit_ms) + " ms, " + std::to_string(jr.sass->size()) + " bytes of SASS");
  // The store (and the compile lock with it) goes to the pool; the waiters get the SASS now.
  publish(cache, key, jr.sass, std::move(guard));
  finish(std::move(jr));
}

void jit_service::refresh(const jit_request& req, const jit_key& key, const nvjitlink_lib* nvj) {
  compile_in_background(req, key, nvj, false);
}

bool jit_service::cached_exact(const jit_request& req) {
  return get_sass_cache()->find(cache_key_for(req), false).has_value();
}

bool jit_service::upgrade(const jit_request& req) {
  if (std::string_view(get_sass_cache()->name()) == "none") return false;
  const nvjitlink_lib* nvj = pick_nvjitlink();
  compile_in_background(req, cache_key(req, nvj), nvj, true);
  return true;
}

void jit_service::compile_in_background(const jit_request& req, const jit_key& key, const nvjitlink_lib* nvj,
                                        bool is_upgrade) {
  at_exit_flush(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    adopt_counts_locked();
    ++refresh_pending_;
  }
  const std::string what = is_upgrade ? "background upgrade of " + req.module + " (" +
                                            describe_target(req.package->view.entries().at(req.entry)) + " for " +
                                            req.dev->identify() + ")"
                                      : "background re-JIT of " + req.module + " for this driver";
  background([this, req, key, nvj, is_upgrade, what] {
    try {
      // The process is exiting: a compile not started yet is dropped (the next process does it);
      // the exit flush waits only for those already running in the driver.
      if (!exiting_.load()) {
        auto cache = get_sass_cache();
        auto guard = cache->begin_compile(key);
        if (!cache->find(key, false)) {  // another process may have compiled it meanwhile
          bool arch_unknown = false;
          std::string path;
          double decompress_ms = 0;
          auto out = compile_entry(req, nvj, arch_unknown, path, decompress_ms);
          if (out) {
            count_compile(out->wall_ms);
            (is_upgrade ? counters_.upgrades : counters_.refreshes)++;
            cache->store(key, core::byte_span(out->sass.data(), out->sass.size()));
            log_line(log_level::debug, "JIT cache: " + what + " done (" + std::to_string(out->wall_ms) + " ms)");
          } else {
            log_line(log_level::warn, "JIT cache: " + what + " failed: " + out.error().message);
          }
        }
      }
    } catch (...) {
      log_line(log_level::warn, "JIT cache: " + what + " failed with " + describe_exception(std::current_exception()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    --refresh_pending_;
    idle_cv_.notify_all();
  });
}

void jit_service::wait_refreshes() {
  if (parents_work()) return;  // a fork() child: see flush_stores
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return refresh_pending_ == 0 && stores_pending_ == 0 && queued_pending_ == 0; });
  }
  // E.g. a fleet cache's uploads of what was just stored. An armed cache that was never opened has
  // nothing to flush: opening it here would create the cache directory after a load of SASS alone.
  if (auto installed = installed_cache()) installed->flush(-1);
}

result<jit_result> jit_service::wait(const std::shared_ptr<jit_task>& t) {
  // Before any lock: in a fork() child the parent's locks and running tasks are not ours to wait on.
  if (auto s = usable_in_this_process(*t->req.drv); !s) return s.error();
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

namespace {

// check_stored for the request's entry and, for a link group, each of its other parts.
status check_stored_parts(const jit_request& req) {
  if (req.piece) return {};  // made from the decompressed entry, whose raw checksum was checked then
  const auto& e = req.package->view.entries().at(req.entry);
  for (std::size_t k = 0; k < std::max<std::size_t>(1, e.link_parts); ++k)
    if (auto s = req.package->view.check_stored(req.entry + k); !s) return s;
  return {};
}

}  // namespace

bool jit_task_done(const std::shared_ptr<jit_task>& t) {
  if (!usable_in_this_process(*t->req.drv)) return true;  // a fork() child: wait() says why
  std::lock_guard<std::mutex> lock(t->mu);
  return t->state == task_state::done;
}

result<jit_result> jit_service::compile(const jit_request& req) {
  if (auto s = usable_in_this_process(*req.drv); !s) return s.error();
  // The key comes from the entry table; a hit (in memory or on disk) never decodes the payload. So
  // check its stored bytes here, or a package `verify` refuses would load (its payload damaged, its
  // table intact). One XXH3 pass over the stored (compressed) PTX.
  if (auto s = check_stored_parts(req); !s) return s.error();
  std::shared_ptr<jit_task> t;
  try {
    bool created = false;
    t = get_or_create(req, created);
  } catch (...) {
    return error{errc::jit_failed, 0, "module '" + req.module + "': cannot start the JIT: " +
                                          describe_exception(std::current_exception()), {}};
  }
  return wait(t);
}

result<std::shared_ptr<jit_task>> jit_service::enqueue(const jit_request& req) {
  if (auto s = usable_in_this_process(*req.drv); !s) return s.error();
  if (auto s = check_stored_parts(req); !s) return s.error();  // as compile()
  try {
    bool created = false;
    auto t = get_or_create(req, created);
    if (created) {
      // A pool that cannot take the job leaves it queued: wait() takes it over.
      bool counted = false;
      // The exit flush, registered now: a load whose own pieces are cache hits compiles nothing
      // before it returns, and the program may exit while the pool compiles the others (a pool
      // thread inside cuLink while exit() destroys the driver's statics). publish() registers it
      // again after a compile, after what the driver may register lazily at its first JIT.
      try {
        at_exit_flush(false);
        {
          std::lock_guard<std::mutex> lock(mu_);
          adopt_counts_locked();
          ++queued_pending_;
          counted = true;
        }
        pool().submit([this, t] {
          // Lines go out after the task is done: a waiter may hold the application's locks, which
          // the application's log callback may want (platform/log.hpp).
          log_deferral defer;
          {
            // An exiting process drops queued compiles (kernel-granular JIT queues a module's
            // pieces, and a program may exit having used one): a pool thread must not be inside the
            // driver while the process destroys its statics. exiting_ is read under mu_, which
            // flush_at_exit takes after setting it, so it waits for every compile that started.
            std::lock_guard<std::mutex> lock(mu_);
            if (exiting_.load()) {
              --queued_pending_;
              return;
            }
            ++queued_running_;
          }
          if (t->claim()) run(t);
          std::lock_guard<std::mutex> lock(mu_);
          --queued_running_;
          --queued_pending_;
          idle_cv_.notify_all();
        });
      } catch (...) {
        // Not queued after all (no thread could be started): wait() takes the task over.
        std::lock_guard<std::mutex> lock(mu_);
        if (counted) --queued_pending_;
        idle_cv_.notify_all();
      }
    }
    return t;
  } catch (...) {
    return error{errc::jit_failed, 0, "module '" + req.module + "': cannot queue the JIT: " +
                                          describe_exception(std::current_exception()), {}};
  }
}

}  // namespace fatpack::detail
