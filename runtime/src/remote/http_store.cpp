// The HTTP(S) store through a dlopen-ed libcurl (see http_store.hpp).
#include "remote/http_store.hpp"

#include "platform/os.hpp"
#include "remote/http_url.hpp"

// Types and constants only: every function is called through the table below, so the runtime does
// not link libcurl. Deprecated names are used on purpose (CURLOPT_PROTOCOLS, the fallback for a
// libcurl older than 7.85), so their warnings are off.
#define CURL_DISABLE_TYPECHECK
#define CURL_DISABLE_DEPRECATION
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

namespace fatpack::detail::remote {

namespace {

using clock_type = std::chrono::steady_clock;

const char* const k_soname = "libcurl.so.4";
const char* const k_missing =
    "the HTTP fleet cache needs libcurl (libcurl.so.4: install libcurl4 / libcurl)";
constexpr std::size_t k_idle_multis = 8;            // multi handles (and their connections) kept for reuse
constexpr long k_parallel_per_host = 16;            // a get_many of more keys queues the rest
constexpr std::chrono::milliseconds k_grace{250};   // past the transfer timeout, our own deadline stops curl
constexpr std::size_t k_max_key = 200;
constexpr std::uint64_t k_max_reserve = 64ull << 20;  // past this a body grows as it comes

// The libcurl entry points fatpack calls, typed from <curl/curl.h>. Filled once, then read-only.
struct curl_api {
  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  decltype(&curl_multi_init) multi_init = nullptr;
  decltype(&curl_multi_setopt) multi_setopt = nullptr;
  decltype(&curl_multi_add_handle) multi_add = nullptr;
  decltype(&curl_multi_remove_handle) multi_remove = nullptr;
  decltype(&curl_multi_perform) multi_perform = nullptr;
  decltype(&curl_multi_wait) multi_wait = nullptr;
  decltype(&curl_multi_poll) multi_poll = nullptr;  // 7.66; optional (multi_wait otherwise)
  decltype(&curl_multi_info_read) multi_info_read = nullptr;
  decltype(&curl_multi_cleanup) multi_cleanup = nullptr;
  decltype(&curl_multi_strerror) multi_strerror = nullptr;
  decltype(&curl_slist_append) slist_append = nullptr;
  decltype(&curl_slist_free_all) slist_free_all = nullptr;
};

template <typename F>
bool bind(const os::library& lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(os::find_symbol(lib, name));
  return fn != nullptr;
}

// dlopen and bind; curl_global_init is the caller's (once per library).
std::shared_ptr<const curl_api> load_api(const char* library, std::string& why) {
  std::string loader_why;
  const os::library lib = os::open_library(library, loader_why);
  if (!lib.handle) {
    why = library == std::string(k_soname) ? k_missing
                                            : std::string("the HTTP fleet cache needs libcurl (") + library +
                                                  ": " + loader_why + ")";
    return nullptr;
  }
  auto api = std::make_shared<curl_api>();
  const bool ok = bind(lib, "curl_global_init", api->global_init) && bind(lib, "curl_easy_init", api->easy_init) &&
                  bind(lib, "curl_easy_setopt", api->easy_setopt) &&
                  bind(lib, "curl_easy_getinfo", api->easy_getinfo) &&
                  bind(lib, "curl_easy_cleanup", api->easy_cleanup) &&
                  bind(lib, "curl_easy_strerror", api->easy_strerror) &&
                  bind(lib, "curl_multi_init", api->multi_init) && bind(lib, "curl_multi_setopt", api->multi_setopt) &&
                  bind(lib, "curl_multi_add_handle", api->multi_add) &&
                  bind(lib, "curl_multi_remove_handle", api->multi_remove) &&
                  bind(lib, "curl_multi_perform", api->multi_perform) && bind(lib, "curl_multi_wait", api->multi_wait) &&
                  bind(lib, "curl_multi_info_read", api->multi_info_read) &&
                  bind(lib, "curl_multi_cleanup", api->multi_cleanup) &&
                  bind(lib, "curl_multi_strerror", api->multi_strerror) &&
                  bind(lib, "curl_slist_append", api->slist_append) &&
                  bind(lib, "curl_slist_free_all", api->slist_free_all);
  if (!ok) {
    why = std::string("the HTTP fleet cache needs libcurl 7.28 or newer (") + library + " lacks an entry point)";
    return nullptr;
  }
  bind(lib, "curl_multi_poll", api->multi_poll);
  // Not thread-safe in libcurl before 7.84: the callers serialise ours (std::call_once); another
  // library of the process calling it at the same moment is outside our reach.
  if (api->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    why = std::string("the HTTP fleet cache could not initialise libcurl (") + library + ")";
    return nullptr;
  }
  return api;
}

// The process's libcurl, loaded at the first store made and kept for the life of the process.
std::shared_ptr<const curl_api> default_api(std::string& why) {
  static std::once_flag once;
  static std::shared_ptr<const curl_api> api;
  static std::string failure;
  std::call_once(once, [] { api = load_api(k_soname, failure); });
  if (!api) why = failure;
  return api;
}

// Keys name files on the server: no '/', no "..", nothing to escape (remote keys are hex).
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > k_max_key || key.front() == '.') return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
           c == '.';
  });
}

bool has_control_character(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// The user info of a proxy URL in the environment ("http://user:pw@proxy:3128"): a secret that
// libcurl might print in an error, so messages scrub it too.
std::string proxy_user_info(const char* name) {
  const char* value = os::getenv(name);
  if (!value) return {};
  const std::string url(value, ::strnlen(value, 8192));
  const std::size_t start = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
  const std::size_t end = std::min(url.find('/', start), url.size());
  const std::size_t at = url.rfind('@', end);
  if (at == std::string::npos || at < start) return {};
  return url.substr(start, at - start);
}

std::string status_text(long status) {
  std::string text = "HTTP " + std::to_string(status);
  if (status == 401) return text + " (authentication refused)";
  if (status == 403) return text + " (forbidden)";
  if (status == 413) return text + " (the server refuses a body this large)";
  if (status == 507) return text + " (the server is full)";
  if (status >= 300 && status < 400) return text + " (a redirect: not followed)";
  if (status >= 500) return text + " (server error)";
  return text;
}

enum class method { get, head, put };
const char* method_name(method m) { return m == method::get ? "GET" : m == method::head ? "HEAD" : "PUT"; }

// One request: its easy handle and the state its callbacks reach. Owned by one call on one thread.
struct transfer {
  const curl_api* api = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  method how = method::get;
  std::string key;
  std::uint64_t max_body = 0;
  std::vector<std::uint8_t> body;
  bool too_large = false;
  bool out_of_memory = false;
  const std::vector<std::uint8_t>* upload = nullptr;
  std::size_t upload_pos = 0;
  char error[CURL_ERROR_SIZE] = {};
  CURLcode result = CURLE_OK;
  bool done = false;
  std::string setup_fault;  // set: never handed to curl

  transfer() = default;
  transfer(const transfer&) = delete;
  transfer& operator=(const transfer&) = delete;
  ~transfer() {
    if (easy) api->easy_cleanup(easy);
    if (headers) api->slist_free_all(headers);
  }
};

// The body, bounded: one byte past max_body aborts the transfer (CURLE_WRITE_ERROR).
extern "C" std::size_t write_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<transfer*>(user);
  const std::size_t n = size * count;
  if (n > t->max_body - std::min<std::uint64_t>(t->max_body, t->body.size())) {
    t->too_large = true;
    return 0;
  }
  try {  // no exception may cross libcurl's C frames
    if (t->body.empty() && n > 0) {
      // One allocation for a body that says its length (bounded: MAXFILESIZE already refused one over
      // max_body, and a declared length that never comes costs untouched pages at most).
      curl_off_t declared = -1;
      if (t->api->easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared) == CURLE_OK && declared > 0)
        t->body.reserve(static_cast<std::size_t>(
            std::min<std::uint64_t>({static_cast<std::uint64_t>(declared), t->max_body, k_max_reserve})));
    }
    t->body.insert(t->body.end(), data, data + n);
  } catch (...) {
    t->out_of_memory = true;
    return 0;
  }
  return n;
}

extern "C" std::size_t read_upload(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<transfer*>(user);
  const std::size_t n = std::min(size * count, t->upload->size() - t->upload_pos);
  if (n > 0) std::memcpy(buffer, t->upload->data() + t->upload_pos, n);
  t->upload_pos += n;
  return n;
}

class http_store final : public remote_store {
 public:
  http_store(std::shared_ptr<const curl_api> api, store_settings settings, http_url url)
      : api_(std::move(api)), settings_(std::move(settings)), url_(std::move(url)) {
    if (settings_.transfer_timeout.count() < 1) settings_.transfer_timeout = std::chrono::milliseconds(1);
    if (settings_.connect_timeout.count() < 1 || settings_.connect_timeout > settings_.transfer_timeout)
      settings_.connect_timeout = settings_.transfer_timeout;
    if (url_.has_user_info && settings_.basic_user.empty()) {
      settings_.basic_user = url_.user;
      settings_.basic_password = url_.password;
    }
    for (const std::string& s : {url_.user, url_.password, url_.query, settings_.basic_password,
                                 settings_.bearer_token})
      if (!s.empty()) secrets_.push_back(s);
    for (const char* name : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
      if (std::string info = proxy_user_info(name); !info.empty()) secrets_.push_back(info);
    // Longest first, so that a secret containing another is replaced whole.
    std::sort(secrets_.begin(), secrets_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  }

  ~http_store() override {
    if (pool_pid_ == os::process_id())
      for (CURLM* m : idle_) api_->multi_cleanup(m);
  }

  std::vector<reply> get_many(const std::vector<std::string>& keys) noexcept override {
    try {
      std::vector<std::unique_ptr<transfer>> ts;
      ts.reserve(keys.size());
      for (const std::string& key : keys) ts.push_back(prepare(method::get, key, nullptr));
      run(ts);
      std::vector<reply> out;
      out.reserve(keys.size());
      for (auto& t : ts) out.push_back(get_reply(*t));
      return out;
    } catch (...) {  // std::bad_alloc: every key is a fault, never an exception
      std::vector<reply> out(keys.size());
      for (reply& r : out) r.message = describe() + ": out of memory";
      return out;
    }
  }

  reply put_if_absent(const std::string& key, const std::vector<std::uint8_t>& body) noexcept override {
    try {
      // HEAD first: the common case (another node published it) costs no upload.
      std::vector<std::unique_ptr<transfer>> head;
      head.push_back(prepare(method::head, key, nullptr));
      run(head);
      long status = 0;
      if (reply r; !finished(*head[0], status, r)) return r;
      if (status == 200) return reply{outcome::exists, {}, {}};
      if (status != 404 && status != 410) return fault(*head[0], status_text(status));
      // PUT with If-None-Match: * : a server that honours it (minio, S3) refuses to overwrite what
      // another node stored since the HEAD (412); one that ignores it (nginx's WebDAV) overwrites
      // the entry with one of the same key, which the layer above accepts either way.
      std::vector<std::unique_ptr<transfer>> put;
      put.push_back(prepare(method::put, key, &body));
      run(put);
      if (reply r; !finished(*put[0], status, r)) return r;
      if (status == 200 || status == 201 || status == 204) return reply{outcome::stored, {}, {}};
      if (status == 412) return reply{outcome::exists, {}, {}};
      return fault(*put[0], status_text(status));
    } catch (...) {
      return reply{outcome::fault, {}, describe() + ": PUT " + key + ": out of memory"};
    }
  }

  reply lease(const std::string&, const std::string&, std::chrono::milliseconds) noexcept override {
    return reply{outcome::unsupported, {}, describe() + ": an HTTP store has no leases"};
  }

  void release(const std::string&, const std::string&) noexcept override {}

  std::string describe() const override { return url_.describe(); }

 private:
  std::string scrub(std::string text) const {
    for (const std::string& secret : secrets_)
      for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3))
        text.replace(at, secret.size(), "***");
    return text;
  }

  reply fault(const transfer& t, const std::string& what) const {
    return reply{outcome::fault, {}, scrub(describe() + ": " + method_name(t.how) + " " + t.key + ": " + what)};
  }

  // An easy handle with every option set, or one with setup_fault (then it is not run).
  std::unique_ptr<transfer> prepare(method how, const std::string& key, const std::vector<std::uint8_t>* upload) const {
    auto t = std::make_unique<transfer>();
    t->api = api_.get();
    t->how = how;
    t->key = valid_key(key) ? key : "(invalid key)";
    t->max_body = settings_.max_body;
    t->upload = upload;
    if (!valid_key(key)) {
      t->setup_fault = "not a valid key (letters, digits, '-', '_', '.', at most 200)";
      return t;
    }
    t->easy = api_->easy_init();
    if (!t->easy) {
      t->setup_fault = "libcurl could not make a handle";
      return t;
    }
    CURL* e = t->easy;
    const curl_api& c = *api_;
    const auto setopt_failed = [&](CURLcode rc, const char* what) {
      if (rc == CURLE_OK) return false;
      t->setup_fault = std::string("libcurl refused ") + what + " (" + c.easy_strerror(rc) + ")";
      return true;
    };
    const std::string url = url_.url_of(key);
    if (setopt_failed(c.easy_setopt(e, CURLOPT_URL, url.c_str()), "the URL")) return t;
    c.easy_setopt(e, CURLOPT_PRIVATE, static_cast<void*>(t.get()));
    c.easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    // No signals: libcurl's timeouts on a resolver without threads would use SIGALRM, which is not
    // safe in a multi-threaded process (the application's threads, our pool).
    c.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    c.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings_.connect_timeout.count()));
    c.easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(settings_.transfer_timeout.count()));
    // Redirects are not followed: a store answers the key or not; a redirect would take the request
    // (and a pre-signed URL's query) to a host and scheme nobody configured, and a chain of them
    // outside the timeouts' intent. A 3xx is a fault that names its status.
    c.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    // Only HTTP and HTTPS, whatever the URL or a proxy says (no file://, no gopher://).
    if (c.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK)  // libcurl < 7.85: the bitmask
      if (setopt_failed(c.easy_setopt(e, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS)),
                        "the protocol list"))
        return t;
    // Proxies: libcurl's defaults read http_proxy, https_proxy, all_proxy and no_proxy (lower case;
    // HTTPS_PROXY, ALL_PROXY and NO_PROXY too; never HTTP_PROXY, which a CGI request could set).
    c.easy_setopt(e, CURLOPT_USERAGENT, "fatpack-fleet-cache");
    if (!settings_.ca_file.empty() && setopt_failed(c.easy_setopt(e, CURLOPT_CAINFO, settings_.ca_file.c_str()), "the CA file"))
      return t;
    if (!settings_.bearer_token.empty()) {
      if (setopt_failed(c.easy_setopt(e, CURLOPT_HTTPAUTH, static_cast<unsigned long>(CURLAUTH_BEARER)),
                        "bearer authentication (libcurl 7.61 or newer needed)") ||
          setopt_failed(c.easy_setopt(e, CURLOPT_XOAUTH2_BEARER, settings_.bearer_token.c_str()), "the bearer token"))
        return t;
    } else if (!settings_.basic_user.empty()) {
      if (setopt_failed(c.easy_setopt(e, CURLOPT_HTTPAUTH, static_cast<unsigned long>(CURLAUTH_BASIC)), "basic authentication") ||
          setopt_failed(c.easy_setopt(e, CURLOPT_USERNAME, settings_.basic_user.c_str()), "the user name") ||
          setopt_failed(c.easy_setopt(e, CURLOPT_PASSWORD, settings_.basic_password.c_str()), "the password"))
        return t;
    }
    c.easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_body);
    c.easy_setopt(e, CURLOPT_WRITEDATA, static_cast<void*>(t.get()));
    if (how == method::get) {
      // A Content-Length over the bound stops the transfer before the body (CURLE_FILESIZE_EXCEEDED);
      // without one, write_body stops it at the first byte past the bound. Not for HEAD: libcurl
      // would refuse the Content-Length of an existing large entry there too.
      c.easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE,
                    static_cast<curl_off_t>(std::min<std::uint64_t>(settings_.max_body, INT64_MAX)));
    } else if (how == method::head) {
      c.easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (how == method::put) {
      c.easy_setopt(e, CURLOPT_UPLOAD, 1L);
      c.easy_setopt(e, CURLOPT_READFUNCTION, &read_upload);
      c.easy_setopt(e, CURLOPT_READDATA, static_cast<void*>(t.get()));
      c.easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(upload->size()));
      // "Expect:" turns off "Expect: 100-continue", which costs a second's wait on a server that
      // does not answer it.
      for (const char* h : {"Expect:", "If-None-Match: *", "Content-Type: application/octet-stream"}) {
        curl_slist* next = c.slist_append(t->headers, h);
        if (!next) {
          t->setup_fault = "out of memory";
          return t;
        }
        t->headers = next;
      }
      c.easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    }
    return t;
  }

  CURLM* take_multi() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // In a fork() child the pooled connections are the parent's sockets too: two processes on one
      // connection would read each other's answers. The child forgets them (never cleaned up here:
      // that could shut down the parent's TLS sessions) and opens its own.
      if (const int pid = os::process_id(); pid != pool_pid_) {
        idle_.clear();
        pool_pid_ = pid;
      }
      if (!idle_.empty()) {
        CURLM* m = idle_.back();
        idle_.pop_back();
        return m;
      }
    }
    CURLM* m = api_->multi_init();
    if (m) api_->multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, k_parallel_per_host);
    return m;
  }

  void give_multi(CURLM* m) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_.size() < k_idle_multis && pool_pid_ == os::process_id()) {
        idle_.push_back(m);
        return;
      }
    }
    api_->multi_cleanup(m);
  }

  // Runs every prepared transfer in parallel on one multi handle (taken from the pool: its
  // connections are reused by the next call), until all are done or the deadline passes. The
  // deadline (transfer timeout and a little) bounds the whole call, queued transfers included.
  void run(std::vector<std::unique_ptr<transfer>>& ts) {
    const auto deadline = clock_type::now() + settings_.transfer_timeout + k_grace;
    std::vector<transfer*> added;
    added.reserve(ts.size());  // before the multi is taken: nothing below throws
    CURLM* m = take_multi();
    if (!m) {
      for (auto& t : ts)
        if (t->setup_fault.empty()) t->setup_fault = "libcurl could not make a multi handle";
      return;
    }
    for (auto& t : ts) {
      if (!t->setup_fault.empty()) continue;
      if (const CURLMcode mc = api_->multi_add(m, t->easy); mc != CURLM_OK) {
        t->setup_fault = std::string("libcurl: ") + api_->multi_strerror(mc);
        continue;
      }
      added.push_back(t.get());
    }
    bool healthy = true;
    while (!added.empty()) {
      int running = 0;
      if (const CURLMcode mc = api_->multi_perform(m, &running); mc != CURLM_OK) {
        for (transfer* t : added)
          if (!t->done) t->setup_fault = std::string("libcurl: ") + api_->multi_strerror(mc);
        healthy = false;
        break;
      }
      int left = 0;
      while (CURLMsg* msg = api_->multi_info_read(m, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        void* owner = nullptr;
        api_->easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &owner);
        if (auto* t = static_cast<transfer*>(owner)) {
          t->result = msg->data.result;
          t->done = true;
        }
      }
      if (running == 0) break;
      const auto now = clock_type::now();
      if (now >= deadline) break;
      const int wait_ms = static_cast<int>(std::min<long long>(
          100, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1));
      int fds = 0;
      if (api_->multi_poll) {
        api_->multi_poll(m, nullptr, 0, wait_ms, &fds);
      } else {
        api_->multi_wait(m, nullptr, 0, wait_ms, &fds);  // returns at once when curl has no socket yet
        if (fds == 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait_ms, 10)));
      }
    }
    for (transfer* t : added) api_->multi_remove(m, t->easy);
    if (healthy)
      give_multi(m);
    else
      api_->multi_cleanup(m);
  }

  // True and `status` when the request got an answer; otherwise false and the fault in `r`.
  bool finished(const transfer& t, long& status, reply& r) const {
    status = 0;
    if (!t.setup_fault.empty()) {
      r = fault(t, t.setup_fault);
      return false;
    }
    if (!t.done) {
      r = fault(t, "no answer within " + std::to_string(settings_.transfer_timeout.count()) + " ms (timed out)");
      return false;
    }
    if (t.out_of_memory) {
      r = fault(t, "out of memory for the body");
      return false;
    }
    if (t.too_large || t.result == CURLE_FILESIZE_EXCEEDED) {
      r = fault(t, "the body is larger than " + std::to_string(settings_.max_body) + " bytes (transfer stopped)");
      return false;
    }
    if (t.result != CURLE_OK) {
      // libcurl's detailed text when it wrote one, its generic one otherwise; the system's reason
      // for a failed connect ("Connection refused") when there is one.
      std::string what = t.error[0] != '\0' ? std::string(t.error, ::strnlen(t.error, sizeof t.error))
                                             : std::string(api_->easy_strerror(t.result));
      if (t.result == CURLE_OPERATION_TIMEDOUT)
        what = "timed out (" + std::to_string(settings_.transfer_timeout.count()) + " ms): " + what;
      if (t.result == CURLE_PARTIAL_FILE || t.result == CURLE_RECV_ERROR)  // a server killed mid-body, a cut proxy
        what = "truncated body: " + what;
      long os_errno = 0;
      if (t.result == CURLE_COULDNT_CONNECT && api_->easy_getinfo(t.easy, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK &&
          os_errno != 0)
        what += " (" + std::string(std::strerror(static_cast<int>(os_errno))) + ")";
      r = fault(t, what);
      return false;
    }
    api_->easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    return true;
  }

  reply get_reply(transfer& t) const {
    long status = 0;
    if (reply r; !finished(t, status, r)) return r;
    if (status == 404 || status == 410) return reply{outcome::miss, {}, {}};
    if (status != 200) return fault(t, status_text(status));
    // libcurl reports a connection closed before Content-Length bytes as CURLE_PARTIAL_FILE; this
    // checks the same once more, against what was kept.
    curl_off_t length = -1;
    if (api_->easy_getinfo(t.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK && length >= 0 &&
        static_cast<std::uint64_t>(length) != t.body.size())
      return fault(t, "the body has " + std::to_string(t.body.size()) + " bytes, its Content-Length says " +
                          std::to_string(length));
    return reply{outcome::hit, std::move(t.body), {}};
  }

  std::shared_ptr<const curl_api> api_;
  store_settings settings_;
  http_url url_;
  std::vector<std::string> secrets_;
  std::mutex mutex_;            // guards idle_
  std::vector<CURLM*> idle_;    // multi handles no call is using
  int pool_pid_ = os::process_id();  // the process whose connections idle_ holds
};

std::unique_ptr<remote_store> make_store(std::shared_ptr<const curl_api> api, const store_settings& s,
                                         std::string& why) {
  http_url url;
  std::string url_why;
  if (!parse_http_url(s.url, url, url_why)) {
    why = "the fleet cache URL " + redact_url(s.url) + " is not usable: " + url_why;
    return nullptr;
  }
  if (!s.bearer_token.empty() && (!s.basic_user.empty() || url.has_user_info)) {
    why = "the fleet cache " + url.describe() + " has both a bearer token and basic credentials: configure one";
    return nullptr;
  }
  if (url.has_user_info && !s.basic_user.empty() && (url.user != s.basic_user || url.password != s.basic_password)) {
    why = "the fleet cache " + url.describe() + " has credentials in its URL and others in its settings: configure one";
    return nullptr;
  }
  if (has_control_character(s.bearer_token)) {
    why = "the fleet cache's bearer token holds a control character (a line break?)";
    return nullptr;
  }
  if (s.basic_user.find(':') != std::string::npos || url.user.find(':') != std::string::npos) {
    why = "the fleet cache's user name holds ':' (basic authentication cannot carry it)";
    return nullptr;
  }
  if (!api) return nullptr;  // `why` was set by the loader
  try {
    return std::make_unique<http_store>(std::move(api), s, std::move(url));
  } catch (...) {
    why = "out of memory";
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<remote_store> make_http_store(const store_settings& s, std::string& why) {
  // The settings are checked before libcurl is loaded: a wrong URL says so on a machine without it.
  http_url url;
  std::string ignored;
  if (!parse_http_url(s.url, url, ignored)) return make_store(nullptr, s, why);
  return make_store(default_api(why), s, why);
}

std::unique_ptr<remote_store> make_http_store_with(const store_settings& s, const char* library, std::string& why) {
  return make_store(load_api(library, why), s, why);
}

}  // namespace fatpack::detail::remote
