// Logging: FATPACK_LOG=off|error|warn|info|debug. Default (unset, and no set_log_level call): off,
// except one line for the first warning or error of the process (errors are returned as values and a
// library does not chatter on stderr, but a degradation such as a read-only cache is never silent). Each line is "fatpack: <level>: <text>" on stderr, or
// goes to the callback set through fatpack::set_log_callback (then nothing is written to stderr).
#pragma once

#include "fatpack/fatpack.hpp"

#include <functional>
#include <string>
#include <string_view>

namespace fatpack::detail {

// True when lines of `level` are emitted (cheap: lets callers skip building the text).
bool log_enabled(log_level level);
// Emits one or more lines (split at '\n'), each prefixed.
void log_line(log_level level, std::string_view text);
const char* log_level_name(log_level level);
// What fatpack::set_log_level / get_log_level / set_log_callback (api/settings_api.cpp) set and read.
void set_log_threshold(log_level level);
log_level log_threshold();
void set_log_sink(std::function<void(log_level, std::string_view)> callback);

}  // namespace fatpack::detail
