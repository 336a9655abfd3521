// The Redis store (redis_store.hpp). hiredis does three things here: connecting (redisConnectWithTimeout),
// formatting commands (redisFormatCommandArgv: binary-safe, explicit lengths like "%b") and parsing
// replies (the context's redisReader). The socket I/O is ours: non-blocking, poll() against one deadline
// per request, send() with MSG_NOSIGNAL, so no call waits longer than the transfer timeout whatever the
// server does (hiredis's own blocking I/O would restart SO_RCVTIMEO at every byte a slow server drips),
// and no dead peer raises SIGPIPE. Before hiredis sees a byte, a small RESP scanner (resp_scanner below)
// checks the framing against our bounds: hiredis 0.14 has no limit of its own on a bulk length or an
// array's element count (it callocs what the header says), and every byte from the server is hostile.
#include "remote/redis_store.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>

#include "platform/os.hpp"

namespace fatpack::detail::remote {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::size_t k_max_url = 2048;
constexpr std::size_t k_max_host = 253;      // a DNS name's bound
constexpr std::size_t k_max_userinfo = 512;  // user and password, decoded, each
constexpr std::size_t k_max_key = 512;       // remote keys are 64 hex digits; the bound is for the seam
constexpr std::size_t k_max_owner = 256;
constexpr std::size_t k_max_batch = 256;      // keys per MGET (a longer get_many is split)
constexpr std::size_t k_max_idle = 8;         // idle connections kept in the pool
constexpr std::size_t k_max_line = 4096;      // a status, error or integer line, or a length header
constexpr std::size_t k_max_server_text = 200;  // of a server's error text in a message
constexpr int k_max_db = 15;                  // Redis's default `databases 16`
constexpr std::chrono::milliseconds k_max_lease{24 * 3600 * 1000};
constexpr std::size_t k_chunk = 64 * 1024;

// ---- hiredis, loaded by the soname of the headers this file was compiled against ----
//
// Never another soname: a redisReply (and a redisContext, whose err/errstr/fd/reader this file reads)
// differ between 0.14 and 1.x, so a library of another soname would be read with the wrong layout
// (undefined behaviour, not an error). The soname comes from the headers (HIREDIS_SONAME where they
// define it, as 0.14 and 1.x do; else MAJOR.MINOR), so building against 1.x headers loads 1.x.
#define FATPACK_REDIS_STR2(x) #x
#define FATPACK_REDIS_STR(x) FATPACK_REDIS_STR2(x)
#ifdef HIREDIS_SONAME
#define FATPACK_HIREDIS_SOVERSION FATPACK_REDIS_STR(HIREDIS_SONAME)
#else
#define FATPACK_HIREDIS_SOVERSION FATPACK_REDIS_STR(HIREDIS_MAJOR) "." FATPACK_REDIS_STR(HIREDIS_MINOR)
#endif
constexpr const char* k_hiredis_soname = "libhiredis.so." FATPACK_HIREDIS_SOVERSION;
constexpr const char* k_hiredis_version = FATPACK_REDIS_STR(HIREDIS_MAJOR) "." FATPACK_REDIS_STR(HIREDIS_MINOR);
constexpr const char* k_hiredis_package = "libhiredis" FATPACK_HIREDIS_SOVERSION;  // Debian's name

struct hiredis_api {
  decltype(&::redisConnectWithTimeout) connect = nullptr;
  decltype(&::redisFree) free_context = nullptr;
  decltype(&::redisFormatCommandArgv) format = nullptr;
  decltype(&::redisFreeCommand) free_command = nullptr;
  decltype(&::redisReaderFeed) feed = nullptr;
  decltype(&::redisReaderGetReply) get_reply = nullptr;
  decltype(&::freeReplyObject) free_reply = nullptr;
};

template <typename Fn>
bool bind(const os::library& lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(os::find_symbol(lib, name));
  return fn != nullptr;
}

// The library, loaded once per process (and never closed, like the driver); null with `why` when it
// cannot be (the failure is remembered: no dlopen per store).
const hiredis_api* load_hiredis(std::string& why) {
  static std::string failure;
  static const hiredis_api* api = [] () -> const hiredis_api* {
    std::string loader_why;
    os::library lib = os::open_library(k_hiredis_soname, loader_why);
    if (!lib.handle) {
      failure = std::string("the Redis fleet cache needs hiredis ") + k_hiredis_version + " (" + k_hiredis_soname +
                ": install " + k_hiredis_package + ")";
      return nullptr;
    }
    auto* a = new hiredis_api();  // never freed, like the library
    if (!bind(lib, "redisConnectWithTimeout", a->connect) || !bind(lib, "redisFree", a->free_context) ||
        !bind(lib, "redisFormatCommandArgv", a->format) || !bind(lib, "redisFreeCommand", a->free_command) ||
        !bind(lib, "redisReaderFeed", a->feed) || !bind(lib, "redisReaderGetReply", a->get_reply) ||
        !bind(lib, "freeReplyObject", a->free_reply)) {
      failure = std::string(k_hiredis_soname) + " lacks an entry point fatpack uses (a broken hiredis?)";
      delete a;
      return nullptr;
    }
    return a;
  }();
  if (!api) why = failure;
  return api;
}

// ---- the URL ----

struct target {
  std::string host;  // without brackets
  bool ipv6 = false;
  int port = 6379;
  int db = 0;
  std::string user, password;  // decoded; AUTH is sent when the password is not empty
};

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

// Percent-decoding of the user info; false on a bad escape, a NUL, a control character or a long value.
bool decode_userinfo(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size() || !is_hex(in[i + 1]) || !is_hex(in[i + 2])) return false;
      c = static_cast<char>(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2]));
      i += 2;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
    out.push_back(c);
    if (out.size() > k_max_userinfo) return false;
  }
  return true;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool valid_hostname(std::string_view h) {
  if (h.empty() || h.size() > k_max_host) return false;
  // Letters, digits, '-' and '.', no empty label, no label longer than 63 or starting/ending with '-'.
  std::size_t label = 0;
  char prev = '.';
  for (char c : h) {
    if (c == '.') {
      if (label == 0 || prev == '-') return false;
      label = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') {
      if (label == 0 && c == '-') return false;
      if (++label > 63) return false;
    } else {
      return false;
    }
    prev = c;
  }
  return prev != '-' && prev != '.';
}

bool valid_ipv6(std::string_view h) {
  if (h.size() < 2 || h.size() > 45) return false;
  return std::all_of(h.begin(), h.end(), [](char c) { return is_hex(c) || c == ':' || c == '.'; }) &&
         h.find(':') != std::string_view::npos;
}

// Parses the URL into `t`; on failure `why` names the part that is wrong, never its secret.
bool parse_url(const std::string& url, target& t, std::string& why) {
  if (url.size() > k_max_url) {
    why = "a redis:// URL longer than " + std::to_string(k_max_url) + " characters";
    return false;
  }
  const std::string_view u(url);
  auto starts_ci = [&](std::string_view p) {
    if (u.size() < p.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i)
      if ((u[i] | 0x20) != p[i]) return false;
    return true;
  };
  if (starts_ci("rediss://")) {
    why = "rediss:// (Redis over TLS) is not supported: hiredis 0.14 has no TLS (use a TLS tunnel, or the HTTPS store)";
    return false;
  }
  if (!starts_ci("redis://")) {
    why = "not a redis:// URL";
    return false;
  }
  std::string_view rest = u.substr(8);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    why = "redis:// URL: query strings and fragments are not supported (form: redis://[[user]:password@]host[:port][/db])";
    return false;
  }
  for (char c : rest)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      why = "redis:// URL: a space, control or non-ASCII character";
      return false;
    }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  // User info: up to the last '@' (a password may hold '@' unescaped; a host never does).
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view info = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const std::size_t colon = info.find(':');
    if (colon == std::string_view::npos) {
      why = "redis:// URL: the user info must be [user]:password";
      return false;
    }
    if (!decode_userinfo(info.substr(0, colon), t.user) || !decode_userinfo(info.substr(colon + 1), t.password)) {
      why = "redis:// URL: a bad user name or password (a bad %-escape, a control character, or longer than " +
            std::to_string(k_max_userinfo) + " bytes)";
      return false;
    }
    if (t.password.empty()) {
      why = "redis:// URL: user info without a password";
      return false;
    }
  }
  std::string_view host, port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      why = "redis:// URL: an IPv6 address without its ']'";
      return false;
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      why = "redis:// URL: characters after the IPv6 address";
      return false;
    }
    if (!after.empty()) port = after.substr(1), t.port = -1;
    if (!valid_ipv6(host)) {
      why = "redis:// URL: a bad IPv6 address";
      return false;
    }
    t.ipv6 = true;
  } else {
    const std::size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1), t.port = -1;
    if (!valid_hostname(host)) {
      why = "redis:// URL: a bad or missing host name (letters, digits, '-' and '.', at most 253)";
      return false;
    }
  }
  t.host = std::string(host);
  if (t.port == -1) {
    if (!all_digits(port) || port.size() > 5 || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      why = "redis:// URL: a bad port (1-65535)";
      return false;
    }
    t.port = std::stoi(std::string(port));
  }
  if (!path.empty()) {
    if (!all_digits(path) || path.size() > 2 || std::stoi(std::string(path)) > k_max_db) {
      why = "redis:// URL: a bad database number (0-" + std::to_string(k_max_db) + ")";
      return false;
    }
    t.db = std::stoi(std::string(path));
  }
  return true;
}

// ---- the RESP framing check ----

// Follows the reply's framing byte by byte as it arrives and refuses, before hiredis parses or
// allocates anything for it: an unknown type byte, a header line longer than k_max_line, a bulk
// string longer than max_bulk or not ended by CRLF, an array where none is expected, an array of more
// than max_elements, a nested array. complete() once one whole reply has been seen.
class resp_scanner {
 public:
  resp_scanner(std::uint64_t max_bulk, std::size_t max_elements) : max_bulk_(max_bulk), max_elements_(max_elements) {}
  bool complete() const { return done_; }
  // How many values (array elements, or the reply itself) have been seen whole so far.
  std::size_t values_seen() const { return values_; }
  // Consumes bytes of [p, p+n) until the reply is complete; false (and `why`) on a framing error,
  // including bytes after the end of the reply.
  bool feed(const char* p, std::size_t n, std::string& why) {
    for (std::size_t i = 0; i < n; ++i) {
      if (done_) {
        why = "bytes after the end of the reply";
        return false;
      }
      const char c = p[i];
      if (bulk_left_ > 0) {
        // Skip the data in one step; the last two bytes must be CRLF.
        if (bulk_left_ > 2) {
          const std::uint64_t take = std::min<std::uint64_t>(bulk_left_ - 2, n - i);
          bulk_left_ -= take;
          i += static_cast<std::size_t>(take) - 1;
          continue;
        }
        if ((bulk_left_ == 2 && c != '\r') || (bulk_left_ == 1 && c != '\n')) {
          why = "a bulk string not ended by CRLF";
          return false;
        }
        if (--bulk_left_ == 0) item_done();
        continue;
      }
      if (c != '\n') {
        if (line_.size() >= k_max_line) {
          why = "a reply line longer than " + std::to_string(k_max_line) + " bytes";
          return false;
        }
        line_.push_back(c);
        continue;
      }
      if (line_.size() < 2 || line_.back() != '\r') {
        why = "a malformed reply line";
        return false;
      }
      line_.pop_back();
      if (!header(why)) return false;
      line_.clear();
    }
    return true;
  }

 private:
  // A signed decimal of at most 18 digits (no overflow); false otherwise.
  static bool number(std::string_view s, long long& v) {
    bool neg = !s.empty() && s.front() == '-';
    if (neg) s.remove_prefix(1);
    if (!all_digits(s) || s.size() > 18) return false;
    v = 0;
    for (char c : s) v = v * 10 + (c - '0');
    if (neg) v = -v;
    return true;
  }
  bool header(std::string& why) {
    const char type = line_[0];
    const std::string_view body = std::string_view(line_).substr(1);
    long long v = 0;
    switch (type) {
      case '+':
      case '-':
        item_done();
        return true;
      case ':':
        if (!number(body, v)) {
          why = "a malformed integer reply";
          return false;
        }
        item_done();
        return true;
      case '$':
        if (!number(body, v) || v < -1) {
          why = "a malformed bulk length";
          return false;
        }
        if (v == -1) {
          item_done();
          return true;
        }
        if (static_cast<unsigned long long>(v) > max_bulk_) {
          why = "a value of " + std::to_string(v) + " bytes, more than the bound of " + std::to_string(max_bulk_) +
                (depth_ == 1 ? " (element " + std::to_string(total_ - left_) + ")" : std::string());
          return false;
        }
        bulk_left_ = static_cast<std::uint64_t>(v) + 2;
        return true;
      case '*':
        if (!number(body, v) || v < -1) {
          why = "a malformed array length";
          return false;
        }
        if (depth_ > 0 || max_elements_ == 0) {
          why = depth_ > 0 ? "a nested array" : "an array where none is expected";
          return false;
        }
        if (v > static_cast<long long>(max_elements_)) {
          why = "an array of " + std::to_string(v) + " elements, more than " + std::to_string(max_elements_);
          return false;
        }
        if (v <= 0) {
          item_done();
          return true;
        }
        depth_ = 1;
        total_ = left_ = static_cast<std::size_t>(v);
        return true;
      default:
        why = "an unknown reply type (not RESP2)";
        return false;
    }
  }
  void item_done() {
    ++values_;
    if (depth_ == 1 && --left_ > 0) return;
    depth_ = 0;
    done_ = true;
  }

  std::uint64_t max_bulk_;
  std::size_t max_elements_;
  std::string line_;
  std::uint64_t bulk_left_ = 0;
  int depth_ = 0;
  std::size_t total_ = 0, left_ = 0;
  std::size_t values_ = 0;
  bool done_ = false;
};

// ---- the store ----

bool valid_token(const std::string& s, std::size_t max, bool key) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    const bool ok = key ? ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                           c == '-' || c == '.' || c == ':')
                        : (c > 0x20 && c < 0x7f);
    if (!ok) return false;
  }
  return true;
}

int remaining_ms(clock_type::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

class redis_store final : public remote_store {
 public:
  redis_store(const store_settings& s, target t, const hiredis_api* api)
      : settings_(s), t_(std::move(t)), api_(api),
        describe_("redis://" + (t_.ipv6 ? "[" + t_.host + "]" : t_.host) + ":" + std::to_string(t_.port) + "/" +
                  std::to_string(t_.db)) {
    settings_.url.clear();  // holds the password; t_ keeps what is needed
  }
  ~redis_store() override {
    for (redisContext* c : idle_) api_->free_context(c);
  }

  std::string describe() const override { return describe_; }

  std::vector<reply> get_many(const std::vector<std::string>& keys) noexcept override {
    std::vector<reply> out;
    try {
      out.resize(keys.size());
      for (std::size_t first = 0; first < keys.size(); first += k_max_batch)
        get_batch(keys, first, std::min(keys.size(), first + k_max_batch), out);
    } catch (...) {  // out of memory: every key not answered is a fault
      for (auto& r : out)
        if (r.what == outcome::fault && r.message.empty()) r.message = describe_ + ": get: out of memory";
    }
    return out;
  }

  reply put_if_absent(const std::string& key, const std::vector<std::uint8_t>& body) noexcept override {
    try {
      if (!valid_token(key, k_max_key, true)) return fault("put", key, "an invalid key");
      if (body.size() > settings_.max_body || body.size() > (1u << 30))
        return fault("put", key, "a body of " + std::to_string(body.size()) + " bytes, more than the bound");
      const std::string_view value(reinterpret_cast<const char*>(body.data()), body.size());
      return set_nx("put", key, key, value, {});
    } catch (...) {
      return fault("put", key, "out of memory");
    }
  }

  reply lease(const std::string& key, const std::string& owner, std::chrono::milliseconds ttl) noexcept override {
    try {
      if (!valid_token(key, k_max_key, true)) return fault("lease", key, "an invalid key");
      if (!valid_token(owner, k_max_owner, false)) return fault("lease", key, "an invalid owner name");
      if (ttl.count() <= 0 || ttl > k_max_lease) return fault("lease", key, "a lease time outside 1 ms - 24 h");
      reply r = set_nx("lease", key, "lease:" + key, owner, std::to_string(ttl.count()));
      if (r.what == outcome::stored) r.what = outcome::acquired;
      if (r.what == outcome::exists) r.what = outcome::held;
      return r;
    } catch (...) {
      return fault("lease", key, "out of memory");
    }
  }

  void release(const std::string& key, const std::string& owner) noexcept override {
    try {
      if (!valid_token(key, k_max_key, true) || !valid_token(owner, k_max_owner, false)) return;
      // Compare-and-delete in one step on the server: the lease may have expired and been taken by
      // another node since, and that node's lease must stay.
      static constexpr std::string_view script =
          "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
      const std::string lease_key = "lease:" + key;
      std::string err;
      run({"EVAL", script, "1", lease_key, owner}, resp_scanner(k_max_line, 0), deadline(), err);
    } catch (...) {
    }
  }

 private:
  struct reply_deleter {
    decltype(&::freeReplyObject) free_reply;
    void operator()(redisReply* r) const { free_reply(r); }
  };
  using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;
  enum class io { ok, stale, failed };

  clock_type::time_point deadline() const { return clock_type::now() + settings_.transfer_timeout; }

  reply fault(const char* op, const std::string& key, const std::string& what) const {
    reply r;
    r.what = outcome::fault;
    r.message = describe_ + ": " + op + " " + (valid_token(key, k_max_key, true) ? key : std::string("(invalid key)")) +
                ": " + what;
    return r;
  }

  // A server's text for a message: bounded, printable, and without the password (a hostile or
  // confused server could echo it).
  std::string server_text(const char* s, std::size_t n) const {
    std::string out(s, std::min(n, k_max_server_text));
    for (char& c : out)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    if (!t_.password.empty())
      for (std::size_t at; (at = out.find(t_.password)) != std::string::npos;) out.replace(at, t_.password.size(), "***");
    if (n > k_max_server_text) out += "...";
    return out;
  }

  void get_batch(const std::vector<std::string>& keys, std::size_t first, std::size_t last, std::vector<reply>& out) {
    std::vector<std::string_view> args{"MGET"};
    std::vector<std::size_t> asked;  // indices of the valid keys sent
    for (std::size_t i = first; i < last; ++i) {
      if (valid_token(keys[i], k_max_key, true)) {
        args.push_back(keys[i]);
        asked.push_back(i);
      } else {
        out[i] = fault("get", keys[i], "an invalid key");
      }
    }
    if (asked.empty()) return;
    std::string err;
    reply_ptr r = run(args, resp_scanner(settings_.max_body, asked.size()), deadline(), err);
    auto fail_all = [&](const std::string& why) {
      for (std::size_t i : asked) out[i] = fault("get", keys[i], why);
    };
    if (!r) return fail_all(err);
    if (r->type == REDIS_REPLY_ERROR) return fail_all("the server answered: " + server_text(r->str, r->len));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != asked.size())
      return fail_all("a reply that is not an array of " + std::to_string(asked.size()) + " values");
    for (std::size_t j = 0; j < asked.size(); ++j) {
      const redisReply* e = r->element[j];
      reply& o = out[asked[j]];
      if (e && e->type == REDIS_REPLY_NIL) {
        o.what = outcome::miss;
      } else if (e && e->type == REDIS_REPLY_STRING && e->len <= settings_.max_body) {
        o.what = outcome::hit;
        o.body.assign(reinterpret_cast<const std::uint8_t*>(e->str), reinterpret_cast<const std::uint8_t*>(e->str) + e->len);
      } else {
        o = fault("get", keys[asked[j]], "a value of the wrong type (not a string)");
      }
    }
  }

  // SET key value NX [PX ms]: stored (OK) or exists (nil), else a fault naming the server's error
  // (maxmemory reached with noeviction: "OOM command not allowed when used memory > 'maxmemory'").
  reply set_nx(const char* op, const std::string& key, const std::string& redis_key, std::string_view value,
               const std::string& px) {
    std::vector<std::string_view> args{"SET", redis_key, value, "NX"};
    if (!px.empty()) {
      args.push_back("PX");
      args.push_back(px);
    }
    std::string err;
    reply_ptr r = run(args, resp_scanner(k_max_line, 0), deadline(), err);
    if (!r) return fault(op, key, err);
    reply out;
    if (r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "OK") {
      out.what = outcome::stored;
    } else if (r->type == REDIS_REPLY_NIL) {
      out.what = outcome::exists;
    } else if (r->type == REDIS_REPLY_ERROR) {
      return fault(op, key, "the server refused it: " + server_text(r->str, r->len));
    } else {
      return fault(op, key, "an unexpected reply to SET NX");
    }
    return out;
  }

  // One command on a pooled (or new) connection, within `deadline`. A connection that was idle in
  // the pool may have died with a server restart: when it fails before any reply byte, the command
  // is sent once more on a fresh connection (SET NX and the lease are safe to repeat; a repeat that
  // finds its own first write answers exists/held, which the layer above treats like any other).
  reply_ptr run(const std::vector<std::string_view>& args, const resp_scanner& scanner, clock_type::time_point deadline,
                std::string& err) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool reused = false;
      redisContext* c = take(deadline, reused, err);
      if (!c) return nullptr;
      io status = io::failed;
      reply_ptr r = exchange(c, args, scanner, deadline, status, err);
      if (status == io::ok) {
        give(c);
        return r;
      }
      api_->free_context(c);
      drop_idle();  // the others are likely as dead
      if (!(reused && status == io::stale)) return nullptr;
    }
    return nullptr;
  }

  redisContext* take(clock_type::time_point deadline, bool& reused, std::string& err) {
    for (;;) {
      redisContext* c = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        // A fork() child must not talk on its parent's connections (the replies would interleave):
        // it closes its copies and opens its own.
        if (const int pid = os::process_id(); pid != pid_) {
          for (redisContext* inherited : idle_) api_->free_context(inherited);
          idle_.clear();
          pid_ = pid;
        }
        if (idle_.empty()) break;
        c = idle_.back();
        idle_.pop_back();
      }
      // An idle connection has nothing to read: readable means the server closed it (a restart, its
      // `timeout`) or sent bytes nobody asked for, which would be taken for the next reply.
      pollfd p{c->fd, POLLIN, 0};
      if (::poll(&p, 1, 0) != 0) {
        api_->free_context(c);
        continue;
      }
      reused = true;
      return c;
    }
    reused = false;
    const int left = std::min<long long>(remaining_ms(deadline), settings_.connect_timeout.count());
    if (left <= 0) {
      err = "timed out before connecting";
      return nullptr;
    }
    timeval tv{left / 1000, static_cast<suseconds_t>((left % 1000) * 1000)};
    redisContext* c = api_->connect(t_.host.c_str(), t_.port, tv);
    if (!c) {
      err = "cannot connect: out of memory";
      return nullptr;
    }
    if (c->err || c->fd < 0) {
      err = "cannot connect: " + server_text(c->errstr, ::strnlen(c->errstr, sizeof c->errstr));
      api_->free_context(c);
      return nullptr;
    }
    const int flags = ::fcntl(c->fd, F_GETFL);
    if (flags < 0 || ::fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      err = std::string("cannot connect: fcntl: ") + std::strerror(errno);
      api_->free_context(c);
      return nullptr;
    }
    if (!handshake(c, deadline, err)) {
      api_->free_context(c);
      return nullptr;
    }
    return c;
  }

  // AUTH (when a password is configured) and SELECT (when the db is not 0) on a new connection.
  bool handshake(redisContext* c, clock_type::time_point deadline, std::string& err) {
    auto step = [&](const std::vector<std::string_view>& args, const std::string& what) {
      io status = io::failed;
      reply_ptr r = exchange(c, args, resp_scanner(k_max_line, 0), deadline, status, err);
      if (status != io::ok) {
        err = what + ": " + err;
        return false;
      }
      if (r->type == REDIS_REPLY_STATUS) return true;
      err = what + " refused" +
            (r->type == REDIS_REPLY_ERROR ? ": " + server_text(r->str, r->len) : std::string(": an unexpected reply"));
      return false;
    };
    if (!t_.password.empty()) {
      std::vector<std::string_view> auth{"AUTH"};
      if (!t_.user.empty()) auth.push_back(t_.user);
      auth.push_back(t_.password);
      if (!step(auth, "authentication")) return false;
    }
    const std::string db = std::to_string(t_.db);
    return t_.db == 0 || step({"SELECT", db}, "selecting database " + db);
  }

  void give(redisContext* c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < k_max_idle) {
      idle_.push_back(c);
      return;
    }
    api_->free_context(c);
  }

  void drop_idle() {
    std::vector<redisContext*> dead;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dead.swap(idle_);
    }
    for (redisContext* c : dead) api_->free_context(c);
  }

  // Sends the command and reads one reply, all within `deadline`. `status`: ok with a reply (which may
  // be a server error), stale when the connection was found closed before any reply byte, else failed.
  reply_ptr exchange(redisContext* c, const std::vector<std::string_view>& args, resp_scanner scanner,
                     clock_type::time_point deadline, io& status, std::string& err) {
    status = io::failed;
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (auto a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const auto len = api_->format(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (len < 0 || !cmd) {
      err = "cannot format the command (out of memory)";
      return nullptr;
    }
    std::unique_ptr<char, decltype(api_->free_command)> owned(cmd, api_->free_command);
    const auto timed_out = [&] {
      err = "no complete answer within " + std::to_string(settings_.transfer_timeout.count()) + " ms (timed out)";
      return nullptr;
    };
    for (std::size_t sent = 0; sent < static_cast<std::size_t>(len);) {
      const ssize_t n = ::send(c->fd, cmd + sent, static_cast<std::size_t>(len) - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{c->fd, POLLOUT, 0};
        const int left = remaining_ms(deadline);
        if (left == 0 || ::poll(&p, 1, left) == 0) return timed_out();
        continue;
      }
      if (sent == 0 && (errno == EPIPE || errno == ECONNRESET)) status = io::stale;
      err = std::string("the connection failed: ") + std::strerror(errno);
      return nullptr;
    }
    std::vector<char> buf(k_chunk);
    std::size_t received = 0, parsed_values = 0;
    std::string why;
    while (!scanner.complete()) {
      pollfd p{c->fd, POLLIN, 0};
      const int left = remaining_ms(deadline);
      if (left == 0) return timed_out();
      const int ready = ::poll(&p, 1, left);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return timed_out();
      const ssize_t n = ::recv(c->fd, buf.data(), buf.size(), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) {
        if (received == 0 && (n == 0 || errno == ECONNRESET)) status = io::stale;
        err = n == 0 ? (received == 0 ? "the server closed the connection" : "the server closed the connection mid-reply (truncated)")
                     : std::string("the connection failed: ") + std::strerror(errno);
        return nullptr;
      }
      received += static_cast<std::size_t>(n);
      if (!scanner.feed(buf.data(), static_cast<std::size_t>(n), why)) {
        err = "a malformed or oversized reply: " + why;
        return nullptr;
      }
      if (api_->feed(c->reader, buf.data(), static_cast<std::size_t>(n)) != REDIS_OK) {
        err = "cannot buffer the reply (out of memory)";
        return nullptr;
      }
      // Let hiredis parse whenever a value has come whole: it then drops that value's raw bytes
      // from its buffer, which holds one incomplete value instead of the whole reply next to the
      // values parsed from it (an MGET of 16 values of 1 MiB peaks near 17 MiB instead of 33; on
      // loopback it took 27-31 ms instead of 35-40). Only then: a value's chunks need no parse each.
      if (scanner.values_seen() == parsed_values) continue;
      parsed_values = scanner.values_seen();
      void* raw = nullptr;
      if (api_->get_reply(c->reader, &raw) != REDIS_OK) {
        err = "a malformed reply (protocol error)";
        return nullptr;
      }
      if (raw) {
        reply_ptr r(static_cast<redisReply*>(raw), reply_deleter{api_->free_reply});
        if (!scanner.complete()) {  // cannot happen with the same framing: a bug on one side
          err = "a malformed reply (the framing check and hiredis disagree)";
          return nullptr;
        }
        status = io::ok;
        return r;
      }
    }
    err = "a malformed reply (protocol error)";
    return nullptr;
  }

  store_settings settings_;
  target t_;
  const hiredis_api* api_;
  std::string describe_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
  int pid_ = os::process_id();  // of the process that opened the connections in idle_
};

}  // namespace

std::unique_ptr<remote_store> make_redis_store(const store_settings& s, std::string& why) {
  try {
    target t;
    if (!parse_url(s.url, t, why)) return nullptr;
    if (s.connect_timeout.count() <= 0 || s.transfer_timeout.count() <= 0) {
      why = "redis: the connect and transfer timeouts must be positive";
      return nullptr;
    }
    const hiredis_api* api = load_hiredis(why);
    if (!api) return nullptr;
    return std::make_unique<redis_store>(s, std::move(t), api);
  } catch (...) {
    why = "redis: out of memory";
    return nullptr;
  }
}

}  // namespace fatpack::detail::remote
