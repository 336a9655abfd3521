// The fleet cache between real processes (each one a "node" with its own local cache) and a real
// nginx on loopback, through the runtime's public path: the probe program loads packages with the
// fake driver, FATPACK_CACHE_REMOTE and friends configure the remote. What one node compiles and
// uploads (at exit, without waiting), another loads without a JIT and copies locally; a node with
// another key refuses it; a server that is down or never answers is a warning and a JIT, and the
// machine's processes skip it afterwards; libcurl is loaded only when a remote is configured; the
// CLI's warm --push, cache push and cache pull. N nodes starting together (8 probes, their own local
// caches, one remote, a slow fake JIT): with a Redis lease each key is compiled once in all; without
// one (Redis, nginx) the JIT count and the wall times are printed (docs/benchmarks.md).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "../cache/cache_support.hpp"
#include "remote/remote_store.hpp"
#include "servers.hpp"
#include "redis_server.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <fstream>

using namespace cache_test;
using fatpack::test::remote::fault_server;
using fatpack::test::remote::nginx_server;

namespace {

std::string key_file(const std::string& dir, const std::string& name, char fill) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << std::string(48, fill);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  return path;
}

env_map node_env(const std::string& cache, const std::string& jitlog, env_map extra) {
  env_map e = fake_env({{"FATPACK_CACHE_PATH", cache}, {"FAKECUDA_JIT_LOG", jitlog}});
  for (auto& kv : extra) e[kv.first] = kv.second;
  return e;
}

// Files nginx holds under the store's folder (one per key).
std::size_t stored_keys(const nginx_server& s) {
  const std::string any = s.file_of(std::string(64, '0'));
  return files_under(any.substr(0, any.rfind('/')), "").size();
}

// stdout or stderr (warnings go to stderr).
bool says(const child_result& r, const std::string& s) { return r.has(s) || r.err_has(s); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const std::vector<std::string> load_and_report = {"load-all", "cache-stats", "remote-stats"};

std::vector<std::string> args_for(const std::string& pkg, std::vector<std::string> actions = load_and_report) {
  std::vector<std::string> a = {"--package", pkg};
  a.insert(a.end(), actions.begin(), actions.end());
  return a;
}

// N nodes starting together (issue 15): `n` probes started at once, each with its own local cache,
// all sharing the remote `url` read-write with one key, each JIT taking `jit_ms` (the fake driver's
// FAKECUDA_JIT_DELAY_MS), loading the package `pkg`. `lease_ms` > 0: FATPACK_CACHE_REMOTE_LEASE_MS.
struct herd_result {
  std::size_t jits = 0;            // the fake driver's JIT log: JITs of every node together
  std::size_t all_loaded = 0;      // nodes that loaded every module
  long remote_hits = 0, lease_waits = 0;
  double wall_s = 0;               // first start to last exit
};

herd_result run_herd(const std::string& url, const std::string& pkg, int n, int modules, int jit_ms, long lease_ms,
                     const std::string& name) {
  const std::string dir = fresh_dir(name), log = dir + "/jit.log";
  const std::string key = key_file(dir, "fleet.key", 'h');
  env_map extra = {{"FATPACK_CACHE_REMOTE", url}, {"FATPACK_CACHE_REMOTE_MODE", "read-write"},
                   {"FATPACK_CACHE_REMOTE_KEY", key}, {"FAKECUDA_JIT_DELAY_MS", std::to_string(jit_ms)}};
  if (lease_ms > 0) extra["FATPACK_CACHE_REMOTE_LEASE_MS"] = std::to_string(lease_ms);
  std::vector<std::string> argv = {PROBE_PATH, "--package", pkg, "load-all", "remote-stats"};
  herd_result h;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<running> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(start(argv, node_env(dir + "/node" + std::to_string(i), log, extra)));
  for (const auto& r : nodes) {
    auto c = finish(r);
    INFO("stdout:\n" << c.out << "\nstderr:\n" << c.err);
    CHECK(c.status == 0);
    if (field(c.out, "load-all", "ok") == modules && field(c.out, "load-all", "failed") == 0) ++h.all_loaded;
    h.remote_hits += std::max(0L, field(c.out, "remote", "hits"));
    h.lease_waits += std::max(0L, field(c.out, "remote", "lease_waits"));
  }
  h.wall_s = seconds_since(t0);
  h.jits = count_lines(log);
  return h;
}

// The Redis backend's store, or why not (not built on this branch, hiredis not installed).
bool redis_backend_usable(const std::string& url, std::string& why) {
  fatpack::detail::remote::store_settings s;
  s.url = url;
  return fatpack::detail::remote::open_store(s, why) != nullptr;
}

}  // namespace

TEST_CASE("N nodes starting together: with a Redis lease each key is compiled once") {
  if (!fatpack_test::redis_server::installed()) {
    MESSAGE("SKIPPED: redis-server not found (install redis-server)");
    return;
  }
  fatpack_test::redis_server redis;
  std::string why;
  if (!redis_backend_usable(redis.url(), why)) {
    MESSAGE("SKIPPED: the Redis backend cannot be used: " << why);
    return;
  }
  constexpr int nodes = 8, modules = 3, jit_ms = 1500;
  // With the lease: one node compiles each key, the others wait for its entry and load it.
  auto leased = run_herd(redis.url(0), keys_package("herd_lease", modules), nodes, modules, jit_ms, 20000, "herd_lease");
  CHECK(leased.jits == modules);
  CHECK(leased.all_loaded == nodes);
  CHECK(leased.remote_hits == (nodes - 1) * modules);
  // Without it: publish-if-absent only, so nodes that miss together compile together. Guaranteed:
  // each key at least once, at most once per node.
  auto free_for_all = run_herd(redis.url(1), keys_package("herd_free", modules), nodes, modules, jit_ms, 0, "herd_free");
  CHECK(free_for_all.jits >= modules);
  CHECK(free_for_all.jits <= nodes * modules);
  CHECK(free_for_all.all_loaded == nodes);
  MESSAGE("N=" << nodes << " nodes, " << modules << " keys, JIT " << jit_ms << " ms, Redis: with a lease "
                << leased.jits << " JITs, " << leased.wall_s << " s (" << leased.lease_waits << " lease waits, "
                << leased.remote_hits << " remote hits); without " << free_for_all.jits << " JITs, "
                << free_for_all.wall_s << " s (" << free_for_all.remote_hits << " remote hits)");
}

TEST_CASE("N nodes starting together against nginx (no lease over HTTP): every node loads everything") {
  nginx_server server;
  constexpr int nodes = 8, modules = 3, jit_ms = 1500;
  auto h = run_herd(server.url(), keys_package("herd_http", modules), nodes, modules, jit_ms, 0, "herd_http");
  CHECK(h.jits >= modules);
  CHECK(h.jits <= nodes * modules);
  CHECK(h.all_loaded == nodes);
  CHECK(stored_keys(server) == modules);
  MESSAGE("N=" << nodes << " nodes, " << modules << " keys, JIT " << jit_ms << " ms, HTTP (nginx), no lease: "
                << h.jits << " JITs, " << h.wall_s << " s (" << h.remote_hits << " remote hits)");
}

TEST_CASE("a node's compile reaches another node through nginx, signed; another key refuses it") {
  nginx_server server;
  const std::string pkg = keys_package("fleet", 3);
  const std::string dir = fresh_dir("fleet"), log = dir + "/jit.log";
  const std::string key = key_file(dir, "fleet.key", 'f'), other = key_file(dir, "other.key", 'o');
  const env_map rw = {{"FATPACK_CACHE_REMOTE", server.url()}, {"FATPACK_CACHE_REMOTE_MODE", "read-write"},
                      {"FATPACK_CACHE_REMOTE_KEY", key}};

  // Node A compiles the three modules and exits at once: the exit flush uploads them.
  auto a = probe(args_for(pkg, {"load-all", "cache-stats", "remote-stats"}), node_env(dir + "/a", log, rw));
  CHECK(a.status == 0);
  CHECK(field(a.out, "load-all", "jit") == 3);
  CHECK(field(a.out, "remote", "misses") == 3);
  CHECK(count_lines(log) == 3);
  CHECK(stored_keys(server) == 3);

  // Node B: empty local cache, read-only remote with the key: no JIT, three remote hits, and the
  // entries land in its local cache.
  auto b = probe(args_for(pkg), node_env(dir + "/b", log, {{"FATPACK_CACHE_REMOTE", server.url()},
                                                            {"FATPACK_CACHE_REMOTE_KEY", key}}));
  CHECK(b.status == 0);
  CHECK(field(b.out, "load-all", "jit") == 0);
  CHECK(field(b.out, "load-all", "cache") == 3);
  CHECK(field(b.out, "remote", "hits") == 3);
  CHECK(count_lines(log) == 3);
  CHECK(files_under(dir + "/b", ".fpc").size() == 3);
  // ... so B's next start does not ask the remote.
  auto b2 = probe(args_for(pkg), node_env(dir + "/b", log, {{"FATPACK_CACHE_REMOTE", server.url()},
                                                             {"FATPACK_CACHE_REMOTE_KEY", key}}));
  CHECK(field(b2.out, "cache", "hits_exact") == 3);
  CHECK(field(b2.out, "remote", "hits") == 0);
  CHECK(field(b2.out, "remote", "misses") == 0);

  // Node C has another key: the entries are refused (one warning) and compiled.
  auto c = probe(args_for(pkg), node_env(dir + "/c", log, {{"FATPACK_CACHE_REMOTE", server.url()},
                                                            {"FATPACK_CACHE_REMOTE_KEY", other},
                                                            {"FATPACK_LOG", "warn"}}));
  CHECK(field(c.out, "remote", "rejected") == 3);
  CHECK(field(c.out, "load-all", "jit") == 3);
  CHECK(says(c, "signed with another key"));
  CHECK(count_lines(log) == 6);

  // An entry altered on the server (one byte of the cubin) is refused even by a node without a key.
  for (const auto& f : files_under(server.file_of(std::string(64, '0')).substr(0, server.file_of(std::string(64, '0')).rfind('/')), "")) {
    auto bytes = read_file(f);
    bytes[bytes.size() - 10] ^= 0x55;
    write_file(f, bytes);
  }
  auto d = probe(args_for(pkg), node_env(dir + "/d", log, {{"FATPACK_CACHE_REMOTE", server.url()}}));
  CHECK(field(d.out, "remote", "rejected") == 3);
  CHECK(field(d.out, "load-all", "jit") == 3);

  // A read-write remote without a key and without the opt-in is not used, with the reason.
  auto e = probe(args_for(pkg), node_env(dir + "/e", log, {{"FATPACK_CACHE_REMOTE", server.url()},
                                                            {"FATPACK_CACHE_REMOTE_MODE", "read-write"},
                                                            {"FATPACK_LOG", "warn"}}));
  CHECK(says(e, "TRUST_ALL_WRITERS"));
  CHECK(field(e.out, "remote", "misses") == 0);
  CHECK(e.has("described=none"));
}

TEST_CASE("libcurl is loaded only when a remote is configured") {
  nginx_server server;
  const std::string pkg = keys_package("libs", 1);
  const std::string dir = fresh_dir("libs"), log = dir + "/jit.log";
  auto none = probe(args_for(pkg, {"load-all", "libs"}), node_env(dir + "/a", log, {}));
  CHECK(none.has("libs curl=0 hiredis=0"));
  auto with = probe(args_for(pkg, {"load-all", "libs"}), node_env(dir + "/b", log, {{"FATPACK_CACHE_REMOTE", server.url()}}));
  CHECK(with.has("libs curl=1 hiredis=0"));
}

TEST_CASE("a server that is down or never answers: a warning, the JIT, and the machine skips it") {
  const std::string pkg = keys_package("down", 4);
  const std::string dir = fresh_dir("down"), log = dir + "/jit.log";
  SUBCASE("killed") {
    nginx_server server;
    const std::string url = server.url();
    server.kill_hard();
    const auto t0 = std::chrono::steady_clock::now();
    auto a = probe(args_for(pkg), node_env(dir + "/a", log, {{"FATPACK_CACHE_REMOTE", url}}));
    CHECK(a.status == 0);
    CHECK(field(a.out, "load-all", "jit") == 4);
    CHECK(field(a.out, "remote", "faults") == 3);   // then skipped: the 4th lookup is not sent
    CHECK(field(a.out, "remote", "skipped") == 1);
    CHECK(says(a, "Connection refused"));
    CHECK(seconds_since(t0) < 10);
    // The next process of the machine (same cache directory) does not try it at all.
    auto b = probe(args_for(pkg), node_env(dir + "/a", log, {{"FATPACK_CACHE_REMOTE", url}}));
    CHECK(field(b.out, "remote", "faults") == 0);
  }
  SUBCASE("never answers") {
    fault_server silent(fault_server::silent());
    const auto t0 = std::chrono::steady_clock::now();
    auto a = probe(args_for(pkg), node_env(dir + "/s", log, {{"FATPACK_CACHE_REMOTE", "http://127.0.0.1:" + std::to_string(silent.port()) + "/cache"},
                                                              {"FATPACK_CACHE_REMOTE_TIMEOUT_MS", "400"}}));
    const double s = seconds_since(t0);
    CHECK(a.status == 0);
    CHECK(field(a.out, "load-all", "jit") == 4);
    CHECK(field(a.out, "remote", "faults") == 3);
    // Three timed-out lookups of 0.4 s each, then none: far from a hang.
    CHECK(s < 5.0);
    MESSAGE("4 modules against a server that never answers (0.4 s timeout): " << s << " s");
  }
}

TEST_CASE("the CLI: warm --push publishes, cache pull fetches, cache push uploads a local cache") {
  nginx_server server;
  const std::string pkg = keys_package("cli", 2);
  const std::string dir = fresh_dir("cli"), log = dir + "/jit.log";
  const std::string key = key_file(dir, "fleet.key", 'c');
  const env_map env = fake_env({{"FAKECUDA_JIT_LOG", log}});
  auto warm = run_child({FATPACK_CLI, "warm", "--path", dir + "/w", "--target", "sm_90", "--push", server.url(),
                         "--key", key, pkg},
                        env);
  CHECK(warm.status == 0);
  CHECK(warm.has("2 compiled"));
  CHECK(warm.has("2 uploaded"));
  CHECK(stored_keys(server) == 2);
  // Another machine pulls what the package needs for sm_90: nothing is compiled.
  auto pull = run_child({FATPACK_CLI, "cache", "pull", "--path", dir + "/p", "--remote", server.url(), "--key", key,
                         "--target", "sm_90", pkg},
                        env);
  CHECK(pull.status == 0);
  CHECK(pull.has("2 pulled"));
  CHECK(files_under(dir + "/p", ".fpc").size() == 2);
  CHECK(count_lines(log) == 2);
  // Pulling with another key finds nothing usable.
  const std::string other = key_file(dir, "other.key", 'x');
  auto bad = run_child({FATPACK_CLI, "cache", "pull", "--path", dir + "/q", "--remote", server.url(), "--key", other,
                        "--target", "sm_90", pkg},
                       env);
  CHECK(bad.has("0 pulled"));
  CHECK(bad.has("2 not in the remote"));
  // The key named by the environment, as the runtime reads it: the same refusal (before, the CLI
  // ignored FATPACK_CACHE_REMOTE_KEY and pulled both entries unchecked).
  env_map with_env_key = env;
  with_env_key["FATPACK_CACHE_REMOTE_KEY"] = other;
  auto env_key = run_child({FATPACK_CLI, "cache", "pull", "--path", dir + "/r", "--remote", server.url(), "--target",
                            "sm_90", pkg},
                           with_env_key);
  CHECK(env_key.has("0 pulled"));
  // pull has no JSON form: --json is refused, not ignored (before, it printed the text lines).
  auto json = run_child({FATPACK_CLI, "cache", "pull", "--json", "--path", dir + "/s", "--remote", server.url(), "--key",
                         key, "--target", "sm_90", pkg},
                        env);
  CHECK(json.status == 2);
  // cache push of the pulled cache: both already there; an invalid entry is reported, never sent.
  auto entries = files_under(dir + "/p", ".fpc");
  REQUIRE(entries.size() == 2);
  auto bytes = read_file(entries[0]);
  bytes[bytes.size() / 2] ^= 1;
  write_file(entries[0], bytes);
  auto push = run_child({FATPACK_CLI, "cache", "push", "--path", dir + "/p", "--remote", server.url(), "--key", key, "--json"},
                        env);
  CHECK(push.status == 0);
  CHECK(push.has("\"present\": 1"));
  CHECK(push.has("\"invalid\": 1"));
  // Without a key or the opt-in, a push is refused before anything is sent.
  auto refused = run_child({FATPACK_CLI, "cache", "push", "--path", dir + "/p", "--remote", server.url()}, env);
  CHECK(refused.status != 0);
  CHECK(says(refused, "TRUST_ALL_WRITERS"));
}

int main(int argc, char** argv) {
  if (nginx_server::executable().empty()) {
    std::puts("SKIPPED: nginx not found (install nginx-light: its WebDAV PUT serves the store)");
    return 77;
  }
  for (const char* v : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) ::unsetenv(v);
  std::signal(SIGPIPE, SIG_IGN);
  doctest::Context context(argc, argv);
  return context.run();
}
