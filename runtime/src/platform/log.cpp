// Logging (see log.hpp).
#include "platform/log.hpp"

#include "platform/os.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace fatpack::detail {

namespace {

log_level parse_level(const char* s) {
  if (!s) return log_level::off;
  std::string v(s);
  if (v == "error") return log_level::error;
  if (v == "warn" || v == "warning") return log_level::warn;
  if (v == "info" || v == "1") return log_level::info;
  if (v == "debug" || v == "trace" || v == "2") return log_level::debug;
  return log_level::off;
}

struct log_state {
  std::atomic<int> level{static_cast<int>(parse_level(os::getenv("FATPACK_LOG")))};
  std::mutex mu;  // serialises lines and guards callback
  std::function<void(log_level, std::string_view)> callback;
};

log_state& state() {
  static log_state* s = new log_state();  // leaked: logging may happen from static destructors
  return *s;
}

}  // namespace

const char* log_level_name(log_level level) {
  switch (level) {
    case log_level::error: return "error";
    case log_level::warn: return "warn";
    case log_level::info: return "info";
    case log_level::debug: return "debug";
    default: return "off";
  }
}

bool log_enabled(log_level level) {
  return level != log_level::off && static_cast<int>(level) <= state().level.load(std::memory_order_relaxed);
}

void log_line(log_level level, std::string_view text) {
  if (!log_enabled(level)) return;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!(line.empty() && nl == std::string_view::npos && pos > 0)) {
      if (s.callback) {
        s.callback(level, line);
      } else {
        std::fprintf(stderr, "fatpack: %s: %.*s\n", log_level_name(level), static_cast<int>(line.size()), line.data());
      }
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
}

void set_log_threshold(log_level level) { state().level.store(static_cast<int>(level)); }
log_level log_threshold() { return static_cast<log_level>(state().level.load()); }
void set_log_sink(std::function<void(log_level, std::string_view)> callback) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.callback = std::move(callback);
}

}  // namespace fatpack::detail
