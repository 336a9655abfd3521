// `@FILE` response files, as nvcc and gcc read them: the argument `@FILE` is replaced by the words of
// FILE (for command lines longer than the system allows, or kept in a build system's file).
//
// Syntax: words separated by whitespace (space, tab, newline, CR, FF, VT); '...' and "..." group
// characters into one word (no escapes inside '...'; inside "..." a backslash escapes " and \); outside
// quotes a backslash escapes the next character. A word of a file that is itself `@OTHER` is expanded
// too (nested), unless any part of it was quoted or escaped: `'@name'` is the literal word @name.
//
// Outside input is bounded: a file holds at most max_response_file_size bytes (no NUL byte), files
// nest at most max_response_depth deep (a file that names itself hits that bound), one command line
// reads at most max_response_files files (empty files naming each other many times over would
// otherwise be read a number of times exponential in the depth, with no word to count), and expands
// to at most max_response_words words. Every violation, an unreadable or missing file, an
// unterminated quote and a bare `@` is an error that names the file (exit 2, a usage error).
#pragma once

#include "fatpack/core/error.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace fatpack::tool {

inline constexpr std::size_t max_response_file_size = std::size_t(1) << 20;  // 1 MiB
inline constexpr int max_response_depth = 8;
inline constexpr std::size_t max_response_words = 100000;
inline constexpr std::size_t max_response_files = 1000;

// The words of a response file's text (`source` names it in errors).
core::result<std::vector<std::string>> split_response_text(const std::string& text, const std::string& source,
                                                           std::vector<bool>* literal = nullptr);

// argv with every `@FILE` before the first `--` replaced by its words; `--` and what follows it are
// kept as they are (they go to nvcc unchanged).
core::result<std::vector<std::string>> expand_response_files(const std::vector<std::string>& args);

}  // namespace fatpack::tool
