// The shared skip state of a remote (breaker.hpp).
#include "remote/breaker.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::detail::remote {

namespace {

std::int64_t now_unix() { return static_cast<std::int64_t>(std::time(nullptr)); }

}  // namespace

breaker::breaker(std::string state_file, int threshold, std::chrono::seconds cool_down)
    : file_(std::move(state_file)), threshold_(threshold), cool_(cool_down) {}

breaker::state breaker::read() {
  if (file_.empty()) return mem_;
  state s;
  int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return s;
  char buf[96];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return s;
  buf[n] = 0;
  int faults = 0;
  long long until = 0;
  // "fatpack remote state 1 <faults> <until>\n"; anything else: no faults.
  if (std::sscanf(buf, "fatpack remote state 1 %d %lld", &faults, &until) != 2) return s;
  if (faults < 0 || faults > 1000000 || until < 0) return s;
  // A skip far in the future is not ours (a clock jump, or a planted file): at most one cool-down.
  if (until > now_unix() + cool_.count()) until = now_unix() + cool_.count();
  s.faults = faults;
  s.until = until;
  return s;
}

void breaker::write(const state& s) {
  if (file_.empty()) {
    mem_ = s;
    return;
  }
  char buf[96];
  int len = std::snprintf(buf, sizeof buf, "fatpack remote state 1 %d %lld\n", s.faults, static_cast<long long>(s.until));
  // The cache's format directory may not exist yet (no entry written so far): create it like the
  // cache does (0700); its parent, the cache root, was checked and created by the cache.
  if (auto slash = file_.rfind('/'); slash != std::string::npos && slash > 0)
    ::mkdir(file_.substr(0, slash).c_str(), 0700);
  const std::string tmp = file_ + "." + std::to_string(::getpid()) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    mem_ = s;  // the directory is not writable: this process still remembers
    return;
  }
  bool ok = ::write(fd, buf, static_cast<std::size_t>(len)) == len;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), file_.c_str()) != 0) {
    ::unlink(tmp.c_str());
    mem_ = s;
  }
}

bool breaker::skipping(std::int64_t* until) {
  std::lock_guard<std::mutex> g(mu_);
  state s = read();
  if (!file_.empty() && mem_.until > s.until) s = mem_;  // the file could not be written
  if (until) *until = s.until;
  return s.until > now_unix();
}

void breaker::fault() {
  std::lock_guard<std::mutex> g(mu_);
  state s = read();
  s.faults++;
  if (s.faults >= threshold_) {
    s.until = now_unix() + cool_.count();
    s.faults = 0;  // after the cool-down the remote gets `threshold_` more tries
  }
  write(s);
}

void breaker::success() {
  std::lock_guard<std::mutex> g(mu_);
  state s = read();
  if (s.faults == 0 && s.until == 0 && mem_.faults == 0) return;  // nothing to write: the common case
  write(state{});
  mem_ = state{};
}

}  // namespace fatpack::detail::remote
