// Real servers on loopback for the fleet cache's tests (tests/remote): nginx with WebDAV PUT, started
// from a generated config in a temporary folder and stopped by its PID, and in-process fault servers
// (a thread with a listening socket) that misbehave on purpose: never answer, cut a body short,
// truncate what they proxy, answer a chosen status. Reusable by the other remote tests.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace fatpack::test::remote {

// A program's absolute path (PATH, then /usr/sbin and /usr/local/sbin), or "".
std::string find_program(const std::string& name);

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it on destruction.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A loopback port nobody listened on a moment ago (bind to port 0, then close: the caller retries
// if someone takes it in between).
int free_loopback_port();
// Whether 127.0.0.1:port accepts a connection within `limit`.
bool port_answers(int port, std::chrono::milliseconds limit);

std::string read_text_file(const std::string& path);
void write_text_file(const std::string& path, const std::string& text);

struct nginx_options {
  // Non-empty: the location asks for HTTP basic authentication with this user (a {PLAIN} htpasswd).
  std::string basic_user, basic_password;
  // With basic_user: only writes ask for it (`limit_except GET HEAD`), reads stay anonymous.
  bool authenticate_writes_only = false;
  // Non-empty: HTTPS with this certificate and key (PEM files); url() says https://.
  std::string tls_certificate, tls_key;
};

// A self-signed certificate for 127.0.0.1 (P-256, one day) made by the openssl program into `dir`
// (cert.pem, key.pem); false and `why` when openssl is not installed or fails.
bool make_self_signed_certificate(const std::string& dir, std::string& why);

// nginx on 127.0.0.1:<free port>, serving and accepting PUTs under /cache/ (WebDAV, nginx's `root`
// form: `alias` fails on nested paths), single process (`master_process off`: SIGKILL of that one
// PID takes the listening socket down, as a crashed server would). Throws std::runtime_error (with
// nginx's error log) when it does not come up within 5 s.
class nginx_server {
 public:
  static std::string executable();  // "" when nginx is not installed
  explicit nginx_server(nginx_options options = {});
  ~nginx_server();  // SIGTERM, then SIGKILL after 2 s; reaped
  nginx_server(const nginx_server&) = delete;
  nginx_server& operator=(const nginx_server&) = delete;

  int port() const { return port_; }
  std::string url() const;                             // http(s)://127.0.0.1:<port>/cache
  std::string file_of(const std::string& key) const;   // where nginx keeps <url>/<key>
  const std::string& config() const { return config_; }
  pid_t pid() const { return pid_; }
  void kill_hard();  // SIGKILL, reaped: connections are refused from now on

 private:
  bool start(std::string& why);
  temp_dir dir_;
  nginx_options options_;
  std::string config_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// An in-process server: each accepted connection runs `handler(fd, stopping)` on its own thread;
// the handler returns when done or when `stopping` turns true (it must poll it: the destructor joins).
class fault_server {
 public:
  using handler = std::function<void(int fd, const std::atomic<bool>& stopping)>;
  explicit fault_server(handler h);
  ~fault_server();
  fault_server(const fault_server&) = delete;
  fault_server& operator=(const fault_server&) = delete;

  int port() const { return port_; }
  std::string url() const;  // http://127.0.0.1:<port>/cache
  int connections() const { return connections_.load(); }

  // (a) Accepts, reads, never answers.
  static handler silent();
  // (b) "200 OK, Content-Length: declared", then `sent` bytes, then closes: a server killed mid-transfer.
  static handler short_body(std::size_t declared, std::size_t sent);
  // (d) Answers every request with status_for(method) and a small body, "Connection: close". Each
  // request's header block is appended to *seen (when given; guarded by *seen_mutex).
  static handler status(std::function<int(const std::string& method)> status_for, std::string* seen = nullptr,
                        std::mutex* seen_mutex = nullptr);
  // (c) Forwards each request to 127.0.0.1:upstream_port and relays the answer's header and half of
  // its body, then closes both sides.
  static handler truncating_proxy(int upstream_port);

 private:
  void accept_loop();
  handler handler_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> workers_;
};

// Reads one HTTP request's header block (up to "\r\n\r\n", at most 64 KiB, 5 s) and drains its body
// (Content-Length bytes); "" when the peer closed or the limits were hit.
std::string read_request(int fd, const std::atomic<bool>& stopping);
bool send_all(int fd, const void* data, std::size_t size);

}  // namespace fatpack::test::remote
