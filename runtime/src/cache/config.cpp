// Cache settings (config.hpp).
#include "cache/config.hpp"

#include "cache/fs.hpp"
#include "platform/log.hpp"
#include "platform/env.hpp"
#include "platform/os.hpp"

#include <cctype>
#include <cerrno>
#include <limits>
#include <cstdlib>

namespace fatpack::detail::cache {

bool parse_size(const std::string& text, std::uint64_t& out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE) return false;  // more digits than 64 bits hold
  std::string suffix(end);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  // "Ki", "Mi", ...: the 'i' only after a unit letter ("5i" and "5iB" are not sizes).
  if (suffix.size() == 2 && suffix.back() == 'i') suffix.pop_back();
  std::uint64_t mult = 1;
  if (suffix.empty()) mult = 1;
  else if (suffix == "K" || suffix == "k") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g") mult = 1ull << 30;
  else if (suffix == "T" || suffix == "t") mult = 1ull << 40;
  else return false;
  // A product past 64 bits would wrap (17179869184G is 2^64: 0, "no bound", or a prune of everything).
  if (v > std::numeric_limits<std::uint64_t>::max() / mult) return false;
  out = static_cast<std::uint64_t>(v) * mult;
  return true;
}

namespace {

// An environment value as a warning quotes it (at most 64 bytes, printable).
std::string shown(const std::string& v) { return quoted_excerpt(v, 64); }

std::string without_trailing_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

std::string default_user_dir() {
  const char* p = os::getenv_path("FATPACK_CACHE_PATH");
  if (p && *p) return p;
  fs& f = current_fs();
  const char* home = os::getenv_path("HOME");
  // Root with another user's HOME (sudo keeping HOME, su without -): a cache created there would be
  // root's, 0700, and that user's own runs would refuse it (foreign owner) from then on, memory-only.
  // When $HOME is not root's own home (the password database's) and is not a directory root owns,
  // root uses its own home instead, and ignores $XDG_CACHE_HOME (the user's too).
  if (f.euid() == 0 && home && *home) {
    const std::string own = f.passwd_home();
    file_stat st;
    const bool roots = f.stat(without_trailing_slashes(home), st) == 0 && st.directory && st.uid == 0;
    if (without_trailing_slashes(home) != without_trailing_slashes(own) && !roots)
      return own.empty() ? std::string() : own + "/.cache/fatpack";
  }
  const char* xdg = os::getenv_path("XDG_CACHE_HOME");
  if (xdg && *xdg && xdg[0] == '/') return std::string(xdg) + "/fatpack";
  if (home && *home) return std::string(home) + "/.cache/fatpack";
  // No $HOME (daemons): the password database.
  std::string pw = f.passwd_home();
  return pw.empty() ? std::string() : pw + "/.cache/fatpack";
}

config config_from_env() {
  config c;
  c.disabled = env_flag("FATPACK_CACHE_DISABLE");
  c.read_only = env_flag("FATPACK_CACHE_READONLY");
  c.path = default_user_dir();
  if (const char* m = os::getenv("FATPACK_CACHE_MAXSIZE"); m && *m) {
    if (!parse_size(m, c.max_bytes)) {
      c.warnings.push_back("FATPACK_CACHE_MAXSIZE=" + shown(m) + " is not a size (e.g. 512M, 2G; at most 2^64 - 1 bytes); using 1G");
      c.max_bytes = default_max_bytes;
    }
  }
  if (const char* pre = os::getenv_path("FATPACK_CACHE_PREBUILT_PATH"); pre && *pre) {
    std::string list = pre;
    std::size_t pos = 0;
    while (pos <= list.size()) {
      std::size_t colon = list.find(':', pos);
      std::string item = list.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (!item.empty()) c.prebuilt.push_back(item);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  if (const char* v = os::getenv("FATPACK_CACHE_CODEC"); v && *v) {
    const std::string text = v;
    if (text == "none")
      c.codec = entry_codec::stored;
    else if (text == "lz4")
      c.codec = entry_codec::lz4;
    else
      c.warnings.push_back("FATPACK_CACHE_CODEC=" + shown(text) + " is neither none nor lz4; using none");
  }
  c.use_other_driver = env_flag("FATPACK_CACHE_OTHER_DRIVER", c.use_other_driver);
  if (const char* w = os::getenv("FATPACK_CACHE_LOCK_WAIT_MS"); w && *w) {
    // Digits only: atoi read "2min" as 2 ms and "lots" as 0 (no single flight), silently.
    const std::string text = w;
    const bool digits = text.size() <= 10 && text.find_first_not_of("0123456789") == std::string::npos;
    const long long v = digits ? std::atoll(w) : -1;
    if (v >= 0 && v <= std::numeric_limits<int>::max())
      c.lock_wait_ms = static_cast<int>(v);
    else
      c.warnings.push_back("FATPACK_CACHE_LOCK_WAIT_MS=" + shown(text) +
                           " is not a number of milliseconds (0-2147483647); using " + std::to_string(c.lock_wait_ms));
  }
  if (const char* h = os::getenv("FATPACK_CACHE_HOLDER_STALL_S"); h && *h) {
    const std::string text = h;
    const bool digits = text.size() <= 4 && text.find_first_not_of("0123456789") == std::string::npos;
    const int v = digits ? std::atoi(h) : 0;
    if (v >= min_holder_stall_s && v <= max_holder_stall_s) {
      c.holder_stall_s = v;
    } else {
      c.warnings.push_back("FATPACK_CACHE_HOLDER_STALL_S=" + shown(text) + " is not a number of seconds from " +
                           std::to_string(min_holder_stall_s) + " to " + std::to_string(max_holder_stall_s) +
                           "; using " + std::to_string(default_holder_stall_s));
    }
  }
  return c;
}

}  // namespace fatpack::detail::cache
