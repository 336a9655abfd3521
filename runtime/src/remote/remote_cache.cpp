// The fleet cache layer (remote_cache.hpp).
#include "remote/remote_cache.hpp"

#include "cache/entry.hpp"
#include "cache/fs.hpp"
#include "cache/key.hpp"
#include "cache/stats.hpp"
#include "platform/log.hpp"
#include "platform/os.hpp"
#include "remote/signature.hpp"

#include "fatpack/core/thread_pool.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>
#include <unistd.h>

namespace fatpack::detail::remote {

namespace {

// Bounds of the background queue: a process that compiles faster than the store takes entries
// drops the surplus (the next process uploads them) instead of growing without limit.
constexpr std::size_t max_queued_tasks = 256;
constexpr std::size_t max_queued_bytes = 512ull << 20;
constexpr int breaker_threshold = 3;
constexpr std::chrono::seconds breaker_cool_down{60};
// How often a node waiting for another node's lease looks for its entry.
constexpr std::chrono::milliseconds lease_poll{200};
// How long a remote miss stands for the same key in this process (the lookups around the JIT
// service's lock, a second load of the module).
constexpr std::chrono::seconds recent_miss_ttl{10};

// "<host>:<pid>:<n>": n tells apart two layers of one process (each holds its own leases).
std::string lease_owner() {
  static std::atomic<int> layers{0};
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return std::string(host[0] ? host : "unknown") + ":" + std::to_string(::getpid()) + ":" + std::to_string(++layers);
}

std::string state_file_for(const std::string& state_dir, const std::string& url) {
  if (state_dir.empty()) return {};
  return state_dir + "/remote-" + key_id_hex("state\n" + redact_url(url) + std::string(32, ' ')) + ".state";
}

class lease_guard final : public compile_guard {
 public:
  lease_guard(std::unique_ptr<compile_guard> local, std::shared_ptr<remote_cache> layer, std::string key)
      : local_(std::move(local)), layer_(std::move(layer)), key_(std::move(key)) {}
  ~lease_guard() override {
    // After the JIT service's store: the entry is local and its upload queued. The lease goes after
    // that upload (release_lease), not now: a waiting node that took it before the entry reached
    // the remote would compile the key again.
    layer_->release_lease(key_);
  }

 private:
  std::unique_ptr<compile_guard> local_;
  std::shared_ptr<remote_cache> layer_;
  std::string key_;
};

}  // namespace

remote_counters& counters() {
  static remote_counters c;
  return c;
}

remote_cache::remote_cache(std::shared_ptr<sass_cache> local, remote_config cfg, std::string state_dir)
    : local_(std::move(local)),
      cfg_(std::move(cfg)),
      breaker_(state_file_for(state_dir, cfg_.store.url), breaker_threshold, breaker_cool_down),
      owner_(lease_owner()),
      q_(std::make_shared<queue_state>()) {}

remote_cache::~remote_cache() {
  std::lock_guard<std::mutex> g(q_->mu);
  q_->stop = true;
  q_->cv.notify_all();
}

std::shared_ptr<remote_cache> remote_cache::create(std::shared_ptr<sass_cache> local, remote_config cfg,
                                                   std::string state_dir) {
  return std::shared_ptr<remote_cache>(new remote_cache(std::move(local), std::move(cfg), std::move(state_dir)));
}

std::shared_ptr<remote_cache> remote_cache::over(std::shared_ptr<sass_cache> local, remote_config cfg,
                                                 std::unique_ptr<remote_store> store, std::string state_dir) {
  auto c = create(std::move(local), std::move(cfg), std::move(state_dir));
  c->store_ = std::move(store);
  c->store_tried_ = true;
  return c;
}

std::string remote_cache::describe() const {
  return redact_url(cfg_.store.url) + " (" + (cfg_.read_write ? "read-write" : "read-only") + ", " +
         (cfg_.key.empty() ? "unsigned" : "signed, key id " + key_id_hex(cfg_.key)) + ")";
}

void remote_cache::warn_once(const std::string& kind, const std::string& text) {
  {
    std::lock_guard<std::mutex> g(warn_mu_);
    if (!warned_.insert(kind).second) {
      log_line(log_level::debug, text);
      return;
    }
  }
  log_line(log_level::warn, text);
}

remote_store* remote_cache::store_or_null() {
  std::lock_guard<std::mutex> g(store_mu_);
  if (!store_tried_) {
    store_tried_ = true;
    std::string why;
    store_ = open_store(cfg_.store, why);
    if (!store_)
      warn_once("open", "JIT cache: the fleet cache " + redact_url(cfg_.store.url) + " is not used: " + why);
    else
      log_line(log_level::debug, "JIT cache: fleet cache " + describe());
  }
  return store_.get();
}

void remote_cache::on_fault(const std::string& what) {
  counters().faults++;
  breaker_.fault();
  warn_once("fault", "JIT cache: fleet cache " + redact_url(cfg_.store.url) + ": " + what +
                         "; treated as a miss (after " + std::to_string(breaker_threshold) +
                         " faults in a row the remote is skipped for " + std::to_string(breaker_cool_down.count()) + " s)");
}

std::optional<std::vector<std::uint8_t>> remote_cache::fetch(const jit_key& key) {
  const cache::full_key k = cache::make_full_key(key);
  const std::string rkey = remote_key(k);
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> g(recent_mu_);
    if (auto p = prefetched_.find(rkey); p != prefetched_.end()) {  // checked when it was fetched
      auto cubin = std::move(p->second);
      prefetched_.erase(p);
      counters().hits++;
      return cubin;
    }
    auto it = recent_misses_.find(rkey);
    if (it != recent_misses_.end() && now - it->second < recent_miss_ttl) return std::nullopt;
    if (recent_misses_.size() > 4096) recent_misses_.clear();  // bounded; a forgotten miss costs one request
  }
  auto remember_miss = [&] {
    std::lock_guard<std::mutex> g(recent_mu_);
    recent_misses_[rkey] = now;
  };
  if (breaker_.skipping()) {
    counters().skipped++;
    remember_miss();
    return std::nullopt;
  }
  remote_store* s = store_or_null();
  if (!s) return std::nullopt;
  reply r = s->get(rkey);
  if (r.what == outcome::fault) {
    on_fault(r.message);
    remember_miss();
    return std::nullopt;
  }
  breaker_.success();
  if (r.what != outcome::hit) {
    counters().misses++;
    remember_miss();
    return std::nullopt;
  }
  auto cubin = check_body(k, rkey, key.target_arch, r.body);
  if (!cubin) {
    remember_miss();
    return std::nullopt;
  }
  counters().hits++;
  return cubin;
}

std::optional<std::vector<std::uint8_t>> remote_cache::check_body(const cache::full_key& k, const std::string& rkey,
                                                                  std::uint32_t target_arch,
                                                                  const std::vector<std::uint8_t>& body) {
  std::string why;
  auto at = open_envelope(rkey, body, cfg_.key, why);
  std::optional<std::vector<std::uint8_t>> cubin;
  if (at) {
    cache::entry_header h;
    std::string driver_text;
    cache::expected_key want{&k.code, &k.driver, target_arch};
    cubin = cache::decode_entry(core::byte_span(body.data() + *at, body.size() - *at), want, h, driver_text, why);
  }
  if (!cubin) {
    counters().rejected++;
    counters().misses++;
    warn_once("rejected", "JIT cache: fleet cache " + redact_url(cfg_.store.url) + ": entry " + rkey +
                              " refused: " + why + "; treated as a miss");
  }
  return cubin;
}

std::size_t remote_cache::prefetch(const std::vector<jit_key>& keys) noexcept {
  std::size_t hits = 0;
  try {
    remote_store* s = store_or_null();
    if (!s) return 0;
    constexpr std::size_t batch = 64;
    for (std::size_t at = 0; at < keys.size(); at += batch) {
      if (breaker_.skipping()) {
        counters().skipped++;
        break;
      }
      std::vector<cache::full_key> full;
      std::vector<std::string> rkeys;
      for (std::size_t i = at; i < std::min(keys.size(), at + batch); ++i) {
        full.push_back(cache::make_full_key(keys[i]));
        rkeys.push_back(remote_key(full.back()));
      }
      std::vector<reply> replies = s->get_many(rkeys);
      if (replies.size() != rkeys.size()) {
        on_fault("a batch of " + std::to_string(rkeys.size()) + " lookups got " + std::to_string(replies.size()) +
                 " replies");
        break;
      }
      for (std::size_t i = 0; i < replies.size(); ++i) {
        if (replies[i].what == outcome::fault) {
          on_fault(replies[i].message);
          continue;
        }
        if (replies[i].what != outcome::hit) continue;  // find() asks again and counts the miss
        if (auto cubin = check_body(full[i], rkeys[i], keys[at + i].target_arch, replies[i].body)) {
          std::lock_guard<std::mutex> g(recent_mu_);
          prefetched_[rkeys[i]] = std::move(*cubin);
          ++hits;
        }
      }
    }
  } catch (const std::exception& e) {
    warn_once("prefetch", std::string("JIT cache: fleet cache batch lookup failed: ") + e.what());
  }
  return hits;
}

std::optional<cache_hit> remote_cache::find(const jit_key& key, bool allow_other_driver) noexcept {
  try {
    if (auto hit = local_->find(key, allow_other_driver)) return hit;
    auto cubin = fetch(key);
    if (!cubin) return std::nullopt;
    // Written into the local cache off the load path: the next process of this machine reads it
    // from disk.
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(*cubin);
    auto self = shared_from_this();
    enqueue([self, key, bytes] { self->local_->store(key, core::byte_span(bytes->data(), bytes->size())); },
            bytes->size());
    return cache_hit{std::move(*cubin), true, "remote " + redact_url(cfg_.store.url)};
  } catch (const std::exception& e) {
    warn_once("find", std::string("JIT cache: fleet cache lookup failed: ") + e.what());
  }
  return std::nullopt;
}

std::string remote_cache::store(const jit_key& key, core::byte_span sass) noexcept {
  std::string why = local_->store(key, sass);  // the local layer's: the upload is asynchronous
  upload(key, sass);
  return why;
}

void remote_cache::upload(const jit_key& key, core::byte_span sass) noexcept {
  if (!cfg_.read_write) return;
  try {
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(sass.begin(), sass.end());
    auto self = shared_from_this();
    enqueue([self, key, bytes] {
      if (self->breaker_.skipping()) return;
      remote_store* s = self->store_or_null();
      if (!s) return;
      const cache::full_key k = cache::make_full_key(key);
      std::string why;
      auto entry = cache::encode_entry(k, core::byte_span(bytes->data(), bytes->size()),
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::system_clock::now().time_since_epoch()).count(),
                                       why);
      if (!entry) {
        log_line(log_level::debug, "JIT cache: not uploaded: " + why);
        return;
      }
      const std::string rkey = remote_key(k);
      reply r = s->put_if_absent(rkey, seal(rkey, *entry, self->cfg_.key));
      if (r.what == outcome::stored) {
        counters().uploads++;
        self->breaker_.success();
      } else if (r.what == outcome::exists) {
        counters().present++;
        self->breaker_.success();
      } else {
        self->on_fault("upload of " + rkey + ": " + r.message);
      }
    }, bytes->size());
  } catch (const std::exception& e) {
    warn_once("store", std::string("JIT cache: fleet cache upload not queued: ") + e.what());
  }
}

void remote_cache::release_lease(const std::string& rkey) noexcept {
  try {
    // The layer's queue runs its tasks in order on one thread: this runs after the uploads queued
    // before it, this compile's among them. (A full queue drops it: the lease's TTL ends it.)
    auto self = shared_from_this();
    enqueue([self, rkey] {
      if (remote_store* s = self->store_or_null()) s->release(rkey, self->owner_);
    }, 0);
  } catch (const std::exception& e) {
    warn_once("lease", std::string("JIT cache: fleet cache lease not released (it expires): ") + e.what());
  }
}

std::unique_ptr<compile_guard> remote_cache::begin_compile(const jit_key& key) noexcept {
  std::unique_ptr<compile_guard> local = local_->begin_compile(key);
  if (cfg_.lease.count() <= 0 || !cfg_.read_write) return local;
  try {
    if (breaker_.skipping()) return local;
    remote_store* s = store_or_null();
    if (!s) return local;
    const std::string rkey = remote_key(cache::make_full_key(key));
    reply r = s->lease(rkey, owner_, cfg_.lease);
    if (r.what == outcome::acquired) return std::make_unique<lease_guard>(std::move(local), shared_from_this(), rkey);
    if (r.what == outcome::unsupported) {
      warn_once("lease", "JIT cache: fleet cache " + redact_url(cfg_.store.url) + ": " + r.message +
                             "; FATPACK_CACHE_REMOTE_LEASE_MS has no effect");
      return local;
    }
    if (r.what != outcome::held) {
      on_fault("lease: " + r.message);
      return local;
    }
    // Another node compiles it: wait for its entry, at most one lease time (then compile here).
    counters().lease_waits++;
    const auto give_up = std::chrono::steady_clock::now() + cfg_.lease;
    while (std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(lease_poll);
      reply e = s->get_many({rkey}).at(0);
      if (e.what == outcome::hit) {  // the caller looks the key up again: a remote hit
        std::lock_guard<std::mutex> g(recent_mu_);
        recent_misses_.erase(rkey);
        break;
      }
      if (e.what == outcome::fault) {
        on_fault(e.message);
        break;
      }
      reply again = s->lease(rkey, owner_, cfg_.lease);
      if (again.what == outcome::acquired)  // the holder gave up (failed, or exited)
        return std::make_unique<lease_guard>(std::move(local), shared_from_this(), rkey);
    }
  } catch (const std::exception& e) {
    warn_once("lease", std::string("JIT cache: fleet cache lease failed: ") + e.what());
  }
  return local;
}

namespace {

// Every queue of this process, for the exit flush: a process that loaded remote hits and exits at
// once still leaves their local copies (and its uploads) behind, bounded by each remote's
// FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS. (The JIT service's own exit handler then flushes again after
// its stores, which queue uploads.)
std::mutex& queues_mu() {
  static std::mutex m;
  return m;
}
std::vector<std::weak_ptr<void>>& queues() {
  static std::vector<std::weak_ptr<void>> v;
  return v;
}

}  // namespace

void remote_cache::enqueue(std::function<void()> task, std::size_t bytes) {
  const int me = static_cast<int>(::getpid());
  core::keep_code_loaded();  // the queue's thread runs this code (before q_->mu: the loader's lock)
  std::unique_lock<std::mutex> g(q_->mu);
  if (q_->pid != me) {
    // First use, or a fork() child: the parent's thread is not here; the queue starts empty.
    if (q_->pid != 0) {
      g.unlock();
      q_ = std::make_shared<queue_state>();
      g = std::unique_lock<std::mutex>(q_->mu);
    }
    q_->pid = me;
    q_->exit_flush = cfg_.exit_flush;
    {
      std::lock_guard<std::mutex> lg(queues_mu());
      queues().push_back(std::static_pointer_cast<void>(q_));
      static std::once_flag registered;
      std::call_once(registered, [] { std::atexit(&remote_cache::flush_queues_at_exit); });
    }
    auto q = q_;
    std::thread([q] {
      std::unique_lock<std::mutex> l(q->mu);
      for (;;) {
        q->cv.wait(l, [&] { return q->stop || !q->tasks.empty(); });
        if (q->tasks.empty()) return;  // stopped and drained
        auto t = std::move(q->tasks.front());
        q->tasks.pop_front();
        ++q->running;
        l.unlock();
        try {
          t();
        } catch (...) {
          // Tasks are noexcept in spirit; nothing may stop the queue.
        }
        t = nullptr;  // drops the task's references before the queue says it is idle
        l.lock();
        --q->running;
        q->idle.notify_all();
      }
    }).detach();
  }
  if (q_->tasks.size() >= max_queued_tasks || q_->bytes + bytes > max_queued_bytes) {
    log_line(log_level::debug, "JIT cache: fleet cache queue full; an upload or local copy is dropped");
    return;
  }
  q_->bytes += bytes;
  q_->tasks.push_back([t = std::move(task), q = q_.get(), bytes] {
    t();
    std::lock_guard<std::mutex> l(q->mu);
    q->bytes -= bytes;
  });
  q_->cv.notify_one();
}

void remote_cache::flush_queues_at_exit() {
  std::vector<std::shared_ptr<queue_state>> live;
  {
    std::lock_guard<std::mutex> g(queues_mu());
    for (auto& w : queues())
      if (auto p = w.lock()) live.push_back(std::static_pointer_cast<queue_state>(p));
  }
  const int me = static_cast<int>(::getpid());
  for (auto& q : live) {
    std::unique_lock<std::mutex> l(q->mu);
    if (q->pid != me) continue;  // a fork() child: the parent's queue
    q->idle.wait_for(l, q->exit_flush, [&] { return q->tasks.empty() && q->running == 0; });
  }
}

bool remote_cache::flush(long timeout_ms) noexcept {
  try {
    auto q = q_;
    std::unique_lock<std::mutex> l(q->mu);
    if (q->pid != static_cast<int>(::getpid())) return true;  // nothing of this process queued
    auto idle = [&] { return q->tasks.empty() && q->running == 0; };
    if (timeout_ms < 0) {
      q->idle.wait(l, idle);
      return true;
    }
    return q->idle.wait_for(l, std::chrono::milliseconds(timeout_ms), idle);
  } catch (...) {
    return false;
  }
}

void remote_cache::flush_at_exit() noexcept {
  local_->flush_at_exit();
  if (flush(static_cast<long>(cfg_.exit_flush.count()))) return;
  std::size_t left = 0;
  {
    std::lock_guard<std::mutex> l(q_->mu);
    left = q_->tasks.size() + static_cast<std::size_t>(q_->running);
  }
  log_line(log_level::warn, "JIT cache: exiting with " + std::to_string(left) + " fleet cache upload(s) to " +
                                redact_url(cfg_.store.url) + " unfinished after " +
                                std::to_string(cfg_.exit_flush.count()) + " ms; they are lost (another node uploads them)");
}

std::shared_ptr<sass_cache> with_remote_from_env(std::shared_ptr<sass_cache> local, const std::string& state_dir) {
  // A setuid or setgid program uses no fleet cache, as it uses no cache directory: the invoking user
  // sets the environment, and FATPACK_CACHE_REMOTE_KEY is a path, ignored there, so a store of that
  // user's choosing would have its entries run with the program's privileges.
  if (cache::current_fs().privileged_exec()) {
    if (const char* url = os::getenv("FATPACK_CACHE_REMOTE"); url && *url)
      log_line(log_level::warn, "JIT cache: FATPACK_CACHE_REMOTE is ignored in a setuid or setgid program");
    return local;
  }
  remote_config cfg = remote_config_from_env();
  if (cfg.store.url.empty()) return local;
  if (!cfg.problems.empty()) {
    for (const auto& p : cfg.problems) log_line(log_level::warn, "JIT cache: " + p);
    return local;
  }
  return remote_cache::create(std::move(local), std::move(cfg), state_dir);
}

}  // namespace fatpack::detail::remote
