// A real redis-server for tests, on loopback, on a free port, with its own temporary directory and no
// persistence; stopped by its PID (SIGTERM, then SIGKILL) in the destructor. Header-only.
//
//   if (!redis_server::installed()) { std::puts("SKIPPED: redis-server not found"); return 77; }
//   redis_options o; o.password = "pw";     // or o.maxmemory = "1mb" for "server full"
//   redis_server srv(o);
//   srv.url()  -> "redis://127.0.0.1:PORT/0";  srv.kill_hard(); srv.start();  // same port again
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fatpack_test {

struct redis_options {
  std::string password;  // --requirepass
  std::string maxmemory;  // e.g. "1mb", with --maxmemory-policy noeviction ("server full")
  bool ipv6 = false;      // also listen on ::1 (check ipv6_loopback() first)
};

class redis_server {
 public:
  // The redis-server binary, or "" when none is installed.
  static std::string binary() {
    for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"})
      if (::access(p, X_OK) == 0) return p;
    return {};
  }
  static bool installed() { return !binary().empty(); }
  // Whether ::1 can be bound here (containers may have no IPv6).
  static bool ipv6_loopback() {
    int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  explicit redis_server(redis_options o = {}) : opts_(std::move(o)) {
    char tmpl[] = "/tmp/fatpack-redis-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    // A free port: bind port 0, read it, close. Another process could take it before redis binds
    // it: then redis exits and the next port is tried.
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      if (start()) return;
    }
    throw std::runtime_error("redis-server did not start (see " + dir_ + "/redis.log)");
  }
  ~redis_server() {
    stop();
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  int port() const { return port_; }
  std::string url(int db = 0) const {
    std::string u = "redis://";
    if (!opts_.password.empty()) u += ":" + opts_.password + "@";
    return u + "127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
  }

  // Starts it (again) on port(); true once PING answers (within 5 s).
  bool start() {
    std::vector<std::string> args{binary(), "--port", std::to_string(port_), "--bind",
                                  opts_.ipv6 ? "127.0.0.1 ::1" : "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", dir_, "--daemonize", "no",
                                  "--logfile", dir_ + "/redis.log"};
    if (!opts_.password.empty()) args.insert(args.end(), {"--requirepass", opts_.password});
    if (!opts_.maxmemory.empty())
      args.insert(args.end(), {"--maxmemory", opts_.maxmemory, "--maxmemory-policy", "noeviction"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // it exited (port taken?)
        pid_ = -1;
        return false;
      }
      if (pings()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
    return false;
  }
  // SIGTERM, then SIGKILL after 2 s.
  void stop() { end(SIGTERM); }
  // kill -9: no goodbye to the clients.
  void kill_hard() { end(SIGKILL); }

 private:
  void end(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
  }

  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free port");
    ::close(fd);
    return ntohs(a.sin_port);
  }

  // Whether the server answers PING (+PONG, or -NOAUTH when a password is required): up.
  bool pings() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
      pollfd p{fd, POLLIN, 0};
      char c = 0;
      ok = ::poll(&p, 1, 500) == 1 && ::recv(fd, &c, 1, 0) == 1 && (c == '+' || c == '-');
    }
    ::close(fd);
    return ok;
  }

  redis_options opts_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace fatpack_test
