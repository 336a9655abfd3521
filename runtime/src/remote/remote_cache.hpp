// The fleet cache layer (docs/cache.md §12): a sass_cache in front of the local one (disk_cache,
// with its prebuilt layers), adding a remote store behind it. Lookup order: the prebuilt layers,
// the local cache, then the remote. A remote hit is checked exactly like a local entry (envelope
// and signature, then the entry's full key text, sizes, checksums and SM), used at once, and written
// into the local cache in the background. A compile is published locally by the JIT service's store
// queue as before; a read-write remote then gets it by an upload in the background, never on the
// load path. An exiting process waits for its uploads, bounded (FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS).
//
// Faults (a server down, hanging, 5xx, refused authentication, a wrong or truncated body) are one
// warning per process and a miss; after repeated ones every process of the machine skips the
// remote for a while (breaker.hpp). With a lease (Redis, FATPACK_CACHE_REMOTE_LEASE_MS) the nodes
// starting together compile each key once: the others wait for its entry, bounded by the lease.
#pragma once

#include "cache/key.hpp"
#include "cache/sass_cache.hpp"
#include "remote/breaker.hpp"
#include "remote/remote_config.hpp"
#include "remote/remote_store.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace fatpack::detail::remote {

struct remote_counters {
  std::atomic<std::uint64_t> hits{0};      // entries served from the remote
  std::atomic<std::uint64_t> misses{0};    // lookups the remote did not have
  std::atomic<std::uint64_t> uploads{0};   // entries this process published to the remote
  std::atomic<std::uint64_t> present{0};   // uploads skipped: another node had published the key
  std::atomic<std::uint64_t> rejected{0};  // remote entries refused (signature, key text, checksums)
  std::atomic<std::uint64_t> faults{0};    // requests that failed (and counted as misses)
  std::atomic<std::uint64_t> skipped{0};   // lookups not sent: the remote is skipped after faults
  std::atomic<std::uint64_t> lease_waits{0};  // compiles left to another node holding the lease
};
remote_counters& counters();

class remote_cache final : public sass_cache, public std::enable_shared_from_this<remote_cache> {
 public:
  // `state_dir`: where the breaker's state file goes (the per-user cache's v1/; "" = memory).
  static std::shared_ptr<remote_cache> create(std::shared_ptr<sass_cache> local, remote_config cfg,
                                              std::string state_dir);
  // Over an already opened store (tests, `fatpack cache push/pull`).
  static std::shared_ptr<remote_cache> over(std::shared_ptr<sass_cache> local, remote_config cfg,
                                            std::unique_ptr<remote_store> store, std::string state_dir);
  ~remote_cache() override;

  std::optional<cache_hit> find(const jit_key& key, bool allow_other_driver) noexcept override;
  std::string store(const jit_key& key, core::byte_span sass) noexcept override;
  std::unique_ptr<compile_guard> begin_compile(const jit_key& key) noexcept override;
  bool refresh_other_driver() const noexcept override { return local_->refresh_other_driver(); }
  void note_jit(double ms) noexcept override { local_->note_jit(ms); }
  bool flush(long timeout_ms) noexcept override;
  void flush_at_exit() noexcept override;
  const char* name() const noexcept override { return "remote"; }

  // Looks several keys up in batches (Redis MGET, parallel HTTP GETs); the checked hits are kept in
  // memory for find(), which serves and copies them as any remote hit. Returns how many hit.
  std::size_t prefetch(const std::vector<jit_key>& keys) noexcept;
  // Queues the upload of `sass` under `key` (read-write remotes; publish-if-absent, signed when a
  // key is configured). store() calls it after the local store; `fatpack warm --push` for entries
  // that were cached already.
  void upload(const jit_key& key, core::byte_span sass) noexcept;
  // Releases this process's compile lease on the remote key `rkey` once the uploads queued before
  // it are done (begin_compile's guard calls it after the JIT service's store), so the entry is in
  // the remote before another node can take the lease.
  void release_lease(const std::string& rkey) noexcept;
  const std::shared_ptr<sass_cache>& local() const { return local_; }
  const remote_config& config() const { return cfg_; }
  std::string describe() const;  // "https://host/base (read-write, signed)"

 private:
  remote_cache(std::shared_ptr<sass_cache> local, remote_config cfg, std::string state_dir);
  remote_store* store_or_null();  // opened at first use; null when it cannot be (one warning)
  // The remote's entry for `key`, checked; counts and warns.
  std::optional<std::vector<std::uint8_t>> fetch(const jit_key& key);
  // The checks of a remote body for `k` (envelope, signature, entry); counts and warns on refusal.
  std::optional<std::vector<std::uint8_t>> check_body(const cache::full_key& k, const std::string& rkey,
                                                      std::uint32_t target_arch, const std::vector<std::uint8_t>& body);
  void warn_once(const std::string& kind, const std::string& text);
  void on_fault(const std::string& what);
  // Runs `task` on the layer's one background thread (uploads, local writes of remote hits).
  void enqueue(std::function<void()> task, std::size_t bytes);
  static void flush_queues_at_exit();
  void worker_loop();

  std::shared_ptr<sass_cache> local_;
  remote_config cfg_;
  breaker breaker_;
  std::string owner_;  // "<host>:<pid>:<n>" for leases
  std::mutex store_mu_;
  std::unique_ptr<remote_store> store_;
  bool store_tried_ = false;
  std::mutex warn_mu_;
  std::set<std::string> warned_;

  struct queue_state {
    std::mutex mu;
    std::condition_variable cv, idle;
    std::deque<std::function<void()>> tasks;
    std::size_t bytes = 0;
    int running = 0;
    bool stop = false;
    int pid = 0;  // the process whose thread serves the queue (a fork() child starts its own)
    std::chrono::milliseconds exit_flush{5000};
  };
  std::shared_ptr<queue_state> q_;
  // Keys the remote just did not have (or could not be asked for): the JIT service looks a key up
  // twice around its cross-process lock, and the second lookup should not cost a second request.
  // A lease wait that ends with the entry published forgets the key.
  std::mutex recent_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> recent_misses_;
  std::map<std::string, std::vector<std::uint8_t>> prefetched_;  // remote key -> checked cubin
};

// The default cache of the runtime with the environment's remote, if one is configured
// (remote_config_from_env): `local` itself otherwise. Settings that are refused give one warning
// each and no remote.
std::shared_ptr<sass_cache> with_remote_from_env(std::shared_ptr<sass_cache> local, const std::string& user_root);

}  // namespace fatpack::detail::remote
