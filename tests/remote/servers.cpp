// Test servers on loopback (see servers.hpp).
#include "servers.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fatpack::test::remote {

namespace {

bool is_executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const sockaddr_in a = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Waits for `fd` to be readable; false on stop or after `limit`.
bool wait_readable(int fd, const std::atomic<bool>& stopping, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!stopping.load() && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 50);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
  return false;
}

std::size_t content_length(const std::string& head) {
  std::string lower(head);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos) return 0;
  return static_cast<std::size_t>(std::strtoull(lower.c_str() + at + 17, nullptr, 10));
}

// Reads up to and including "\r\n\r\n"; whatever came after it is left in `extra`.
std::string read_head(int fd, const std::atomic<bool>& stopping, std::string& extra) {
  std::string buf;
  char chunk[4096];
  while (buf.size() < (64u << 10)) {
    if (!wait_readable(fd, stopping, std::chrono::seconds(5))) return {};
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return {};
    buf.append(chunk, static_cast<std::size_t>(n));
    if (const std::size_t end = buf.find("\r\n\r\n"); end != std::string::npos) {
      extra = buf.substr(end + 4);
      buf.resize(end + 4);
      return buf;
    }
  }
  return {};
}

}  // namespace

std::string find_program(const std::string& name) {
  std::string dirs = ::getenv("PATH") ? ::getenv("PATH") : "";
  dirs += ":/usr/sbin:/usr/local/sbin:/sbin";
  std::stringstream ss(dirs);
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && is_executable(dir + "/" + name)) return dir + "/" + name;
  return {};
}

temp_dir::temp_dir() {
  const char* base = ::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/fatpack-remote-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  path_ = pattern;
}

temp_dir::~temp_dir() { ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free loopback port: " + std::string(std::strerror(errno)));
  ::close(fd);
  return ntohs(a.sin_port);
}

bool port_answers(int port, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  do {
    if (const int fd = connect_loopback(port); fd >= 0) {
      ::close(fd);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

bool send_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string read_request(int fd, const std::atomic<bool>& stopping) {
  std::string extra;
  std::string head = read_head(fd, stopping, extra);
  if (head.empty()) return {};
  std::size_t remaining = content_length(head);
  remaining = remaining > extra.size() ? remaining - extra.size() : 0;
  char chunk[65536];
  while (remaining > 0) {
    if (!wait_readable(fd, stopping, std::chrono::seconds(5))) return {};
    const ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, remaining), 0);
    if (n <= 0) return {};
    remaining -= static_cast<std::size_t>(n);
  }
  return head;
}

// nginx -------------------------------------------------------------------------------------------

std::string nginx_server::executable() { return find_program("nginx"); }

nginx_server::nginx_server(nginx_options options) : options_(std::move(options)) {
  std::string why;
  for (int attempt = 0; attempt < 3; ++attempt)  // the free port may be taken before nginx binds it
    if (start(why)) return;
  throw std::runtime_error("nginx did not start: " + why);
}

bool nginx_server::start(std::string& why) {
  const std::string d = dir_.path();
  for (const char* sub : {"/www", "/www/cache", "/tmp"}) ::mkdir((d + sub).c_str(), 0700);
  port_ = free_loopback_port();
  std::string auth;
  if (!options_.basic_user.empty()) {
    // {PLAIN}: nginx's htpasswd scheme for a clear-text password (no htpasswd/openssl needed).
    write_text_file(d + "/htpasswd", options_.basic_user + ":{PLAIN}" + options_.basic_password + "\n");
    auth = "auth_basic \"fatpack\"; auth_basic_user_file " + d + "/htpasswd;";
    auth = options_.authenticate_writes_only ? "      limit_except GET HEAD { " + auth + " }\n" : "      " + auth + "\n";
  }
  const bool tls = !options_.tls_certificate.empty();
  const std::string tls_lines = tls ? "    ssl_certificate " + options_.tls_certificate + ";\n    ssl_certificate_key " +
                                          options_.tls_key + ";\n"
                                    : "";
  config_ =
      "daemon off;\n"
      "master_process off;\n"
      "worker_processes 1;\n"
      "pid " + d + "/nginx.pid;\n"
      "error_log " + d + "/error.log warn;\n"
      "events { worker_connections 256; }\n"
      "http {\n"
      "  access_log off;\n"
      "  default_type application/octet-stream;\n"
      "  client_body_temp_path " + d + "/tmp/body;\n"
      "  proxy_temp_path " + d + "/tmp/proxy;\n"
      "  fastcgi_temp_path " + d + "/tmp/fastcgi;\n"
      "  uwsgi_temp_path " + d + "/tmp/uwsgi;\n"
      "  scgi_temp_path " + d + "/tmp/scgi;\n"
      "  server {\n"
      "    listen 127.0.0.1:" + std::to_string(port_) + (tls ? " ssl" : "") + ";\n" + tls_lines +
      "    root " + d + "/www;\n"
      "    location /cache/ {\n"
      "      dav_methods PUT DELETE;\n"
      "      create_full_put_path on;\n"
      "      dav_access user:rw;\n"
      "      client_max_body_size 512m;\n" + auth +
      "    }\n"
      "  }\n"
      "}\n";
  write_text_file(d + "/nginx.conf", config_);
  const std::string exe = executable();
  pid_ = ::fork();
  if (pid_ < 0) {
    why = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid_ == 0) {
    const int out = ::open((d + "/stderr.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    const std::string prefix = d + "/", conf = d + "/nginx.conf";
    ::execl(exe.c_str(), "nginx", "-p", prefix.c_str(), "-c", conf.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      why = read_text_file(d + "/stderr.log") + read_text_file(d + "/error.log");
      return false;
    }
    if (port_answers(port_, std::chrono::milliseconds(20))) return true;
  }
  kill_hard();
  why = "port " + std::to_string(port_) + " not answering after 5 s; " + read_text_file(d + "/error.log");
  return false;
}

nginx_server::~nginx_server() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_hard();
}

void nginx_server::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string nginx_server::url() const {
  return (options_.tls_certificate.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") + std::to_string(port_) +
         "/cache";
}

bool make_self_signed_certificate(const std::string& dir, std::string& why) {
  const std::string openssl = find_program("openssl");
  if (openssl.empty()) {
    why = "openssl not found";
    return false;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open((dir + "/openssl.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    const std::string key = dir + "/key.pem", cert = dir + "/cert.pem";
    ::execl(openssl.c_str(), "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key.c_str(), "-out", cert.c_str(), "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = "openssl req failed: " + read_text_file(dir + "/openssl.log");
    return false;
  }
  return true;
}

std::string nginx_server::file_of(const std::string& key) const { return dir_.path() + "/www/cache/" + key; }

// fault servers -----------------------------------------------------------------------------------

fault_server::fault_server(handler h) : handler_(std::move(h)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe2(wake_, O_CLOEXEC) != 0)
    throw std::runtime_error("fault server: " + std::string(std::strerror(errno)));
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

fault_server::~fault_server() {
  stopping_ = true;
  const char c = 0;
  (void)!::write(wake_[1], &c, 1);
  acceptor_.join();
  for (std::thread& t : workers_) t.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::string fault_server::url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/cache"; }

void fault_server::accept_loop() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (stopping_ || !(p[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++connections_;
    std::lock_guard<std::mutex> lock(mutex_);
    workers_.emplace_back([this, fd] {
      handler_(fd, stopping_);
      ::close(fd);
    });
  }
}

fault_server::handler fault_server::silent() {
  return [](int fd, const std::atomic<bool>& stopping) {
    char chunk[4096];
    while (!stopping) {  // read and drop until the client gives up; never answer
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && ::recv(fd, chunk, sizeof chunk, 0) <= 0) return;
    }
  };
}

fault_server::handler fault_server::short_body(std::size_t declared, std::size_t sent) {
  return [declared, sent](int fd, const std::atomic<bool>& stopping) {
    if (read_request(fd, stopping).empty()) return;
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(declared) + "\r\n\r\n";
    const std::string body(sent, 'x');
    send_all(fd, head.data(), head.size());
    send_all(fd, body.data(), body.size());
  };
}

fault_server::handler fault_server::status(std::function<int(const std::string&)> status_for, std::string* seen,
                                           std::mutex* seen_mutex) {
  return [status_for, seen, seen_mutex](int fd, const std::atomic<bool>& stopping) {
    const std::string request = read_request(fd, stopping);
    if (request.empty()) return;
    if (seen) {
      std::lock_guard<std::mutex> lock(*seen_mutex);
      *seen += request;
    }
    const std::string method = request.substr(0, request.find(' '));
    const int code = status_for(method);
    const std::string body = method == "HEAD" ? "" : "status " + std::to_string(code) + "\n";
    std::string head = "HTTP/1.1 " + std::to_string(code) + " Test\r\nConnection: close\r\nContent-Length: " +
                       std::to_string(method == "HEAD" ? 0 : body.size()) + "\r\n";
    if (code >= 300 && code < 400) head += "Location: http://127.0.0.1:1/elsewhere\r\n";
    if (code == 401) head += "WWW-Authenticate: Basic realm=\"test\"\r\n";
    head += "\r\n";
    send_all(fd, head.data(), head.size());
    send_all(fd, body.data(), body.size());
  };
}

fault_server::handler fault_server::truncating_proxy(int upstream_port) {
  return [upstream_port](int fd, const std::atomic<bool>& stopping) {
    const std::string request = read_request(fd, stopping);  // GETs: no body to forward
    if (request.empty()) return;
    const int up = connect_loopback(upstream_port);
    if (up < 0) return;
    std::string extra;
    if (send_all(up, request.data(), request.size())) {
      const std::string head = read_head(up, stopping, extra);
      if (!head.empty()) {
        std::size_t half = content_length(head) / 2;
        send_all(fd, head.data(), head.size());
        std::string body = extra.substr(0, std::min(half, extra.size()));
        half -= body.size();
        char chunk[65536];
        while (half > 0 && wait_readable(up, stopping, std::chrono::seconds(5))) {
          const ssize_t n = ::recv(up, chunk, std::min(sizeof chunk, half), 0);
          if (n <= 0) break;
          body.append(chunk, static_cast<std::size_t>(n));
          half -= static_cast<std::size_t>(n);
        }
        send_all(fd, body.data(), body.size());
      }
    }
    ::close(up);
  };
}

}  // namespace fatpack::test::remote
