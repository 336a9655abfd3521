// The source cache's manifest (docs/nvrtc.md "The key"): NVRTC has no dependency output (13.0 refuses
// -M, -MD, -MF), so, as ccache does without one, fatpack finds the files a program may include
// itself: every `#include "x"` / `#include <x>` (include_names: any spelling) of the source, of the headers given as
// contents and, recursively, of every file found, is looked up in every include path and in the
// including text's directory (a file's; the program name's; a given header name's). That is a superset of what the preprocessor
// reads (conditional includes count, every path that has the name counts), and each file's content
// hash goes into the key: an edited header is a different key, a miss. Headers NVRTC has built in
// (cuda_fp16.h, ...) and headers given as contents are not looked up on disk: the compiler identity
// and the contents cover them.
//
// Hostile input: the scan is bounded (files, bytes per file, bytes in all, include name length);
// symlink loops and unreadable or special files are recorded by name and state, never followed
// or read; a file is scanned once per real directory it is reached through (by real paths), so
// include cycles and directory symlink loops end. When a bound is hit
// the manifest is incomplete and the result is not cached (complete = false, `problem` says why).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fatpack::detail {

struct include_limits {
  std::size_t max_files = 1024;
  std::uint64_t max_file_bytes = std::uint64_t(16) << 20;
  std::uint64_t max_total_bytes = std::uint64_t(256) << 20;
  std::size_t max_name_bytes = 4096;
};

struct manifest_file {
  std::string path;     // as found: include path + "/" + name
  std::string state;    // "<xxh3 hex>:<size>", or "unreadable: <why>"
};

struct include_manifest {
  std::vector<manifest_file> files;  // in the order found (deterministic for the same inputs)
  bool complete = true;
  std::string problem;               // why not complete
  // The preprocessor's clock in a scanned text (note_clock_macros). __TIME__: where it was first
  // found ("__TIME__ in <file>"); the code may differ with every compile, so it is not cached.
  // __DATE__: the key holds the day.
  std::string time_macro;
  bool date_macro = false;
  // One line per file ("path=state"), what the key hashes.
  std::string text() const;
};

// The include names of `text` (both forms), each once, in the order found: every spelling NVRTC reads
// as an include (#include, #include_next, #import; # or the digraph %: or the trigraph ??=; comments
// around the words, line splices anywhere, read both with and without spaces after the backslash),
// and the names __has_include / __has_include_next ask about. Read as bytes; a name with a NUL, a
// newline or over `max_name` bytes is skipped. A superset: an include in an #if 0 or a block comment
// counts.
std::vector<std::string> include_names(std::string_view text, std::size_t max_name);

// Notes in `m` the clock macros `text` (named `label` in the report) spells out: the words __TIME__
// and __DATE__ anywhere (comments and strings count), also across line splices. Not a superset:
// a name made by token pasting (a##b) is seen only by the preprocessor. scan_includes runs it on
// every text it reads; the caller runs it on the options and name expressions.
void note_clock_macros(std::string_view text, const std::string& label, include_manifest& m);

// Scans `source` and the `headers` (name, contents) for includes found along `include_paths`, and,
// as NVRTC looks them up, in the directory of `program_name` for the source's (the working directory
// for a bare name; "" for none) and in that of each header's name for its includes. `pre_includes`
// (--pre-include files) are looked up in the working directory and the include paths.
include_manifest scan_includes(std::string_view source, const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::vector<std::string>& include_paths, const include_limits& limits = {},
                               const std::string& program_name = {},
                               const std::vector<std::string>& pre_includes = {});

}  // namespace fatpack::detail
