#include "tool.hpp"

#include "file_io.hpp"

#include "fatpack/core/hex.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <unistd.h>

namespace fatpack::tool {

std::string printable(const std::string& s) { return fatpack::core::terminal_text(s); }

namespace {

// Every message line by line through printable(): a file name, an environment value or a tool's
// output quoted in an error could otherwise write terminal escapes; the line breaks of a multi-line
// message (nvcc's output) stay.
void print_lines(const char* prefix, const std::string& message) {
  std::string out = prefix;
  std::size_t at = 0;
  for (;;) {
    const std::size_t nl = message.find('\n', at);
    out += printable(message.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    out += '\n';
    at = nl + 1;
  }
  std::cerr << out << "\n";
}

}  // namespace

void print_error(const std::string& message) { print_lines("fatpack: error: ", message); }
void print_warning(const std::string& message) { print_lines("fatpack: warning: ", message); }
bool stderr_is_terminal() { return ::isatty(2) == 1; }

std::vector<std::string>& passthrough_args() {
  static std::vector<std::string> args;
  return args;
}

std::vector<std::string> list_items(const std::vector<std::string>& occurrences) {
  std::vector<std::string> items;
  for (const auto& o : occurrences) {
    std::size_t start = 0;
    while (start <= o.size()) {
      const std::size_t comma = std::min(o.find(',', start), o.size());
      if (comma > start) items.push_back(o.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return items;
}

const CLI::Validator& whole_number() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        const bool negative = text.size() > 1 && text[0] == '-' && text.find_first_not_of("0123456789", 1) == std::string::npos;
        return digits || negative ? std::string() : "'" + text + "' is not a whole number";
      },
      "INT");
  return v;
}

void require_output_not_input(const std::string& output, const std::vector<std::string>& inputs) {
  if (const std::string same = input_named_by_output(output, inputs); !same.empty())
    throw usage_error{"-o " + output + " is the input " + same + ": writing it would replace the input"};
}

CLI::Validator not_empty(std::string instead) {
  return CLI::Validator(
      [instead](std::string& text) -> std::string {
        return text.empty() ? "is empty (an unset variable?): " + instead : std::string();
      },
      "");
}

std::string count_of(std::uint64_t n, std::string_view singular, std::string_view plural) {
  return std::to_string(n) + " " + std::string(n == 1 ? singular : plural);
}

std::string nearest_name(std::string_view word, const std::vector<std::string>& names) {
  // Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
  // neighbours ("buidl" -> "build" is 1).
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  std::string best;
  std::size_t best_d = 3;  // at most 2
  for (const auto& n : names) {
    const std::size_t d = distance(word, n);
    if (d < best_d && d < word.size()) {
      best_d = d;
      best = n;
    }
  }
  return best;
}

std::string human_size(std::uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1u << 20));
  }
  return buf;
}

core::result<package_file> load_package_file(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return std::move(bytes).error();
  package_file pf;
  pf.path = path;
  pf.bytes = std::move(bytes).value();
  const core::byte_span all(pf.bytes);
  // Only an ELF file (executable, shared library, object) or an ar archive is searched for embedded
  // packages. Anything else is a package file and goes through the runtime's own walker, so that
  // `verify` accepts exactly what add_package_file accepts: a package file whose first magic is
  // damaged is an error, not a "host binary" whose second package happens to validate.
  auto starts_with = [&](const char* magic, std::size_t n) { return all.size >= n && std::memcmp(all.data, magic, n) == 0; };
  const bool host_binary = starts_with("\x7f" "ELF", 4) || starts_with("!<arch>\n", 8) || starts_with("!<thin>\n", 8);
  if (!host_binary) {
    if (!starts_with(reinterpret_cast<const char*>(core::package_magic), sizeof core::package_magic))
      return core::make_error(all.size < sizeof core::package_magic ? core::errc::truncated : core::errc::bad_magic,
                              path + (all.size == 0 ? ": empty file"
                                                    : ": not a fatpack package and embeds none (no package magic at "
                                                      "offset 0, and not an ELF file or ar archive)"));
    auto pkgs = core::parse_packages(all, path);
    if (!pkgs) return std::move(pkgs).error();
    pf.packages = std::move(pkgs).value();
    return pf;
  }
  // A host binary: look inside (an executable, object or archive that embeds packages). Sections
  // are not trusted (PIE executables may carry zeroed records); the magic and a valid header are.
  std::vector<core::error> skipped;
  const auto offsets = core::find_embedded_packages(all, &skipped);
  if (offsets.empty()) {
    if (!skipped.empty())
      return core::make_error(skipped.front().reason, path + ": holds a damaged package at " + skipped.front().message);
    return core::make_error(core::errc::bad_magic, path + ": not a fatpack package and embeds none");
  }
  pf.embedded = true;
  for (const std::uint64_t off : offsets) {
    auto pv = core::package_view::parse(all.subspan(std::size_t(off), std::size_t(all.size - off)), path + "+" + core::hex(off));
    if (!pv) return std::move(pv).error();
    pf.packages.push_back(std::move(pv).value());
  }
  if (auto st = core::check_unique_names(pf.packages); !st) return st.error();
  return pf;
}

}  // namespace fatpack::tool
