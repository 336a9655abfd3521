// The fleet cache layer in one process (remote/remote_cache.hpp) over an in-memory store: what is
// uploaded and how it is signed, that a remote entry is checked like a local one (signature, key
// text, checksums, SM), faults and the skip state every process shares, leases between two nodes,
// and the settings. The real stores (nginx, Redis) are in http_store_test and redis_store_test; real
// processes sharing a remote in remote_process_test.
#include "cache/directory.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry.hpp"
#include "cache/key.hpp"
#include "cache/store.hpp"
#include "remote/remote_cache.hpp"
#include "remote/remote_config.hpp"
#include "remote/sha256.hpp"
#include "remote/signature.hpp"
#include "../runtime/test_support.hpp"

#include "fatpack/fatpack.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

using namespace fatpack::detail;
using namespace fatpack::detail::remote;
using fatpack_test::artifact;
using fatpack_test::read_file;
using fatpack_test::temp_dir;

namespace {

std::string fresh(const std::string& name) {
  std::string d = temp_dir() + "/remote_layer_" + name;
  REQUIRE(std::system(("rm -rf '" + d + "' && mkdir -p '" + d + "' && chmod 700 '" + d + "'").c_str()) == 0);
  return d;
}

jit_key key_for(std::uint64_t ptx_hash, std::uint32_t arch = 90) {
  jit_key k;
  k.ptx_xxh3 = ptx_hash;
  k.ptx_size = 1000 + ptx_hash % 100;
  k.ptx_target = fatpack::core::target::parse("compute_80").value();
  k.ptx_isa = fatpack::core::ptx_isa{9, 0};
  k.target_arch = arch;
  k.options = "-O3";
  k.driver_version = 13000;
  return k;
}

const std::vector<std::uint8_t>& cubin90() {
  static const auto c = read_file(artifact("vadd.sm_90.cubin"));
  return c;
}

// A store in memory, with switches for faults and a count of requests.
class memory_store final : public remote_store {
 public:
  std::vector<reply> get_many(const std::vector<std::string>& keys) noexcept override {
    std::lock_guard<std::mutex> g(mu);
    std::vector<reply> out;
    for (const auto& k : keys) {
      ++gets;
      reply r;
      if (failing) {
        r.what = outcome::fault;
        r.message = "HTTP 503 from the test store";
      } else if (auto it = data.find(k); it != data.end()) {
        r.what = outcome::hit;
        r.body = it->second;
      } else {
        r.what = outcome::miss;
      }
      out.push_back(std::move(r));
    }
    return out;
  }
  reply put_if_absent(const std::string& key, const std::vector<std::uint8_t>& body) noexcept override {
    std::this_thread::sleep_for(put_delay);  // a slow upload (outside the lock: reads go on)
    std::lock_guard<std::mutex> g(mu);
    ++puts;
    reply r;
    if (failing) {
      r.what = outcome::fault;
      r.message = "HTTP 507 from the test store";
    } else {
      r.what = data.emplace(key, body).second ? outcome::stored : outcome::exists;
    }
    return r;
  }
  reply lease(const std::string& key, const std::string& owner, std::chrono::milliseconds) noexcept override {
    std::lock_guard<std::mutex> g(mu);
    reply r;
    auto [it, fresh] = leases.emplace(key, owner);
    r.what = fresh || it->second == owner ? outcome::acquired : outcome::held;
    return r;
  }
  void release(const std::string& key, const std::string& owner) noexcept override {
    std::lock_guard<std::mutex> g(mu);
    if (auto it = leases.find(key); it != leases.end() && it->second == owner) leases.erase(it);
  }
  std::string describe() const override { return "memory://test"; }

  std::mutex mu;
  std::map<std::string, std::vector<std::uint8_t>> data;
  std::map<std::string, std::string> leases;
  bool failing = false;
  std::chrono::milliseconds put_delay{0};
  int gets = 0, puts = 0;
};

// A store shared by several layers ("nodes"): each layer owns a forwarding handle.
class shared_handle final : public remote_store {
 public:
  explicit shared_handle(std::shared_ptr<memory_store> s) : s_(std::move(s)) {}
  std::vector<reply> get_many(const std::vector<std::string>& k) noexcept override { return s_->get_many(k); }
  reply put_if_absent(const std::string& k, const std::vector<std::uint8_t>& b) noexcept override {
    return s_->put_if_absent(k, b);
  }
  reply lease(const std::string& k, const std::string& o, std::chrono::milliseconds t) noexcept override {
    return s_->lease(k, o, t);
  }
  void release(const std::string& k, const std::string& o) noexcept override { s_->release(k, o); }
  std::string describe() const override { return s_->describe(); }

 private:
  std::shared_ptr<memory_store> s_;
};

const std::string test_key(40, 'k');

remote_config rw_config(const std::string& key = test_key) {
  remote_config c;
  c.store.url = "http://127.0.0.1:9/cache";
  c.read_write = true;
  c.key = key;
  return c;
}

std::shared_ptr<cache::disk_cache> local_cache(const std::string& dir) {
  auto d = cache::cache_dir::open(dir, true, 0, "user", false);
  return cache::disk_cache::over(d);
}

struct node {
  std::string dir;
  std::shared_ptr<remote_cache> layer;
};

node make_node(const std::string& name, std::shared_ptr<memory_store> store, remote_config cfg = rw_config()) {
  node n;
  n.dir = fresh(name);
  n.layer = remote_cache::over(local_cache(n.dir), cfg, std::make_unique<shared_handle>(store),
                               cache::format_dir(n.dir));
  return n;
}

}  // namespace

TEST_CASE("SHA-256 and HMAC-SHA256 match the published vectors") {
  CHECK(to_hex(sha256_of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(sha256_of("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a', fed in uneven pieces (the buffering across blocks).
  sha256 h;
  std::string chunk(997, 'a');
  std::size_t left = 1000000;
  while (left) {
    std::size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  CHECK(to_hex(h.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // RFC 4231 test cases 1, 2 and 6 (a key longer than a block).
  CHECK(to_hex(hmac_sha256(std::string(20, '\x0b'), {"Hi There"})) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(to_hex(hmac_sha256("Jefe", {"what do ya want ", "for nothing?"})) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(to_hex(hmac_sha256(std::string(131, '\xaa'), {"Test Using Larger Than Block-Size Key - Hash Key First"})) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("envelopes: signed entries open only with their key and their remote key") {
  const std::vector<std::uint8_t> entry(1000, 7);
  const std::string rk(64, 'a'), other(64, 'b');
  std::string why;
  auto sealed = seal(rk, entry, test_key);
  REQUIRE(sealed.size() == envelope_size + entry.size());
  CHECK(open_envelope(rk, sealed, test_key, why) == envelope_size);
  // Another key: refused, naming both key ids (never the key).
  std::string k2(40, 'z');
  CHECK_FALSE(open_envelope(rk, sealed, k2, why));
  CHECK(why.find("another key") != std::string::npos);
  CHECK(why.find(key_id_hex(k2)) != std::string::npos);
  CHECK(why.find(test_key) == std::string::npos);
  // Replayed under another remote key.
  CHECK_FALSE(open_envelope(other, sealed, test_key, why));
  CHECK(why.find("bad signature") != std::string::npos);
  // Any byte of the entry or the tag changed.
  for (std::size_t at : {std::size_t(16), std::size_t(47), envelope_size, sealed.size() - 1}) {
    auto bad = sealed;
    bad[at] ^= 1;
    CHECK_FALSE(open_envelope(rk, bad, test_key, why));
  }
  // Unsigned: refused by a node with a key, accepted by one without.
  auto plain = seal(rk, entry, "");
  CHECK_FALSE(open_envelope(rk, plain, test_key, why));
  CHECK(why.find("unsigned") != std::string::npos);
  CHECK(open_envelope(rk, plain, "", why) == envelope_size);
  // Malformed envelopes.
  CHECK_FALSE(open_envelope(rk, std::vector<std::uint8_t>(10, 0), "", why));
  auto v2 = plain;
  v2[4] = 2;
  CHECK_FALSE(open_envelope(rk, v2, "", why));
  auto flags = plain;
  flags[6] = 1;
  CHECK_FALSE(open_envelope(rk, flags, "", why));
  auto magic = plain;
  magic[0] = 'X';
  CHECK_FALSE(open_envelope(rk, magic, "", why));
}

TEST_CASE("remote keys are SHA-256 hex of the code key and driver texts") {
  auto a = cache::make_full_key(key_for(1));
  auto b = cache::make_full_key(key_for(2));
  const std::string ka = remote_key(a);
  CHECK(ka.size() == 64);
  CHECK(ka.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(ka != remote_key(b));
  auto c = a;
  c.driver = cache::make_driver_id(13000, "999.1");
  CHECK(ka != remote_key(c));
}

TEST_CASE("a compile is uploaded signed, and another node's miss becomes a checked remote hit") {
  auto store = std::make_shared<memory_store>();
  auto a = make_node("up_a", store);
  const jit_key k = key_for(0x51);
  a.layer->store(k, fatpack::core::byte_span(cubin90()));
  REQUIRE(a.layer->flush(10000));
  REQUIRE(store->data.size() == 1);
  const std::string rk = remote_key(cache::make_full_key(k));
  REQUIRE(store->data.count(rk) == 1);
  std::string why;
  CHECK(open_envelope(rk, store->data[rk], test_key, why));
  // Node b: empty local cache; the remote serves it, and a copy lands in b's local cache.
  auto b = make_node("up_b", store);
  auto hits0 = counters().hits.load();
  auto hit = b.layer->find(k, true);
  REQUIRE(hit);
  CHECK(hit->sass == cubin90());
  CHECK(hit->exact);
  CHECK(hit->where.find("remote") == 0);
  CHECK(counters().hits == hits0 + 1);
  REQUIRE(b.layer->flush(10000));
  auto local_only = local_cache(b.dir);
  auto again = local_only->find(k, false);
  REQUIRE(again);
  CHECK(again->sass == cubin90());
  // A second upload of the same key is not written twice.
  auto present0 = counters().present.load();
  b.layer->store(k, fatpack::core::byte_span(cubin90()));
  REQUIRE(b.layer->flush(10000));
  CHECK(counters().present == present0 + 1);
}

TEST_CASE("a read-only remote uploads nothing") {
  auto store = std::make_shared<memory_store>();
  auto cfg = rw_config();
  cfg.read_write = false;
  auto a = make_node("ro", store, cfg);
  a.layer->store(key_for(0x52), fatpack::core::byte_span(cubin90()));
  REQUIRE(a.layer->flush(10000));
  CHECK(store->puts == 0);
  // ... but the local cache has it.
  CHECK(local_cache(a.dir)->find(key_for(0x52), false));
}

TEST_CASE("remote entries that are wrong are misses: unsigned, other key, another key's entry, damaged") {
  auto store = std::make_shared<memory_store>();
  auto b = make_node("wrong_b", store);
  const jit_key k = key_for(0x53);
  const auto fk = cache::make_full_key(k);
  const std::string rk = remote_key(fk);
  std::string why;
  auto good_entry = cache::encode_entry(fk, fatpack::core::byte_span(cubin90()), 1, why);
  REQUIRE(good_entry);
  // The entry of another key, signed correctly under this remote key: the key text check refuses it.
  auto other_entry = cache::encode_entry(cache::make_full_key(key_for(0x99)), fatpack::core::byte_span(cubin90()), 1, why);
  REQUIRE(other_entry);
  // The entry for sm_90 served to a lookup for sm_80 under the sm_80 key.
  const jit_key k80 = key_for(0x53, 80);
  const std::string rk80 = remote_key(cache::make_full_key(k80));
  auto damaged = *good_entry;
  damaged[damaged.size() / 2] ^= 0x40;
  struct { const char* what; std::string key; std::vector<std::uint8_t> body; jit_key lookup; } cases[] = {
      {"unsigned", rk, seal(rk, *good_entry, ""), k},
      {"other signing key", rk, seal(rk, *good_entry, std::string(40, 'q')), k},
      {"another key's entry", rk, seal(rk, *other_entry, test_key), k},
      {"damaged payload", rk, seal(rk, damaged, test_key), k},
      {"garbage", rk, std::vector<std::uint8_t>(5000, 0xee), k},
      {"sm_90 entry under the sm_80 key", rk80, seal(rk80, *good_entry, test_key), k80},
  };
  int n = 0;
  for (const auto& c : cases) {
    CAPTURE(c.what);
    store->data.clear();
    store->data[c.key] = c.body;
    auto node = make_node("wrong_" + std::to_string(n++), store);  // a fresh process: no remembered miss
    auto rejected0 = counters().rejected.load();
    CHECK_FALSE(node.layer->find(c.lookup, true));
    CHECK(counters().rejected == rejected0 + 1);
  }
  // The good one passes (the checks above are not refusing everything).
  store->data.clear();
  store->data[rk] = seal(rk, *good_entry, test_key);
  CHECK(b.layer->find(k, true));
}

TEST_CASE("a remote miss is asked once: the lookup after the cross-process lock does not ask again") {
  auto store = std::make_shared<memory_store>();
  auto a = make_node("once", store);
  const jit_key k = key_for(0x5a);
  CHECK_FALSE(a.layer->find(k, true));
  auto g = a.layer->begin_compile(k);
  CHECK_FALSE(a.layer->find(k, true));
  CHECK(store->gets == 1);
  // Another key is asked.
  CHECK_FALSE(a.layer->find(key_for(0x5b), true));
  CHECK(store->gets == 2);
}

TEST_CASE("faults are misses; after three in a row every process sharing the directory skips the remote") {
  auto store = std::make_shared<memory_store>();
  store->failing = true;
  auto a = make_node("fault_a", store);
  auto faults0 = counters().faults.load();
  for (int i = 0; i < 3; ++i) CHECK_FALSE(a.layer->find(key_for(0x60 + i), true));
  CHECK(counters().faults == faults0 + 3);
  const int gets = store->gets;
  auto skipped0 = counters().skipped.load();
  CHECK_FALSE(a.layer->find(key_for(0x70), true));
  CHECK(store->gets == gets);  // not even asked
  CHECK(counters().skipped == skipped0 + 1);
  // Another layer over the same directory (another process of the machine) reads the state file.
  auto again = remote_cache::over(local_cache(a.dir), rw_config(), std::make_unique<shared_handle>(store),
                                  cache::format_dir(a.dir));
  CHECK_FALSE(again->find(key_for(0x71), true));
  CHECK(store->gets == gets);
  // A layer over another directory is not affected.
  auto c = make_node("fault_c", store);
  CHECK_FALSE(c.layer->find(key_for(0x72), true));
  CHECK(store->gets == gets + 1);
  // A garbage state file reads as "no faults"; one with a skip far in the future is capped.
  std::string state;
  for (const auto& e : std::filesystem::directory_iterator(cache::format_dir(a.dir))) {
    const std::string f = e.path().filename().string();
    if (f.rfind("remote-", 0) == 0 && f.size() > 6 && f.substr(f.size() - 6) == ".state") state = e.path().string();
  }
  REQUIRE_FALSE(state.empty());
  std::ofstream(state) << "garbage";
  store->failing = false;
  int g0 = store->gets;
  CHECK_FALSE(again->find(key_for(0x73), true));  // a miss, but asked
  CHECK(store->gets == g0 + 1);
}

TEST_CASE("a lease: the second node waits for the first node's entry instead of compiling") {
  auto store = std::make_shared<memory_store>();
  auto cfg = rw_config();
  cfg.lease = std::chrono::milliseconds(5000);
  auto a = make_node("lease_a", store, cfg);
  auto b = make_node("lease_b", store, cfg);
  const jit_key k = key_for(0x80);
  auto ga = a.layer->begin_compile(k);
  REQUIRE(ga);
  std::atomic<bool> b_done{false};
  std::chrono::steady_clock::time_point b_end;
  std::thread tb([&] {
    auto gb = b.layer->begin_compile(k);  // waits: a holds the lease
    b_end = std::chrono::steady_clock::now();
    b_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(b_done.load());
  const auto published = std::chrono::steady_clock::now();
  a.layer->store(k, fatpack::core::byte_span(cubin90()));
  REQUIRE(a.layer->flush(10000));
  ga.reset();
  tb.join();
  CHECK(b_end >= published);
  CHECK(b_end - published < std::chrono::milliseconds(2000));
  auto hit = b.layer->find(k, true);
  REQUIRE(hit);
  CHECK(hit->where.find("remote") == 0);
  CHECK(store->leases.empty());  // released by its owner
}

TEST_CASE("a lease is released after the holder's upload, not before: a waiting node never compiles too") {
  // The JIT service drops the compile guard right after its local store, while the upload is still
  // queued: released then, the lease let a waiting node (entry not there yet) take it and compile.
  auto store = std::make_shared<memory_store>();
  store->put_delay = std::chrono::milliseconds(400);
  auto cfg = rw_config();
  cfg.lease = std::chrono::milliseconds(5000);
  auto a = make_node("lease_order_a", store, cfg);
  const jit_key k = key_for(0x81);
  auto ga = a.layer->begin_compile(k);
  REQUIRE(ga);
  a.layer->store(k, fatpack::core::byte_span(cubin90()));
  ga.reset();  // as the JIT service does after its store: the upload is still on its way
  {
    std::lock_guard<std::mutex> g(store->mu);
    CHECK(store->leases.size() == 1);  // still held: the entry is not in the remote yet
    CHECK(store->data.empty());
  }
  REQUIRE(a.layer->flush(10000));
  std::lock_guard<std::mutex> g(store->mu);
  CHECK(store->data.size() == 1);
  CHECK(store->leases.empty());  // released once the entry is there
}

TEST_CASE("settings: a read-write remote needs a key or the explicit opt-in; key files are checked") {
  remote_config c;
  c.store.url = "redis://127.0.0.1:6379/0";
  c.read_write = true;
  check_config(c);
  REQUIRE(c.problems.size() == 1);
  CHECK(c.problems[0].find("TRUST_ALL_WRITERS") != std::string::npos);
  remote_config t = c;
  t.problems.clear();
  t.trust_all_writers = true;
  check_config(t);
  CHECK(t.problems.empty());

  const std::string dir = fresh("keys");
  const std::string good = dir + "/good.key", loose = dir + "/loose.key", shortk = dir + "/short.key";
  std::ofstream(good) << std::string(48, 's') << "\n";
  std::ofstream(loose) << std::string(48, 's');
  std::ofstream(shortk) << "tiny";
  chmod(good.c_str(), 0600);
  chmod(loose.c_str(), 0644);
  chmod(shortk.c_str(), 0600);
  std::string key;
  CHECK(read_key_file(good, key).empty());
  CHECK(key == std::string(48, 's'));  // the newline dropped
  CHECK(read_key_file(loose, key).find("group or others") != std::string::npos);
  CHECK(read_key_file(shortk, key).find("shorter") != std::string::npos);
  CHECK_FALSE(read_key_file(dir + "/absent", key).empty());
  CHECK_FALSE(read_key_file(dir, key).empty());  // a directory

  const std::string creds = dir + "/creds";
  std::ofstream(creds) << "basic alice:s3cret-pw\n";
  chmod(creds.c_str(), 0600);
  store_settings s;
  CHECK(read_credentials_file(creds, s).empty());
  CHECK(s.basic_user == "alice");
  CHECK(s.basic_password == "s3cret-pw");
  std::ofstream(creds) << "token s3cret-pw\n";
  auto e = read_credentials_file(creds, s);
  CHECK_FALSE(e.empty());
  CHECK(e.find("s3cret") == std::string::npos);  // a secret is never quoted

  CHECK(redact_url("https://alice:pw@host:8443/base") == "https://***@host:8443/base");
  CHECK(redact_url("redis://:hunter2@cache:6379/0") == "redis://***@cache:6379/0");
  CHECK(redact_url("https://bucket.s3/x?X-Amz-Signature=abc") == "https://bucket.s3/x?***");
  CHECK(redact_url("http://host/a\nb") == "http://host/a?b");
}

TEST_CASE("set_cache_remote refuses what it cannot use, with the reason") {
  fatpack::remote_cache_options o;
  o.url = "ftp://host/x";
  auto s = fatpack::set_cache_remote(o);
  REQUIRE_FALSE(s);
  CHECK(s.error().message.find("unsupported URL") != std::string::npos);
  o.url = "https://user:pw@host/x";
  o.read_write = true;
  s = fatpack::set_cache_remote(o);
  REQUIRE_FALSE(s);
  CHECK(s.error().message.find("TRUST_ALL_WRITERS") != std::string::npos);
  CHECK(s.error().message.find("pw@") == std::string::npos);
  o.url.clear();
  o.read_write = false;
  CHECK(fatpack::set_cache_remote(o));  // no remote: fine
}

TEST_CASE("prefetch: one batch for many keys; hits are checked and served by find, refused ones are not") {
  auto store = std::make_shared<memory_store>();
  auto a = make_node("pf_a", store);
  std::vector<jit_key> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(key_for(0x900 + i));
    if (i < 3) a.layer->store(keys.back(), fatpack::core::byte_span(cubin90()));
  }
  REQUIRE(a.layer->flush(10000));
  // Key 2's entry is replaced by another key's: prefetch must refuse it.
  const std::string r2 = remote_key(cache::make_full_key(keys[2]));
  store->data[r2] = store->data[remote_key(cache::make_full_key(keys[0]))];
  auto b = make_node("pf_b", store);
  const int gets0 = store->gets;
  CHECK(b.layer->prefetch(keys) == 2);
  CHECK(store->gets == gets0 + 5);
  CHECK(b.layer->find(keys[0], true));
  CHECK(b.layer->find(keys[1], true));
  CHECK(store->gets == gets0 + 5);  // served from the batch
  CHECK_FALSE(b.layer->find(keys[2], true));
  CHECK_FALSE(b.layer->find(keys[4], true));
}

TEST_CASE("the environment: each variable read, each bad value one problem and no remote") {
  const std::string dir = fresh("env");
  const std::string key = dir + "/k", creds = dir + "/c";
  std::ofstream(key) << std::string(40, 'e');
  std::ofstream(creds) << "bearer tok-from-file";
  chmod(key.c_str(), 0600);
  chmod(creds.c_str(), 0600);
  const char* vars[] = {"FATPACK_CACHE_REMOTE", "FATPACK_CACHE_REMOTE_MODE", "FATPACK_CACHE_REMOTE_KEY",
                        "FATPACK_CACHE_REMOTE_TRUST_ALL_WRITERS", "FATPACK_CACHE_REMOTE_CONNECT_TIMEOUT_MS",
                        "FATPACK_CACHE_REMOTE_TIMEOUT_MS", "FATPACK_CACHE_REMOTE_LEASE_MS",
                        "FATPACK_CACHE_REMOTE_CREDENTIALS", "FATPACK_CACHE_REMOTE_TOKEN",
                        "FATPACK_CACHE_REMOTE_CA_FILE", "FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS"};
  auto clear = [&] {
    for (const char* v : vars) unsetenv(v);
  };
  clear();
  CHECK(remote_config_from_env().store.url.empty());  // nothing configured: no remote, no problem
  setenv("FATPACK_CACHE_REMOTE", "https://cache.example/fp", 1);
  setenv("FATPACK_CACHE_REMOTE_MODE", "read-write", 1);
  setenv("FATPACK_CACHE_REMOTE_KEY", key.c_str(), 1);
  setenv("FATPACK_CACHE_REMOTE_CONNECT_TIMEOUT_MS", "250", 1);
  setenv("FATPACK_CACHE_REMOTE_TIMEOUT_MS", "1500", 1);
  setenv("FATPACK_CACHE_REMOTE_LEASE_MS", "60000", 1);
  setenv("FATPACK_CACHE_REMOTE_TOKEN", "tok-from-env", 1);
  setenv("FATPACK_CACHE_REMOTE_CA_FILE", "/etc/ssl/ca.pem", 1);
  setenv("FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS", "700", 1);
  auto c = remote_config_from_env();
  CHECK(c.problems.empty());
  CHECK(c.enabled());
  CHECK(c.read_write);
  CHECK(c.key == std::string(40, 'e'));
  CHECK(c.store.connect_timeout.count() == 250);
  CHECK(c.store.transfer_timeout.count() == 1500);
  CHECK(c.lease.count() == 60000);
  CHECK(c.store.bearer_token == "tok-from-env");
  CHECK(c.store.ca_file == "/etc/ssl/ca.pem");
  CHECK(c.exit_flush.count() == 700);
  setenv("FATPACK_CACHE_REMOTE_CREDENTIALS", creds.c_str(), 1);
  CHECK(remote_config_from_env().store.bearer_token == "tok-from-file");  // the file wins
  // Bad values: each one a problem, and the remote is not used.
  for (auto [var, value] : std::initializer_list<std::pair<const char*, const char*>>{
           {"FATPACK_CACHE_REMOTE_MODE", "rw"},
           {"FATPACK_CACHE_REMOTE_TIMEOUT_MS", "0"},
           {"FATPACK_CACHE_REMOTE_TIMEOUT_MS", "12abc"},
           {"FATPACK_CACHE_REMOTE_CONNECT_TIMEOUT_MS", "999999999999"},
           {"FATPACK_CACHE_REMOTE_LEASE_MS", "-5"},
           {"FATPACK_CACHE_REMOTE_KEY", "/nonexistent/key"}}) {
    CAPTURE(var);
    CAPTURE(value);
    const char* old = std::getenv(var);
    const std::string saved = old ? old : "";
    setenv(var, value, 1);
    auto bad = remote_config_from_env();
    CHECK_FALSE(bad.problems.empty());
    CHECK_FALSE(bad.enabled());
    if (old) setenv(var, saved.c_str(), 1);
    else unsetenv(var);
  }
  // Read-write without a key: refused unless trusted.
  unsetenv("FATPACK_CACHE_REMOTE_KEY");
  CHECK_FALSE(remote_config_from_env().enabled());
  setenv("FATPACK_CACHE_REMOTE_TRUST_ALL_WRITERS", "1", 1);
  CHECK(remote_config_from_env().enabled());
  clear();
}
