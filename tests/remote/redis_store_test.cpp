// The Redis store (runtime/src/remote/redis_store.hpp) against a real redis-server started on loopback
// by each case (redis_server.hpp), and against fake servers that never answer or answer garbage
// (canned_server.hpp). Exits 77 (skipped) when redis-server is not installed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "canned_server.hpp"
#include "redis_server.hpp"
#include "remote/redis_store.hpp"

using namespace fatpack::detail::remote;
using fatpack_test::canned_server;
using fatpack_test::redis_options;
using fatpack_test::redis_server;
using clock_type = std::chrono::steady_clock;

namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 r{std::random_device{}()};
  return r;
}

std::string random_key() {
  static const char* hex = "0123456789abcdef";
  std::string k(64, '0');
  for (char& c : k) c = hex[rng()() % 16];
  return k;
}

std::vector<std::uint8_t> random_body(std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng()());
  return b;
}

std::unique_ptr<remote_store> open(const std::string& url, std::chrono::milliseconds transfer = std::chrono::milliseconds(2000),
                                   std::uint64_t max_body = 256ull << 20) {
  store_settings s;
  s.url = url;
  s.transfer_timeout = transfer;
  s.max_body = max_body;
  std::string why;
  auto st = make_redis_store(s, why);
  INFO(why);
  REQUIRE(st);
  return st;
}

std::string open_error(const std::string& url) {
  store_settings s;
  s.url = url;
  std::string why;
  auto st = make_redis_store(s, why);
  CHECK(!st);
  return why;
}

long long ms_since(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count();
}

}  // namespace

TEST_CASE("URLs: the accepted forms, describe() without the password, strict refusals without it") {
  store_settings s;
  std::string why;
  s.url = "redis://cache.example:6380/3";
  CHECK(make_redis_store(s, why)->describe() == "redis://cache.example:6380/3");
  s.url = "redis://:pa%40ss@host";
  CHECK(make_redis_store(s, why)->describe() == "redis://host:6379/0");
  s.url = "REDIS://user:secret-pw@10.0.0.1:7000/";
  CHECK(make_redis_store(s, why)->describe() == "redis://10.0.0.1:7000/0");
  s.url = "redis://[::1]:6390/15";
  CHECK(make_redis_store(s, why)->describe() == "redis://[::1]:6390/15");

  for (const char* bad : {"redis://", "redis://host:0", "redis://host:65536", "redis://host:123456", "redis://host:-1",
                          "redis://host:x", "redis://host/16", "redis://host/007", "redis://host/a", "redis://host/1/2",
                          "redis://-host", "redis://ho_st", "redis://host..a", "redis://[::1", "redis://[zz]:1",
                          "redis://[::1]x", "redis://host?db=1", "redis://host#x", "redis://ho st", "http://host",
                          "redis://secret-pw@host", "redis://user:@host", "redis://:pw%4@host", "redis://:p%00w@host"}) {
    const std::string w = open_error(bad);
    INFO(bad, " -> ", w);
    CHECK(!w.empty());
    CHECK(w.find("secret-pw") == std::string::npos);
  }
  CHECK(open_error("rediss://host").find("TLS") != std::string::npos);
  CHECK(open_error("redis://" + std::string(300, 'a')).find("host") != std::string::npos);
  CHECK(open_error("redis://:" + std::string(3000, 'p') + "@h").find("longer") != std::string::npos);
}

// Run by tests/remote/without_hiredis.sh with the library hidden (elsewhere it returns at once).
TEST_CASE("hiredis absent: make_redis_store names the package to install") {
  if (!std::getenv("FATPACK_TEST_HIREDIS_ABSENT")) return;
  store_settings s;
  s.url = "redis://:secret-pw@127.0.0.1:6379/0";
  std::string why;
  CHECK(!make_redis_store(s, why));
  INFO(why);
  CHECK(why.find("the Redis fleet cache needs hiredis") == 0);
  CHECK(why.find(": install libhiredis") != std::string::npos);
  CHECK(why.find("secret-pw") == std::string::npos);
}

TEST_CASE("round trip of 1 MB random bodies; a second put finds the key (SET NX)") {
  redis_server srv;
  auto st = open(srv.url());
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> bodies;
  for (int i = 0; i < 3; ++i) {
    keys.push_back(random_key());
    bodies.push_back(random_body(1 << 20));
    CHECK(st->put_if_absent(keys.back(), bodies.back()).what == outcome::stored);
  }
  auto got = st->get_many(keys);
  REQUIRE(got.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(got[i].what == outcome::hit);
    CHECK(got[i].body == bodies[i]);
  }
  // Publish once: the second put writes nothing.
  CHECK(st->put_if_absent(keys[0], random_body(100)).what == outcome::exists);
  CHECK(st->get(keys[0]).body == bodies[0]);
  // The empty body is a value too.
  const std::string empty_key = random_key();
  CHECK(st->put_if_absent(empty_key, {}).what == outcome::stored);
  auto e = st->get(empty_key);
  CHECK(e.what == outcome::hit);
  CHECK(e.body.empty());
}

TEST_CASE("MGET of 16 keys, some absent: one reply per key, in order; a long batch is split") {
  redis_server srv;
  auto st = open(srv.url());
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) {
    keys.push_back(random_key());
    if (i % 3 == 0) REQUIRE(st->put_if_absent(keys[i], std::vector<std::uint8_t>(static_cast<std::size_t>(i + 1), static_cast<std::uint8_t>(i))).what == outcome::stored);
  }
  auto got = st->get_many(keys);
  REQUIRE(got.size() == 16);
  for (int i = 0; i < 16; ++i) {
    INFO(i);
    if (i % 3 == 0) {
      CHECK(got[i].what == outcome::hit);
      CHECK(got[i].body == std::vector<std::uint8_t>(static_cast<std::size_t>(i + 1), static_cast<std::uint8_t>(i)));
    } else {
      CHECK(got[i].what == outcome::miss);
    }
  }
  CHECK(st->get_many({}).empty());
  // 600 keys: three MGETs; an invalid key among them is a fault for that key only.
  std::vector<std::string> many(600);
  for (auto& k : many) k = random_key();
  many[7] = keys[0];
  many[8] = "not a key";
  auto m = st->get_many(many);
  REQUIRE(m.size() == 600);
  CHECK(m[7].what == outcome::hit);
  CHECK(m[8].what == outcome::fault);
  CHECK(m[599].what == outcome::miss);
}

TEST_CASE("max_body bounds what is read and what is put; the connection stays usable") {
  redis_server srv;
  auto big = open(srv.url());
  auto small = open(srv.url(), std::chrono::milliseconds(2000), 1000);
  const std::string k = random_key(), k2 = random_key();
  REQUIRE(big->put_if_absent(k, random_body(5000)).what == outcome::stored);
  auto r = small->get(k);
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("more than the bound") != std::string::npos);
  CHECK(r.body.empty());
  CHECK(small->put_if_absent(k2, random_body(1001)).what == outcome::fault);
  CHECK(small->put_if_absent(k2, random_body(1000)).what == outcome::stored);
  CHECK(small->get(k2).what == outcome::hit);
}

TEST_CASE("lease: acquired by one owner, held for another, released only by its owner, ends after its ttl") {
  redis_server srv;
  auto st = open(srv.url());
  const std::string k = random_key();
  CHECK(st->lease(k, "node-a/1", std::chrono::seconds(10)).what == outcome::acquired);
  CHECK(st->lease(k, "node-b/2", std::chrono::seconds(10)).what == outcome::held);
  st->release(k, "node-b/2");  // not its lease: nothing happens
  CHECK(st->lease(k, "node-c/3", std::chrono::seconds(10)).what == outcome::held);
  st->release(k, "node-a/1");
  CHECK(st->lease(k, "node-b/2", std::chrono::seconds(10)).what == outcome::acquired);
  // The lease does not touch the entry itself.
  CHECK(st->get(k).what == outcome::miss);

  const std::string k2 = random_key();
  CHECK(st->lease(k2, "node-a/1", std::chrono::milliseconds(150)).what == outcome::acquired);
  CHECK(st->lease(k2, "node-b/2", std::chrono::milliseconds(150)).what == outcome::held);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  CHECK(st->lease(k2, "node-b/2", std::chrono::milliseconds(150)).what == outcome::acquired);
  CHECK(st->lease(k2, "bad owner", std::chrono::milliseconds(150)).what == outcome::fault);
  CHECK(st->lease(k2, "node-a/1", std::chrono::milliseconds(0)).what == outcome::fault);
}

TEST_CASE("databases: SELECT keeps db 3 apart from db 0") {
  redis_server srv;
  auto db3 = open(srv.url(3));
  auto db0 = open(srv.url(0));
  CHECK(db3->describe() == "redis://127.0.0.1:" + std::to_string(srv.port()) + "/3");
  const std::string k = random_key();
  REQUIRE(db3->put_if_absent(k, random_body(10)).what == outcome::stored);
  CHECK(db3->get(k).what == outcome::hit);
  CHECK(db0->get(k).what == outcome::miss);
}

TEST_CASE("IPv6: redis://[::1]:port") {
  if (!redis_server::ipv6_loopback()) {
    MESSAGE("no IPv6 loopback here: case not run");
    return;
  }
  redis_options o;
  o.ipv6 = true;
  redis_server srv(o);
  auto st = open("redis://[::1]:" + std::to_string(srv.port()) + "/1");
  CHECK(st->describe() == "redis://[::1]:" + std::to_string(srv.port()) + "/1");
  const std::string k = random_key();
  CHECK(st->put_if_absent(k, random_body(100)).what == outcome::stored);
  CHECK(st->get(k).what == outcome::hit);
}

TEST_CASE("password: AUTH with the right one works; a wrong one is a fault whose message holds no password") {
  redis_options o;
  o.password = "s3cret-Right-PW";
  redis_server srv(o);
  auto good = open(srv.url());
  CHECK(good->describe().find("s3cret") == std::string::npos);
  const std::string k = random_key();
  CHECK(good->put_if_absent(k, random_body(10)).what == outcome::stored);
  // The ACL form (user "default", Redis 6+).
  auto acl = open("redis://default:s3cret-Right-PW@127.0.0.1:" + std::to_string(srv.port()) + "/0");
  CHECK(acl->get(k).what == outcome::hit);

  const std::string wrong_url = "redis://:wrong-Pass-XYZ@127.0.0.1:" + std::to_string(srv.port()) + "/0";
  auto bad = open(wrong_url);
  for (const reply& r : {bad->get(k), bad->put_if_absent(k, random_body(3)), bad->lease(k, "me", std::chrono::seconds(1))}) {
    CHECK(r.what == outcome::fault);
    INFO(r.message);
    CHECK(r.message.find("authentication") != std::string::npos);
    CHECK(r.message.find("wrong-Pass-XYZ") == std::string::npos);
    CHECK(r.message.find("s3cret") == std::string::npos);
  }
  CHECK(bad->describe().find("wrong-Pass") == std::string::npos);
  // No password at all against a server that wants one: a fault naming the server's NOAUTH.
  auto none = open("redis://127.0.0.1:" + std::to_string(srv.port()) + "/0");
  auto r = none->get(k);
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("NOAUTH") != std::string::npos);
}

TEST_CASE("server full (maxmemory, noeviction): a fault naming the server's error") {
  redis_options o;
  o.maxmemory = "2mb";
  redis_server srv(o);
  auto st = open(srv.url());
  reply last;
  int stored = 0;
  for (int i = 0; i < 40; ++i) {
    last = st->put_if_absent(random_key(), random_body(100 << 10));
    if (last.what != outcome::stored) break;
    ++stored;
  }
  INFO(last.message);
  CHECK(last.what == outcome::fault);
  CHECK(last.message.find("maxmemory") != std::string::npos);
  CHECK(stored < 40);
  // Reads still work.
  CHECK(st->get(random_key()).what == outcome::miss);
}

TEST_CASE("server killed (kill -9): a fault at once; restarted on the same port: works again") {
  redis_server srv;
  auto st = open(srv.url());
  const std::string k = random_key();
  REQUIRE(st->put_if_absent(k, random_body(10)).what == outcome::stored);
  REQUIRE(st->get(k).what == outcome::hit);
  srv.kill_hard();
  auto t0 = clock_type::now();
  auto r = st->get(k);
  CHECK(r.what == outcome::fault);
  CHECK(ms_since(t0) < 500);
  CHECK(st->put_if_absent(k, random_body(10)).what == outcome::fault);
  CHECK(st->lease(k, "me", std::chrono::seconds(1)).what == outcome::fault);
  REQUIRE(srv.start());
  // No persistence: the restarted server is empty, and the same store object reconnects.
  CHECK(st->get(k).what == outcome::miss);
  CHECK(st->put_if_absent(k, random_body(10)).what == outcome::stored);
  CHECK(st->get(k).what == outcome::hit);
  // A restart while connections sit idle in the pool: the stale one is replaced without a fault.
  srv.stop();
  REQUIRE(srv.start());
  CHECK(st->get(k).what == outcome::miss);
}

TEST_CASE("a server that accepts and never answers: a fault within the transfer timeout, never a hang") {
  canned_server silent("");
  auto st = open(silent.url(), std::chrono::milliseconds(300));
  const std::string k = random_key();
  // Made before the clock starts: under TSan, making 1 MiB of random bytes took most of a second,
  // and a put's time was read as 1080 ms (CI of 3b90d33).
  const auto body = random_body(1 << 20);
  for (int op = 0; op < 3; ++op) {
    auto t0 = clock_type::now();
    reply r = op == 0 ? st->get(k) : op == 1 ? st->put_if_absent(k, body) : st->lease(k, "me", std::chrono::seconds(1));
    const long long ms = ms_since(t0);
    INFO(op, " ", r.message, " after ", ms, " ms");
    CHECK(r.what == outcome::fault);
    CHECK(r.message.find("timed out") != std::string::npos);
    CHECK(ms >= 250);
    CHECK(ms < 1500);  // bounded (no hang): the 300 ms timeout, with room for a sanitizer's slowness
  }
  auto t0 = clock_type::now();
  st->release(k, "me");
  CHECK(ms_since(t0) < 1000);
  // With a password, the AUTH of the handshake is what waits: bounded all the same.
  auto with_pw = open("redis://:pw@127.0.0.1:" + std::to_string(silent.port()) + "/2", std::chrono::milliseconds(300));
  t0 = clock_type::now();
  auto r = with_pw->get(k);
  CHECK(r.what == outcome::fault);
  CHECK(ms_since(t0) < 1000);
}

TEST_CASE("a server that drips its reply a byte at a time: a fault at the transfer timeout, not per byte") {
  canned_server slow("*1\r\n$40\r\n" + std::string(40, 'x') + "\r\n", false, "", std::chrono::milliseconds(20));
  auto st = open(slow.url(), std::chrono::milliseconds(300));
  auto t0 = clock_type::now();
  auto r = st->get(random_key());
  const long long ms = ms_since(t0);
  INFO(r.message, " after ", ms, " ms");
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("timed out") != std::string::npos);
  CHECK(ms >= 250);
  CHECK(ms < 1000);  // the whole reply would take 1 s
}

TEST_CASE("a connection the server never accepts (its backlog full): a fault at the connect timeout") {
  // A listening socket that never accepts, its accept queue filled: Linux drops further SYNs, so a
  // connect() waits (SYN retries) until the client gives up.
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(lfd, 0) == 0);
  REQUIRE(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  store_settings s;
  s.url = "redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/0";
  s.connect_timeout = std::chrono::milliseconds(200);
  s.transfer_timeout = std::chrono::milliseconds(2000);
  std::string why;
  auto st = make_redis_store(s, why);
  REQUIRE(st);
  auto t0 = clock_type::now();
  auto r = st->get(random_key());
  const long long ms = ms_since(t0);
  INFO(r.message, " after ", ms, " ms");
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("cannot connect") != std::string::npos);
  CHECK(ms >= 150);
  CHECK(ms < 900);  // well under the transfer timeout and the first SYN retry (1 s)
  for (int f : fillers) ::close(f);
  ::close(lfd);
}

TEST_CASE("malformed, truncated, oversized or wrongly typed replies: a fault, never a crash") {
  struct bad_case {
    const char* answer;
    bool close_after;
    const char* expect;  // in the message
  };
  const bad_case cases[] = {
      {"$10\r\nabc", true, "truncated"},
      {"*1\r\n$10\r\nabc", true, "truncated"},
      {"!oops\r\n", false, "unknown reply type"},
      {"*99999999999\r\n", false, "elements"},
      {"*-5\r\n", false, "array length"},
      {"*1\r\n$999999999999\r\n", false, "more than the bound"},
      {"*1\r\n$5\r\nabcdeXY", false, "CRLF"},
      {"+OK\r\n", false, "not an array"},
      {":5\r\n", false, "not an array"},
      {"*1\r\n:5\r\n", false, "wrong type"},
      {"*1\r\n+OK\r\n", false, "wrong type"},
      {"*1\r\n*1\r\n$1\r\na\r\n", false, "nested"},
      {"*2\r\n$1\r\na\r\n$1\r\nb\r\n", false, "elements"},
      {"*1\r\n$1\r\na\r\n+extra\r\n", false, "after the end"},
      {"$abc\r\n", false, "bulk length"},
      {"*1\r\n$1\r\na\n", false, "CRLF"},
      {"x\n", false, "malformed reply line"},
      {"-ERR the server is unwell\r\n", false, "unwell"},
  };
  for (const auto& c : cases) {
    canned_server srv(c.answer, c.close_after);
    auto st = open(srv.url(), std::chrono::milliseconds(500), 1 << 20);
    auto t0 = clock_type::now();
    auto r = st->get(random_key());
    INFO(c.answer, " -> ", r.message);
    CHECK(r.what == outcome::fault);
    CHECK(r.message.find(c.expect) != std::string::npos);
    CHECK(ms_since(t0) < 1000);
  }
  // Put and lease read their replies with the same care.
  const std::pair<const char*, const char*> put_cases[] = {
      {":1\r\n", "unexpected reply"}, {"+QUEUED\r\n", "unexpected reply"}, {"*0\r\n", "array where none"},
      {"$2\r\nOK\r\n", "unexpected reply"}, {"-OOM command not allowed when used memory > 'maxmemory'.\r\n", "maxmemory"}};
  for (const auto& [answer, expect] : put_cases) {
    canned_server srv(answer);
    auto st = open(srv.url(), std::chrono::milliseconds(500));
    auto p = st->put_if_absent(random_key(), random_body(10));
    INFO(answer, " -> ", p.message);
    CHECK(p.what == outcome::fault);
    CHECK(p.message.find(expect) != std::string::npos);
    auto l = st->lease(random_key(), "me", std::chrono::seconds(1));
    CHECK(l.what == outcome::fault);
  }
  // A server that echoes the password in its error: the message carries "***" instead.
  canned_server echo("-ERR bad password hunter2-PW\r\n");
  auto st = open("redis://:hunter2-PW@127.0.0.1:" + std::to_string(echo.port()) + "/0", std::chrono::milliseconds(500));
  auto r = st->get(random_key());
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("hunter2") == std::string::npos);
  CHECK(r.message.find("***") != std::string::npos);
}

TEST_CASE("an idle connection with bytes nobody asked for is not reused (they would pass for the next reply)") {
  canned_server srv("*1\r\n$-1\r\n", false, "*1\r\n$3\r\nbad\r\n");
  auto st = open(srv.url(), std::chrono::milliseconds(500));
  CHECK(st->get(random_key()).what == outcome::miss);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the late bytes have come
  auto r = st->get(random_key());
  CHECK(r.what == outcome::miss);
  CHECK(r.body.empty());
  CHECK(srv.accepted() == 2);
}

TEST_CASE("a fork() child opens its own connection instead of sharing its parent's") {
  canned_server srv("*1\r\n$-1\r\n");
  auto st = open(srv.url(), std::chrono::milliseconds(500));
  REQUIRE(st->get(random_key()).what == outcome::miss);
  REQUIRE(srv.accepted() == 1);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(st->get(random_key()).what == outcome::miss ? 0 : 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(srv.accepted() == 2);
  CHECK(st->get(random_key()).what == outcome::miss);  // the parent's connection is intact
  CHECK(srv.accepted() == 2);
}

TEST_CASE("nothing listening: a fault at once") {
  int port = 0;
  {
    canned_server gone("");
    port = gone.port();
  }
  auto st = open("redis://127.0.0.1:" + std::to_string(port) + "/0");
  auto t0 = clock_type::now();
  auto r = st->get(random_key());
  CHECK(r.what == outcome::fault);
  CHECK(r.message.find("cannot connect") != std::string::npos);
  CHECK(ms_since(t0) < 500);
}

TEST_CASE("8 threads at once on one store: every reply is right") {
  redis_server srv;
  auto st = open(srv.url());
  std::atomic<int> wrong{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 r(static_cast<std::uint64_t>(t) * 7919u + 1);
      for (int i = 0; i < 40; ++i) {
        std::string k(64, '0');
        for (char& c : k) c = "0123456789abcdef"[r() % 16];
        std::vector<std::uint8_t> body(static_cast<std::size_t>(r() % 20000));
        for (auto& b : body) b = static_cast<std::uint8_t>(r());
        if (st->put_if_absent(k, body).what != outcome::stored) ++wrong;
        auto got = st->get_many({k, random_key(), k});
        if (got.size() != 3 || got[0].what != outcome::hit || got[0].body != body || got[1].what != outcome::miss ||
            got[2].body != body)
          ++wrong;
        if (st->lease(k, "t" + std::to_string(t), std::chrono::seconds(5)).what != outcome::acquired) ++wrong;
        st->release(k, "t" + std::to_string(t));
        ++done;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
  CHECK(done.load() == 320);
}

int main(int argc, char** argv) {
  if (!redis_server::installed()) {
    std::puts("SKIPPED: redis-server not found");
    return 77;
  }
  std::signal(SIGPIPE, SIG_DFL);  // the store must never raise it (send with MSG_NOSIGNAL)
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
