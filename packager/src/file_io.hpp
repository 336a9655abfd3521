// File access for the CLI: whole-file reads, and atomic writes that leave the output untouched when
// the content is unchanged (so Ninja's restat can skip dependent steps) and leave nothing behind on
// failure (temp file in the same directory, fsync, rename).
#pragma once

#include "fatpack/core/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::tool {

// Every input the CLI reads is bounded: at most max_input_size() bytes (FATPACK_MAX_INPUT_SIZE, default
// 4 GiB: larger than any host binary that embeds packages today), for regular files and for devices,
// FIFOs and pipes alike. More is an error naming the file and the limit, never an allocation failure.
inline constexpr std::uint64_t default_max_input_size = std::uint64_t(4) << 30;
std::uint64_t max_input_size();
core::result<std::vector<std::uint8_t>> read_file(const std::string& path);
// The same with another bound; an error says "exceeds LIMIT_NAME of N bytes (LIMIT_SOURCE)".
core::result<std::vector<std::uint8_t>> read_file_bounded(const std::string& path, std::uint64_t limit,
                                                          const std::string& limit_name, const std::string& limit_source);
// Returns true in *changed when the file was (re)written. What `path` is decides how: a regular file
// (or none) is replaced atomically as above; a symbolic link to a regular file keeps the link and
// replaces the file it names; a character device or FIFO (/dev/null, /dev/stdout, a named pipe) is
// opened and written to, never replaced or read; a directory, a dangling link or any other type is an
// error naming the path.
core::status write_file_atomic(const std::string& path, core::byte_span bytes, bool* changed = nullptr);
// The input that is the output's regular file itself (a second name of it counts: a hard link, a
// symlink, "./x"), or "" when none is: writing the output would replace that input (before,
// `fatpack pack -o x.cubin x.cubin` replaced the cubin with the package made of it).
std::string input_named_by_output(const std::string& output, const std::vector<std::string>& inputs);
// One path component made from outside text (a module or package name): letters, digits, '.', '_',
// '+', '-' kept, every other byte '_' (so no '/', NUL or control byte), never "", "." or ".." and
// never starting with '.' (no hidden files). Different names may map to one component: callers that
// need uniqueness add their own part.
std::string safe_file_component(const std::string& text);

}  // namespace fatpack::tool
