// A fake server on loopback for fault tests: it accepts connections and answers whatever bytes arrive
// with the same canned bytes (or nothing: a server that never answers), then keeps the connection open
// or closes it. Runs on its own thread until destroyed. Header-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fatpack_test {

class canned_server {
 public:
  // `answer`: the bytes sent whenever request bytes arrive ("" = never answer). `close_after`:
  // close the connection once the answer is sent (a truncated reply then reads as EOF).
  // `late`: bytes sent once, 30 ms after the first answer (a reply nobody asked for).
  // `drip`: send the answer one byte per `drip` (a slow server that never pauses long).
  explicit canned_server(std::string answer, bool close_after = false, std::string late = "",
                         std::chrono::milliseconds drip = std::chrono::milliseconds(0))
      : answer_(std::move(answer)), close_after_(close_after), late_(std::move(late)), drip_(drip) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("canned_server: cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~canned_server() {
    stop_ = true;
    thread_.join();
    for (auto& c : conns_) ::close(c.fd);
    ::close(fd_);
  }
  canned_server(const canned_server&) = delete;
  canned_server& operator=(const canned_server&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  int accepted() const { return accepted_.load(); }

 private:
  struct conn {
    int fd;
  };
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (auto& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c >= 0) {
          conns_.push_back({c});
          ++accepted_;
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        conn& c = conns_[i - 1];
        char buf[4096];
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n <= 0) {  // the client went away
          ::close(c.fd);
          c.fd = -1;
          continue;
        }
        if (answer_.empty()) continue;
        if (drip_.count() > 0) {
          for (std::size_t at = 0; at < answer_.size() && !stop_; ++at) {
            if (::send(c.fd, answer_.data() + at, 1, MSG_NOSIGNAL) != 1) break;
            std::this_thread::sleep_for(drip_);
          }
          continue;
        }
        if (::send(c.fd, answer_.data(), answer_.size(), MSG_NOSIGNAL) < 0 || close_after_) {
          ::close(c.fd);
          c.fd = -1;
          continue;
        }
        if (!late_.empty() && !late_sent_) {
          late_sent_ = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          (void)::send(c.fd, late_.data(), late_.size(), MSG_NOSIGNAL);
        }
      }
      std::vector<conn> open;
      for (auto& c : conns_)
        if (c.fd >= 0) open.push_back(c);
      conns_.swap(open);
    }
  }

  std::string answer_;
  bool close_after_;
  std::string late_;
  bool late_sent_ = false;
  std::chrono::milliseconds drip_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<conn> conns_;
  std::thread thread_;
};

}  // namespace fatpack_test
