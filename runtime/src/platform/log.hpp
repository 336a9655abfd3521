// Logging: FATPACK_LOG=off|error|warn|info|debug. Default (unset, and no set_log_level call): off,
// except one line for the first warning or error of the process (errors are returned as values and a
// library does not chatter on stderr, but a degradation such as a read-only cache is never silent). Each line is "fatpack: <level>: <text>" on stderr, or
// goes to the callback set through fatpack::set_log_callback (then nothing is written to stderr).
#pragma once

#include "fatpack/fatpack.hpp"

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fatpack::detail {

// True when lines of `level` are emitted (cheap: lets callers skip building the text).
bool log_enabled(log_level level);
// Emits one or more lines (split at '\n'), each prefixed.
void log_line(log_level level, std::string_view text);
// Emits `text` the first time `said` is found false (a warning said once per process). Not
// std::call_once around log_line: a log callback that calls fatpack again on the same path re-entered
// the call_once running on its own thread, a deadlock (runtime_test).
void log_once(std::atomic<bool>& said, log_level level, std::string_view text);
const char* log_level_name(log_level level);
// Text from outside (an environment value, a key text read from a cache file) as a message quotes it:
// at most `limit` bytes, anything but printable ASCII as '?', "..." after a cut; it can neither fill
// the log nor write terminal escapes into it.
std::string quoted_excerpt(std::string_view text, std::size_t limit);
// What fatpack::set_log_level / get_log_level / set_log_callback (api/settings_api.cpp) set and read.
void set_log_threshold(log_level level);
log_level log_threshold();
void set_log_sink(std::function<void(log_level, std::string_view)> callback);

// Holds back the lines this thread logs for the application's log callback while it lives and
// emits them when it ends (lines to stderr, with no callback set, go out at once). Declared before
// a lock guard, it ends after the lock is released: the application's log callback never runs while
// fatpack holds one of its own locks (nor the loader's lock, inside dl_iterate_phdr), so a callback
// may take the application's locks while the application calls fatpack holding them. Nested ones
// hand their lines to the outermost. At most max_held_lines are held; the rest are counted and the
// count is logged.
class log_deferral {
 public:
  log_deferral() noexcept;
  ~log_deferral();
  log_deferral(const log_deferral&) = delete;
  log_deferral& operator=(const log_deferral&) = delete;

 private:
  friend void log_line(log_level level, std::string_view text);
  static constexpr std::size_t max_held_lines = 10000;
  void hold(log_level level, std::string_view text);
  log_deferral* outer_;
  std::vector<std::pair<log_level, std::string>> lines_;
  std::size_t dropped_ = 0;
};

}  // namespace fatpack::detail
