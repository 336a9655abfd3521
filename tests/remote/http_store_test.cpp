// The HTTP(S) fleet-cache backend (runtime/src/remote/http_store.cpp) against a real nginx with WebDAV
// PUT on loopback, and against fault servers: one that never answers, one killed mid-transfer, a
// proxy that truncates, error statuses, a killed nginx. Every fault must come back as a `fault` value
// within the timeouts, naming the store and the key and never a secret.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "remote/http_store.hpp"
#include "remote/remote_store.hpp"
#include "servers.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace fatpack::detail::remote;
using namespace fatpack::test::remote;
using std::chrono::milliseconds;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r(std::random_device{}());
  return r;
}

std::string random_key() {
  static const char hex[] = "0123456789abcdef";
  std::string k(64, '0');
  for (char& c : k) c = hex[rng()() & 15];
  return k;
}

std::vector<std::uint8_t> random_body(std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng()());
  return b;
}

std::unique_ptr<remote_store> open(store_settings s) {
  std::string why;
  auto store = make_http_store(s, why);
  INFO(why);
  REQUIRE(store);
  return store;
}

std::unique_ptr<remote_store> open(const std::string& url, milliseconds transfer = milliseconds(3000)) {
  store_settings s;
  s.url = url;
  s.transfer_timeout = transfer;
  return open(s);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

const char* name(outcome o) {
  switch (o) {
    case outcome::hit: return "hit";
    case outcome::miss: return "miss";
    case outcome::stored: return "stored";
    case outcome::exists: return "exists";
    case outcome::acquired: return "acquired";
    case outcome::held: return "held";
    case outcome::fault: return "fault";
    case outcome::unsupported: return "unsupported";
  }
  return "?";
}

}  // namespace

TEST_CASE("put_if_absent then get round-trips 1 MB bodies; a second put finds it; an absent key misses") {
  nginx_server nginx;
  auto store = open(nginx.url());
  for (int i = 0; i < 4; ++i) {
    const std::string key = random_key();
    const auto body = random_body(1 << 20);
    reply r = store->put_if_absent(key, body);
    INFO(r.message);
    REQUIRE(r.what == outcome::stored);
    // The server really has it, byte for byte.
    const std::string on_disk = read_text_file(nginx.file_of(key));
    CHECK(std::vector<std::uint8_t>(on_disk.begin(), on_disk.end()) == body);
    r = store->get(key);
    REQUIRE(r.what == outcome::hit);
    CHECK(r.body == body);
    CHECK(store->put_if_absent(key, random_body(10)).what == outcome::exists);
    CHECK(store->get(key).body == body);  // the second put wrote nothing
  }
  const reply miss = store->get(random_key());
  CHECK(miss.what == outcome::miss);
  CHECK(miss.body.empty());
  // An empty body is an entry too.
  const std::string empty_key = random_key();
  CHECK(store->put_if_absent(empty_key, {}).what == outcome::stored);
  const reply empty = store->get(empty_key);
  CHECK(empty.what == outcome::hit);
  CHECK(empty.body.empty());
  CHECK(store->lease(empty_key, "node", milliseconds(1000)).what == outcome::unsupported);
  store->release(empty_key, "node");
  CHECK(store->describe() == nginx.url());
}

TEST_CASE("get_many: 16 keys, some absent, one reply per key in order") {
  nginx_server nginx;
  auto store = open(nginx.url());
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> bodies;
  for (int i = 0; i < 16; ++i) {
    keys.push_back(random_key());
    bodies.push_back(random_body(1000 + 7919 * static_cast<std::size_t>(i)));
    if (i % 3 != 1) REQUIRE(store->put_if_absent(keys.back(), bodies.back()).what == outcome::stored);
  }
  for (int round = 0; round < 2; ++round) {  // the second reuses the pooled connections
    const auto replies = store->get_many(keys);
    REQUIRE(replies.size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      INFO(i << ": " << replies[i].message);
      if (i % 3 != 1) {
        CHECK(replies[i].what == outcome::hit);
        CHECK(replies[i].body == bodies[i]);
      } else {
        CHECK(replies[i].what == outcome::miss);
      }
    }
  }
  CHECK(store->get_many({}).empty());
  // A key that is not a file name never reaches the server.
  const auto bad = store->get_many({"../etc/passwd", keys[0]});
  CHECK(bad[0].what == outcome::fault);
  CHECK(bad[0].message.find("not a valid key") != std::string::npos);
  CHECK(bad[1].what == outcome::hit);
}

TEST_CASE("a body over max_body is a fault, at max_body a hit") {
  nginx_server nginx;
  auto writer = open(nginx.url());
  const std::string key = random_key();
  const auto body = random_body(100000);
  REQUIRE(writer->put_if_absent(key, body).what == outcome::stored);
  store_settings s;
  s.url = nginx.url();
  s.max_body = 99999;
  const reply r = open(s)->get(key);
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("larger than 99999 bytes") != std::string::npos);
  CHECK(r.message.find(key) != std::string::npos);
  s.max_body = 100000;
  CHECK(open(s)->get(key).body == body);
  // A server that sends no Content-Length (chunked) is stopped by the write bound instead.
  fault_server chunked([](int fd, const std::atomic<bool>& stopping) {
    if (read_request(fd, stopping).empty()) return;
    std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 40; ++i) out += "1000\r\n" + std::string(4096, 'z') + "\r\n";
    out += "0\r\n\r\n";
    send_all(fd, out.data(), out.size());
  });
  s.url = chunked.url();
  s.max_body = 50000;
  const reply c = open(s)->get(key);
  CHECK(c.what == outcome::fault);
  CHECK(c.message.find("larger than 50000 bytes") != std::string::npos);
}

TEST_CASE("fault servers: each is a fault within the timeout, never a hang") {
  const milliseconds transfer(600);
  const double limit = 0.6 + 0.5;  // the transfer timeout and slack (our deadline adds 0.25 s)
  const std::string key = random_key();

  SUBCASE("(a) accepts and never answers: get, get_many, put") {
    fault_server server(fault_server::silent());
    auto store = open(server.url(), transfer);
    auto t0 = std::chrono::steady_clock::now();
    reply r = store->get(key);
    CHECK(seconds_since(t0) < limit);
    CHECK(r.what == outcome::fault);
    CHECK(r.message.find("timed out") != std::string::npos);
    CHECK(r.message.find(key) != std::string::npos);
    MESSAGE(r.message);
    t0 = std::chrono::steady_clock::now();
    const auto many = store->get_many({random_key(), random_key(), random_key(), random_key()});
    CHECK(seconds_since(t0) < limit);
    for (const reply& m : many) CHECK(m.what == outcome::fault);
    t0 = std::chrono::steady_clock::now();
    CHECK(store->put_if_absent(key, random_body(1000)).what == outcome::fault);
    CHECK(seconds_since(t0) < limit);
  }
  SUBCASE("(b) 200 with Content-Length 100000, 100 bytes, then closed: truncated") {
    fault_server server(fault_server::short_body(100000, 100));
    auto t0 = std::chrono::steady_clock::now();
    const reply r = open(server.url(), transfer)->get(key);
    CHECK(seconds_since(t0) < limit);
    CHECK(r.what == outcome::fault);
    CHECK(r.body.empty());
    CHECK(r.message.find("truncated body") != std::string::npos);
    MESSAGE(r.message);
  }
  SUBCASE("(c) a proxy that truncates nginx's answer") {
    nginx_server nginx;
    REQUIRE(open(nginx.url())->put_if_absent(key, random_body(300000)).what == outcome::stored);
    fault_server proxy(fault_server::truncating_proxy(nginx.port()));
    auto t0 = std::chrono::steady_clock::now();
    const reply r = open(proxy.url(), transfer)->get(key);
    CHECK(seconds_since(t0) < limit);
    CHECK(r.what == outcome::fault);
    CHECK(proxy.connections() >= 1);
    CHECK(r.message.find("truncated body") != std::string::npos);
    MESSAGE(r.message);
  }
  SUBCASE("(d) 500, 401, 507, 302, 403: faults naming the status") {
    for (int code : {500, 401, 507, 302, 403, 503}) {
      fault_server server(fault_server::status([code](const std::string&) { return code; }));
      auto store = open(server.url(), transfer);
      const reply r = store->get(key);
      CHECK(r.what == outcome::fault);
      CHECK(r.message.find("HTTP " + std::to_string(code)) != std::string::npos);
      CHECK(r.message.find(key) != std::string::npos);
      const reply p = store->put_if_absent(key, random_body(100));
      CHECK(p.what == outcome::fault);
      CHECK(p.message.find("HTTP " + std::to_string(code)) != std::string::npos);
    }
    // The HEAD says absent, the PUT meets a full server.
    fault_server full(fault_server::status([](const std::string& m) { return m == "HEAD" ? 404 : 507; }));
    const reply p = open(full.url(), transfer)->put_if_absent(key, random_body(5000));
    CHECK(p.what == outcome::fault);
    CHECK(p.message.find("PUT " + key + ": HTTP 507 (the server is full)") != std::string::npos);
    // A server that honours If-None-Match: * refuses the PUT of an existing key: exists.
    fault_server racing(fault_server::status([](const std::string& m) { return m == "HEAD" ? 404 : 412; }));
    CHECK(open(racing.url(), transfer)->put_if_absent(key, random_body(10)).what == outcome::exists);
  }
  SUBCASE("nginx killed with SIGKILL: connection refused") {
    nginx_server nginx;
    auto store = open(nginx.url(), transfer);
    REQUIRE(store->put_if_absent(key, random_body(1000)).what == outcome::stored);
    REQUIRE(store->get(key).what == outcome::hit);
    nginx.kill_hard();
    auto t0 = std::chrono::steady_clock::now();
    const reply r = store->get(key);
    CHECK(seconds_since(t0) < limit);
    CHECK(r.what == outcome::fault);
    CHECK(r.message.find("Connection refused") != std::string::npos);
    MESSAGE(r.message);
    CHECK(store->put_if_absent(key, random_body(10)).what == outcome::fault);
  }
}

TEST_CASE("basic authentication against nginx; the password is never in a message") {
  const std::string user = "fleet", password = "s3cret-Pa55word";
  nginx_server nginx(nginx_options{user, password});
  const std::string key = random_key();
  std::vector<std::string> messages;

  store_settings none;
  none.url = nginx.url();
  auto anonymous = open(none);
  reply r = anonymous->put_if_absent(key, random_body(100));
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("HTTP 401") != std::string::npos);
  messages.push_back(r.message);
  r = anonymous->get(key);
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("HTTP 401 (authentication refused)") != std::string::npos);
  messages.push_back(r.message);

  store_settings wrong = none;
  wrong.basic_user = user;
  wrong.basic_password = "not-" + password;
  r = open(wrong)->get(key);
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("HTTP 401") != std::string::npos);
  messages.push_back(r.message);

  store_settings right = none;
  right.basic_user = user;
  right.basic_password = password;
  auto authed = open(right);
  const auto body = random_body(200000);
  CHECK(authed->put_if_absent(key, body).what == outcome::stored);
  CHECK(authed->get(key).body == body);

  // Credentials in the URL work the same and never show in describe() or messages.
  const std::string in_url = "http://" + user + ":" + password + "@127.0.0.1:" + std::to_string(nginx.port()) + "/cache";
  auto from_url = open(in_url);
  CHECK(from_url->get(key).body == body);
  CHECK(from_url->describe() == nginx.url());
  messages.push_back(from_url->describe());
  r = from_url->get("../" + key);
  messages.push_back(r.message);
  // The same URL pointed at a dead port: curl's own error text is scrubbed too.
  const int dead = free_loopback_port();
  auto refused = open("http://" + user + ":" + password + "@127.0.0.1:" + std::to_string(dead) + "/cache?sig=" + password);
  r = refused->get(key);
  CHECK(r.what == outcome::fault);
  messages.push_back(r.message);
  messages.push_back(refused->describe());
  CHECK(refused->describe().find("?***") != std::string::npos);
  // Bad settings: the reason names no secret either.
  std::string why;
  store_settings both = right;
  both.bearer_token = password;
  CHECK(!make_http_store(both, why));
  messages.push_back(why);
  CHECK(!make_http_store(store_settings{"ftp://" + user + ":" + password + "@host/x"}, why));
  messages.push_back(why);
  CHECK(!open_store(store_settings{"gopher://" + user + ":" + password + "@host/x"}, why));
  messages.push_back(why);
  CHECK(redact_url("https://" + user + ":" + password + "@host:1/base?x=" + password) == "https://***@host:1/base?***");
  for (const std::string& m : messages) {
    INFO(m);
    CHECK(m.find(password) == std::string::npos);
    CHECK(!m.empty());
  }
}

TEST_CASE("nginx with anonymous reads and authenticated writes (limit_except GET HEAD), the docs' example") {
  nginx_options o;
  o.basic_user = "writer";
  o.basic_password = "w-Pa55";
  o.authenticate_writes_only = true;
  nginx_server nginx(o);
  MESSAGE("nginx.conf:\n" << nginx.config());
  const std::string key = random_key();
  const auto body = random_body(5000);
  auto reader = open(nginx.url());
  const reply refused = reader->put_if_absent(key, body);
  CHECK(refused.what == outcome::fault);
  CHECK(refused.message.find("PUT " + key + ": HTTP 401") != std::string::npos);
  store_settings s;
  s.url = nginx.url();
  s.basic_user = o.basic_user;
  s.basic_password = o.basic_password;
  CHECK(open(s)->put_if_absent(key, body).what == outcome::stored);
  CHECK(reader->get(key).body == body);
  CHECK(reader->put_if_absent(key, body).what == outcome::exists);  // the anonymous HEAD finds it
}

TEST_CASE("a bearer token is sent as Authorization: Bearer and never in a message") {
  const std::string token = "tok-9f8e7d6c5b4a";
  std::string seen;
  std::mutex seen_mutex;
  fault_server server(fault_server::status([](const std::string&) { return 401; }, &seen, &seen_mutex));
  store_settings s;
  s.url = server.url();
  s.bearer_token = token;
  const reply r = open(s)->get(random_key());
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find(token) == std::string::npos);
  std::lock_guard<std::mutex> lock(seen_mutex);
  CHECK(seen.find("Authorization: Bearer " + token + "\r\n") != std::string::npos);
  CHECK(seen.find("User-Agent: fatpack-fleet-cache") != std::string::npos);
  std::string why;
  s.bearer_token = "a\r\nX-Injected: 1";
  CHECK(!make_http_store(s, why));
  CHECK(why.find("control character") != std::string::npos);
}

TEST_CASE("8 threads get and put concurrently on one store") {
  nginx_server nginx;
  auto store = open(nginx.url());
  std::vector<std::string> shared_keys;
  for (int i = 0; i < 8; ++i) shared_keys.push_back(random_key());
  std::atomic<int> faults{0}, hits{0}, stored{0};
  std::vector<std::string> fault_messages(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 local(static_cast<std::uint64_t>(t) * 7919);
      for (int i = 0; i < 12; ++i) {
        // Everyone publishes the same shared keys (racing puts) and reads them all back.
        const std::string& key = shared_keys[(static_cast<std::size_t>(t) + static_cast<std::size_t>(i)) % 8];
        const std::vector<std::uint8_t> body(4096 + (local() % 4096), static_cast<std::uint8_t>(key[0]));
        const reply p = store->put_if_absent(key, body);
        if (p.what == outcome::stored) ++stored;
        else if (p.what != outcome::exists) { ++faults; fault_messages[static_cast<std::size_t>(t)] = p.message; }
        for (const reply& g : store->get_many(shared_keys)) {
          if (g.what == outcome::hit) {
            ++hits;
            // Whoever won, the body is one writer's whole body (same fill byte throughout).
            bool uniform = !g.body.empty();
            for (std::uint8_t b : g.body) uniform = uniform && b == g.body[0];
            if (!uniform) ++faults;
          } else if (g.what != outcome::miss) {
            ++faults;
            fault_messages[static_cast<std::size_t>(t)] = g.message;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& m : fault_messages) if (!m.empty()) MESSAGE(m);
  CHECK(faults.load() == 0);
  CHECK(stored.load() >= 8);
  CHECK(hits.load() > 0);
  MESSAGE("stored " << stored.load() << " (8 keys; nginx ignores If-None-Match, so racing puts may both store), hits " << hits.load());
}

TEST_CASE("a fork() child opens its own connections (the parent's pooled ones are not shared)") {
  nginx_server nginx;
  auto store = open(nginx.url());
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> bodies;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(random_key());
    bodies.push_back(random_body(50000 + static_cast<std::size_t>(i)));
    REQUIRE(store->put_if_absent(keys.back(), bodies.back()).what == outcome::stored);
  }
  REQUIRE(store->get_many(keys).size() == 4);  // the pool now holds open connections
  const pid_t child = ::fork();
  if (child == 0) {
    int bad = 0;
    for (int round = 0; round < 20; ++round) {
      const auto replies = store->get_many(keys);
      for (std::size_t i = 0; i < keys.size(); ++i) bad += replies[i].what != outcome::hit || replies[i].body != bodies[i];
    }
    ::_exit(bad == 0 ? 0 : 1);
  }
  int bad = 0;
  for (int round = 0; round < 20; ++round) {
    const auto replies = store->get_many(keys);
    for (std::size_t i = 0; i < keys.size(); ++i) bad += replies[i].what != outcome::hit || replies[i].body != bodies[i];
  }
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(bad == 0);
}

TEST_CASE("HTTPS: trusted through ca_file, refused without it") {
  temp_dir certs;
  std::string why;
  if (!make_self_signed_certificate(certs.path(), why)) {
    MESSAGE("HTTPS case skipped: " << why);
    return;
  }
  nginx_server nginx(nginx_options{"", "", false, certs.path() + "/cert.pem", certs.path() + "/key.pem"});
  REQUIRE(nginx.url().rfind("https://", 0) == 0);
  store_settings s;
  s.url = nginx.url();
  s.ca_file = certs.path() + "/cert.pem";
  auto store = open(s);
  const std::string key = random_key();
  const auto body = random_body(300000);
  const reply p = store->put_if_absent(key, body);
  INFO(p.message);
  REQUIRE(p.what == outcome::stored);
  CHECK(store->get(key).body == body);
  // The system's CAs do not know this certificate: a fault, not a silent plain-text fallback.
  s.ca_file.clear();
  const reply r = open(s)->get(key);
  CHECK(r.what == outcome::fault);
  MESSAGE(r.message);
  // Plain HTTP to the TLS port is a fault (nginx answers 400), never a hit.
  CHECK(open("http://127.0.0.1:" + std::to_string(nginx.port()) + "/cache")->get(key).what == outcome::fault);
}

TEST_CASE("proxies come from the environment (http_proxy), their credentials never in a message") {
  std::string seen;
  std::mutex seen_mutex;
  int answer = 404;
  fault_server proxy(fault_server::status([&answer](const std::string&) { return answer; }, &seen, &seen_mutex));
  const std::string proxy_password = "proxy-Pw-31337";
  ::setenv("http_proxy", ("http://puser:" + proxy_password + "@127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
  ::setenv("no_proxy", "", 1);
  const std::string key = random_key();
  {
    // A host that does not resolve: only the proxy can answer for it.
    auto store = open("http://fleet-cache.invalid/cache");
    CHECK(store->get(key).what == outcome::miss);
    answer = 502;
    const reply r = store->get(key);
    CHECK(r.what == outcome::fault);
    CHECK(r.message.find("HTTP 502") != std::string::npos);
    CHECK(r.message.find(proxy_password) == std::string::npos);
  }
  ::unsetenv("http_proxy");
  ::unsetenv("no_proxy");
  std::lock_guard<std::mutex> lock(seen_mutex);
  CHECK(seen.find("GET http://fleet-cache.invalid/cache/" + key + " HTTP/1.1") != std::string::npos);
  CHECK(seen.find("Proxy-Authorization: Basic ") != std::string::npos);
}

TEST_CASE("figures: loopback GET latency (reported, not asserted)") {
  nginx_server nginx;
  auto store = open(nginx.url());
  for (std::size_t size : {std::size_t(4096), std::size_t(1) << 20}) {
    const std::string key = random_key();
    REQUIRE(store->put_if_absent(key, random_body(size)).what == outcome::stored);
    const int n = size < 100000 ? 200 : 40;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) REQUIRE(store->get(key).what == outcome::hit);
    MESSAGE("GET hit of " << size << " bytes: " << seconds_since(t0) * 1e6 / n << " us each (" << n << " sequential)");
  }
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) {
    keys.push_back(random_key());
    REQUIRE(store->put_if_absent(keys.back(), random_body(65536)).what == outcome::stored);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) REQUIRE(store->get_many(keys)[15].what == outcome::hit);
  MESSAGE("get_many of 16 x 64 KiB: " << seconds_since(t0) * 1e3 / 20 << " ms each");
}

TEST_CASE("open_store and the settings: schemes, URLs, a missing libcurl") {
  std::string why;
  CHECK(!open_store(store_settings{"memcached://host:11211"}, why));
  CHECK(why.find("unsupported URL") != std::string::npos);
  CHECK(!make_http_store(store_settings{"http://"}, why));
  CHECK(why.find("no host") != std::string::npos);
  CHECK(!make_http_store(store_settings{"http://host/a b"}, why));
  CHECK(!make_http_store_with(store_settings{"http://127.0.0.1:1/x"}, "libcurl-that-does-not-exist.so.4", why));
  CHECK(why.find("needs libcurl") != std::string::npos);
  // The trailing slash of a base is dropped: <base>/<key>, never <base>//<key>.
  auto store = open("http://127.0.0.1:1/cache///");
  CHECK(store->describe() == "http://127.0.0.1:1/cache");
}

int main(int argc, char** argv) {
  if (nginx_server::executable().empty()) {
    std::puts("SKIPPED: nginx not found (install nginx-light: its WebDAV PUT serves the store)");
    return 77;
  }
  std::string why;
  if (!make_http_store(store_settings{"http://127.0.0.1:1/probe"}, why)) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  // The tests talk to loopback servers directly, whatever proxy the environment names.
  for (const char* v : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) ::unsetenv(v);
  std::signal(SIGPIPE, SIG_IGN);
  doctest::Context context(argc, argv);
  return context.run();
}
