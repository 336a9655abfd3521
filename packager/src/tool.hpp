// Shared plumbing of the `fatpack` subcommands: diagnostics, exit codes, loading packages.
//
// Conventions (docs/cli.md): results on stdout, diagnostics on stderr as `fatpack: error: ...` /
// `fatpack: warning: ...`; exit 0 ok, 1 failure, 2 usage.
#pragma once

#include "fatpack/admin/cache_admin.hpp"

#include "fatpack/core/error.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/package.hpp"
#include "fatpack/error.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::tool {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

// Text from outside (a cache path from the environment, names from a package, an entry's key texts)
// as the terminal gets it: control characters (C0, DEL, C1) and malformed UTF-8 as '?', so it cannot
// write escape sequences or fake lines.
std::string printable(const std::string& s);

void print_error(const std::string& message);
void print_warning(const std::string& message);
bool stderr_is_terminal();

// A usage error found after parsing (e.g. a bad --gpu value): the message is printed like a CLI11
// error and the tool exits 2.
struct usage_error {
  std::string message;
};
// Throws usage_error when the output is one of the inputs (file_io.hpp, input_named_by_output): a
// command that writes it would replace that input. Call it before any other work.
void require_output_not_input(const std::string& output, const std::vector<std::string>& inputs);

// The packages of one input file: a package file (possibly several concatenated) or a host
// executable / object / archive that embeds packages (found by magic). Owns the bytes.
struct package_file {
  std::string path;
  std::vector<std::uint8_t> bytes;
  std::vector<core::package_view> packages;
  bool embedded = false;  // found inside a host binary
};
core::result<package_file> load_package_file(const std::string& path);

// Each subcommand registers itself and returns the function that runs it after parsing.
using command_runner = std::function<int()>;
command_runner add_build_command(CLI::App& app);
command_runner add_pack_command(CLI::App& app);
command_runner add_inspect_command(CLI::App& app);
command_runner add_verify_command(CLI::App& app);
command_runner add_extract_command(CLI::App& app);
command_runner add_plan_command(CLI::App& app);
command_runner add_embed_command(CLI::App& app);
command_runner add_export_fatbin_command(CLI::App& app);
command_runner add_cache_command(CLI::App& app);
command_runner add_warm_command(CLI::App& app);
command_runner add_doctor_command(CLI::App& app);
command_runner add_link_lto_command(CLI::App& app);
command_runner add_split_ptx_command(CLI::App& app);

// --path DIR of `cache ...` and `warm` (default: the runtime's per-user cache directory), and the
// absolute directory it names.
void add_cache_path_option(CLI::App& cmd, std::string& path);
std::string cache_dir_argument(const std::string& path);
// The fleet cache options shared by `cache push`, `cache pull` and `warm --push` (docs/cli.md): the
// signing key, the opt-in for an unsigned remote, credentials, CA bundle, timeouts.
void add_remote_options(CLI::App& cmd, fatpack::detail::cache::remote_settings& o);
// `fatpack cache pull --remote URL [--path DIR] [--target ...] PACKAGE...` (cmd_warm.cpp).
int run_cache_pull(const std::string& path, const std::vector<std::string>& targets,
                   const std::vector<std::string>& packages, const fatpack::detail::cache::remote_settings& remote);

// The items of a repeatable list option: every occurrence, each split at commas, empty items dropped
// (`--gpu sm_86 --gpu sm_90,sm_120` -> sm_86, sm_90, sm_120).
std::vector<std::string> list_items(const std::vector<std::string>& occurrences);

// Arguments after a bare `--` (for `build`: passed to nvcc unchanged).
std::vector<std::string>& passthrough_args();

std::string human_size(std::uint64_t bytes);
// For a whole-number option, checked before its range: "5abc" and "1G" are "not a whole number"
// (before, the range said "not in range 1 to 22" of them; CLI::Number calls them FLOATs).
const CLI::Validator& whole_number();
// For a name or path option: an empty value (an unset shell variable) is refused, not read as "not
// given" (before, `--name ""` gave the default name and `cache clear --path ""` the per-user cache).
CLI::Validator not_empty(std::string instead);

// "1 entry", "3 entries": a count and its noun, singular for exactly 1.
std::string count_of(std::uint64_t n, std::string_view singular, std::string_view plural);
// The name of `names` nearest to `word` (edit distance with transpositions, at most 2 and less than
// the word's length), or "" when none is that near: for "did you mean" hints.
std::string nearest_name(std::string_view word, const std::vector<std::string>& names);
// A runtime error (fatpack/error.hpp) as one diagnostic: its message, then the JIT log if any.
std::string runtime_error_text(const fatpack::error& e);  // "1.2 MiB"

}  // namespace fatpack::tool
