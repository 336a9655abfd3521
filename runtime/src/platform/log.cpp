// Logging (see log.hpp).
#include "platform/log.hpp"

#include "platform/env.hpp"
#include "platform/os.hpp"

#include "fatpack/core/hex.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

namespace fatpack::detail {

namespace {

// FATPACK_LOG's level, any case (docs/runtime.md §5); nullopt for a value that names none, which then
// counts as unset (a typo must not silence the first warning, as `off` does on purpose).
std::optional<log_level> parse_level(const char* s) {
  const std::string v = lower_word(s);
  if (v == "off" || v == "0" || v == "none") return log_level::off;
  if (v == "error") return log_level::error;
  if (v == "warn" || v == "warning") return log_level::warn;
  if (v == "info" || v == "1") return log_level::info;
  if (v == "debug" || v == "trace" || v == "2") return log_level::debug;
  return std::nullopt;
}

const char* const k_first_warning_hint =
    " (fatpack reports only its first warning by default; FATPACK_LOG=warn shows all, FATPACK_LOG=off none)";

struct log_state {
  // `chosen`: the level FATPACK_LOG names, if it names one.
  explicit log_state(std::optional<log_level> chosen)
      : level{static_cast<int>(chosen.value_or(log_level::off))}, first_warning_pending{!chosen} {}
  std::atomic<int> level;
  // Nobody chose a level (FATPACK_LOG unset, empty or naming none, set_log_level never called): the
  // first warning or error of the process still gets one line, so a degradation (a read-only cache, a
  // refused cache entry) is never silent. Cleared once that line is out, or when a level is chosen.
  std::atomic<bool> first_warning_pending;
  std::mutex mu;  // serialises the callback's lines and guards callback
  std::function<void(log_level, std::string_view)> callback;
  // Whether callback is set, read without mu: a thread that defers (it holds a lock of fatpack's or
  // the loader's) must never wait for mu, which a callback running on another thread holds.
  std::atomic<bool> has_callback{false};
  std::mutex stderr_mu;  // serialises the lines written to stderr (held for one fprintf each, no callback)
  // A FATPACK_LOG that names no level, said once: on stderr when the state is made, or, when the
  // state is made by set_log_sink (a program that sets its callback first), to that callback.
  std::string env_problem;
};

// Set while set_log_sink makes the state: its line about FATPACK_LOG then waits for the callback.
thread_local bool t_making_for_sink = false;

log_state& state() {
  static log_state* s = [] {
    const char* env = os::getenv("FATPACK_LOG");
    const std::optional<log_level> chosen = parse_level(env);
    auto* made = new log_state(chosen);  // leaked: logging may happen from static destructors
    if (env && *env && !chosen) {
      made->env_problem = "FATPACK_LOG='" + fatpack::core::printable_text(env, 64) +
                          "' names no level (off, error, warn, info or debug); using the default (the first "
                          "warning only)";
      if (!t_making_for_sink) {
        std::fprintf(stderr, "fatpack: warn: %s\n", made->env_problem.c_str());
        made->env_problem.clear();
      }
    }
    return made;
  }();
  return *s;
}

// The one line the default level lets through: the first line of the process's first warning or
// error, with a hint saying how to see more or none.
bool take_first_warning(log_level level, std::string_view& text, std::string& owned) {
  if (level != log_level::warn && level != log_level::error) return false;
  auto& s = state();
  if (!s.first_warning_pending.load(std::memory_order_relaxed) || !s.first_warning_pending.exchange(false))
    return false;
  owned.assign(text.substr(0, text.find('\n')));
  owned += k_first_warning_hint;
  text = owned;
  return true;
}

}  // namespace

std::string quoted_excerpt(std::string_view text, std::size_t limit) {
  std::string s(text.substr(0, limit));
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
  return text.size() > limit ? s + "..." : s;
}

void log_once(std::atomic<bool>& said, log_level level, std::string_view text) {
  if (!said.exchange(true)) log_line(level, text);
}

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

namespace {

thread_local log_deferral* t_deferral = nullptr;

// Writes the line, or, when `deferring` and an application callback would get it, writes nothing and
// returns false: only a callback can want the application's locks, so only its lines wait for the
// deferral's end, and a deferring thread never takes the callback's mutex. Lines to stderr go out
// at once, so a line logged by a pool thread cannot be lost to an exit that begins between the end
// of its compile and the end of its deferral.
bool emit(log_level level, std::string_view text, bool deferring = false) {
  auto& s = state();
  auto each_line = [&](auto&& write) {
    std::size_t pos = 0;
    while (pos <= text.size()) {
      std::size_t nl = text.find('\n', pos);
      std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      if (!(line.empty() && nl == std::string_view::npos && pos > 0)) write(line);
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
  };
  if (s.has_callback.load(std::memory_order_acquire)) {
    if (deferring) return false;
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.callback) {  // else removed meanwhile: the line goes to stderr
      each_line([&](std::string_view line) { s.callback(level, line); });
      return true;
    }
  }
  // A line quotes text from outside (an environment value, a cache entry's key text, a driver's
  // log): control characters are written as '?' (core::terminal_text), so none reaches a terminal
  // as an escape sequence or a carriage return that overwrites the line. A callback gets the text.
  std::lock_guard<std::mutex> lock(s.stderr_mu);
  each_line([&](std::string_view line) {
    std::fprintf(stderr, "fatpack: %s: %s\n", log_level_name(level), fatpack::core::terminal_text(line).c_str());
  });
  return true;
}

}  // namespace

void log_line(log_level level, std::string_view text) {
  std::string first;
  if (!log_enabled(level) && !take_first_warning(level, text, first)) return;
  if (!emit(level, text, t_deferral != nullptr)) t_deferral->hold(level, text);
}

log_deferral::log_deferral() noexcept : outer_(t_deferral) { t_deferral = this; }

void log_deferral::hold(log_level level, std::string_view text) {
  // Bounded: a registry walk over many lying notes logs a line for each.
  if (lines_.size() < max_held_lines) {
    lines_.emplace_back(level, std::string(text));
  } else {
    ++dropped_;
  }
}

log_deferral::~log_deferral() {
  t_deferral = outer_;
  try {
    if (outer_) {
      for (const auto& l : lines_) outer_->hold(l.first, l.second);
      outer_->dropped_ += dropped_;
    } else {
      for (const auto& l : lines_) emit(l.first, l.second);
      if (dropped_)
        emit(log_level::warn, std::to_string(dropped_) + " more log lines were dropped (at most " +
                                  std::to_string(max_held_lines) + " are held back while fatpack holds a lock)");
    }
  } catch (...) {
    // No memory for a line, or a log callback that throws: the lines are lost, not the process
    // (a destructor that throws would end it).
  }
}

void set_log_threshold(log_level level) {
  state().first_warning_pending.store(false);
  state().level.store(static_cast<int>(level));
}
log_level log_threshold() { return static_cast<log_level>(state().level.load()); }
void set_log_sink(std::function<void(log_level, std::string_view)> callback) {
  t_making_for_sink = true;
  auto& s = state();
  t_making_for_sink = false;
  std::lock_guard<std::mutex> lock(s.mu);
  s.callback = std::move(callback);
  s.has_callback.store(static_cast<bool>(s.callback), std::memory_order_release);
  // The line about FATPACK_LOG, held back when this call made the state: to the callback, or to
  // stderr when the callback is empty.
  if (!s.env_problem.empty()) {
    const std::string line = std::move(s.env_problem);
    s.env_problem.clear();
    try {
      if (s.callback) s.callback(log_level::warn, line);
      else std::fprintf(stderr, "fatpack: warn: %s\n", line.c_str());
    } catch (...) {
      // A callback that throws loses this line, as it loses any other (fatpack.hpp).
    }
  }
}

}  // namespace fatpack::detail
