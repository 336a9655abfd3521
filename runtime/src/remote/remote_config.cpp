// Fleet cache settings (remote_config.hpp).
#include "remote/remote_config.hpp"

#include "platform/env.hpp"
#include "platform/os.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::detail::remote {

namespace {

// A small secret file: regular, ours (or root's), 0600-like, bounded.
std::string read_secret_file(const std::string& path, const char* what, std::size_t min_size, std::string& out) {
  if (path.empty()) return std::string(what) + ": no file named";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::string(what) + " " + path + ": " + std::strerror(errno);
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) problem = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) problem = "not a regular file";
  else if (st.st_uid != ::geteuid() && st.st_uid != 0) problem = "owned by another user";
  else if (st.st_mode & (S_IRWXG | S_IRWXO)) problem = "readable or writable by group or others (chmod 600 it)";
  else if (st.st_size > 4096) problem = "larger than 4 KiB";
  if (problem.empty()) {
    char buf[4097];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) problem = std::strerror(errno);
    else {
      out.assign(buf, static_cast<std::size_t>(n));
      while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
      if (out.size() < min_size) problem = "shorter than " + std::to_string(min_size) + " bytes";
    }
  }
  ::close(fd);
  if (!problem.empty()) {
    out.clear();
    return std::string(what) + " " + path + ": " + problem;
  }
  return {};
}

bool parse_ms(const char* text, long min, long max, std::chrono::milliseconds& out) {
  if (!text || !*text) return true;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  out = std::chrono::milliseconds(v);
  return true;
}

}  // namespace

std::string read_key_file(const std::string& path, std::string& key) {
  return read_secret_file(path, "the fleet cache key file", 32, key);
}

std::string read_credentials_file(const std::string& path, store_settings& s) {
  std::string text;
  if (auto e = read_secret_file(path, "the fleet cache credentials file", 1, text); !e.empty()) return e;
  if (text.find('\n') != std::string::npos || text.find('\r') != std::string::npos)
    return "the fleet cache credentials file " + path + ": more than one line";
  if (text.rfind("bearer ", 0) == 0 && text.size() > 7) {
    s.bearer_token = text.substr(7);
    return {};
  }
  if (text.rfind("basic ", 0) == 0) {
    auto colon = text.find(':', 6);
    if (colon != std::string::npos && colon > 6) {
      s.basic_user = text.substr(6, colon - 6);
      s.basic_password = text.substr(colon + 1);
      return {};
    }
  }
  // Never quote the line: it is a secret.
  return "the fleet cache credentials file " + path + ": expected one line \"bearer TOKEN\" or \"basic USER:PASSWORD\"";
}

void check_config(remote_config& c) {
  if (c.store.url.empty()) return;
  if (c.read_write && c.key.empty() && !c.trust_all_writers)
    c.problems.push_back("the fleet cache " + redact_url(c.store.url) +
                         " is read-write without a signing key: set FATPACK_CACHE_REMOTE_KEY=FILE, or "
                         "FATPACK_CACHE_REMOTE_TRUST_ALL_WRITERS=1 to let whoever can write the store run "
                         "code on this machine (docs/cache.md §12.4); the remote is not used");
}

remote_config config_from_options(const remote_cache_options& o) {
  remote_config c;
  c.store.url = o.url;
  c.read_write = o.read_write;
  c.trust_all_writers = o.trust_all_writers;
  if (o.connect_timeout_ms) c.store.connect_timeout = std::chrono::milliseconds(o.connect_timeout_ms);
  if (o.timeout_ms) c.store.transfer_timeout = std::chrono::milliseconds(o.timeout_ms);
  c.lease = std::chrono::milliseconds(o.lease_ms);
  c.store.ca_file = o.ca_file;
  if (!o.key_file.empty()) {
    c.key_file = o.key_file;
    if (auto e = read_key_file(o.key_file, c.key); !e.empty()) c.problems.push_back(e);
  }
  if (!o.credentials_file.empty())
    if (auto e = read_credentials_file(o.credentials_file, c.store); !e.empty()) c.problems.push_back(e);
  const bool known = c.store.url.empty() || c.store.url.rfind("http://", 0) == 0 ||
                     c.store.url.rfind("https://", 0) == 0 || c.store.url.rfind("redis://", 0) == 0;
  if (!known)
    c.problems.push_back("unsupported URL " + redact_url(c.store.url) + " (expected http://, https:// or redis://)");
  check_config(c);
  return c;
}

remote_config remote_config_from_env() {
  remote_config c;
  const char* url = os::getenv("FATPACK_CACHE_REMOTE");
  if (!url || !*url) return c;
  c.store.url = url;
  if (const char* m = os::getenv("FATPACK_CACHE_REMOTE_MODE"); m && *m) {
    if (std::strcmp(m, "read-write") == 0) c.read_write = true;
    else if (std::strcmp(m, "read-only") != 0)
      c.problems.push_back("FATPACK_CACHE_REMOTE_MODE must be read-only or read-write");
  }
  c.trust_all_writers = env_flag("FATPACK_CACHE_REMOTE_TRUST_ALL_WRITERS");
  if (const char* k = os::getenv_path("FATPACK_CACHE_REMOTE_KEY"); k && *k) {
    c.key_file = k;
    if (auto e = read_key_file(k, c.key); !e.empty()) c.problems.push_back(e + "; the remote is not used");
  }
  if (const char* t = os::getenv("FATPACK_CACHE_REMOTE_TOKEN"); t && *t) c.store.bearer_token = t;
  if (const char* f = os::getenv_path("FATPACK_CACHE_REMOTE_CREDENTIALS"); f && *f) {
    c.store.bearer_token.clear();
    if (auto e = read_credentials_file(f, c.store); !e.empty()) c.problems.push_back(e + "; the remote is not used");
  }
  if (const char* ca = os::getenv_path("FATPACK_CACHE_REMOTE_CA_FILE"); ca && *ca) c.store.ca_file = ca;
  if (!parse_ms(os::getenv("FATPACK_CACHE_REMOTE_CONNECT_TIMEOUT_MS"), 1, 600000, c.store.connect_timeout))
    c.problems.push_back("FATPACK_CACHE_REMOTE_CONNECT_TIMEOUT_MS must be 1 to 600000");
  if (!parse_ms(os::getenv("FATPACK_CACHE_REMOTE_TIMEOUT_MS"), 1, 600000, c.store.transfer_timeout))
    c.problems.push_back("FATPACK_CACHE_REMOTE_TIMEOUT_MS must be 1 to 600000");
  if (!parse_ms(os::getenv("FATPACK_CACHE_REMOTE_LEASE_MS"), 0, 3600000, c.lease))
    c.problems.push_back("FATPACK_CACHE_REMOTE_LEASE_MS must be 0 to 3600000");
  if (!parse_ms(os::getenv("FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS"), 0, 600000, c.exit_flush))
    c.problems.push_back("FATPACK_CACHE_REMOTE_EXIT_FLUSH_MS must be 0 to 600000");
  check_config(c);
  return c;
}

}  // namespace fatpack::detail::remote
