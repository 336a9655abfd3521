// The include scan (include_scan.hpp).
#include "jit/include_scan.hpp"

#include "platform/os.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/hex.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <algorithm>
#include <memory>
#include <set>

#include <sys/stat.h>

namespace fatpack::detail {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

std::string include_manifest::text() const {
  std::string t;
  for (const auto& f : files) t += f.path + "=" + f.state + "\n";
  return t;
}

namespace {

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Reads the include names of one text whose line splices are already joined (or not: the caller
// scans each form). Every line start is tried; a block comment before or inside a directive is
// skipped, even one spanning lines. Linear: the end of the next "*/" is remembered, so a text of
// unterminated comment openers is not searched to its end from every line.
class name_reader {
 public:
  name_reader(std::string_view t, std::size_t max_name, std::vector<std::string>& out)
      : t_(t), max_(max_name), out_(out) {}

  void run() {
    std::size_t p = 0;
    while (p < t_.size()) {
      directive(p);
      const std::size_t nl = t_.find('\n', p);
      if (nl == std::string_view::npos) break;
      p = nl + 1;
    }
    // __has_include("x") / __has_include_next(<x>) anywhere: whether x exists decides the program.
    for (std::size_t at = find_has_include(0); at != std::string_view::npos; at = find_has_include(at + 1)) {
      std::size_t i = at + 13;
      if (t_.substr(i, 5) == "_next") i += 5;
      if (i < t_.size() && is_ident(t_[i])) continue;
      i = skip_blank(i, false);
      if (i >= t_.size() || t_[i] != '(') continue;
      name_at(skip_blank(i + 1, false));
    }
  }

 private:
  // The next "__has_include" at or after `from` (Boyer-Moore-Horspool: identifiers with '_' are
  // everywhere, so a search by the first character stops at most of them).
  std::size_t find_has_include(std::size_t from) const {
    static constexpr std::string_view k = "__has_include";
    static const std::boyer_moore_horspool_searcher<std::string_view::const_iterator> searcher(k.begin(), k.end());
    if (from >= t_.size()) return std::string_view::npos;
    const auto it = std::search(t_.begin() + from, t_.end(), searcher);
    return it == t_.end() ? std::string_view::npos : static_cast<std::size_t>(it - t_.begin());
  }

  // Past spaces and block comments (and newlines too when `newlines`); a comment without an end
  // ends the text.
  std::size_t skip_blank(std::size_t i, bool newlines) {
    while (i < t_.size()) {
      if (is_space(t_[i]) || (newlines && t_[i] == '\n')) {
        ++i;
      } else if (t_[i] == '/' && i + 1 < t_.size() && t_[i + 1] == '*') {
        if (close_ != std::string_view::npos && close_ < i + 2) close_ = t_.find("*/", i + 2);
        if (close_ == std::string_view::npos) return t_.size();
        i = close_ + 2;
      } else {
        break;
      }
    }
    return i;
  }

  void directive(std::size_t i) {
    i = skip_blank(i, false);
    if (t_.substr(i, 1) == "#") i += 1;
    else if (t_.substr(i, 2) == "%:") i += 2;  // the digraph
    else if (t_.substr(i, 3) == "?""?=") i += 3;  // the trigraph (C++11/14 modes)
    else return;
    i = skip_blank(i, false);
    std::size_t w = i;
    while (w < t_.size() && is_ident(t_[w])) ++w;
    const std::string_view word = t_.substr(i, w - i);
    if (word != "include" && word != "include_next" && word != "import") return;
    name_at(skip_blank(w, false));
  }

  void name_at(std::size_t i) {
    if (i >= t_.size() || (t_[i] != '"' && t_[i] != '<')) return;  // a macro include: not followed
    const char close = t_[i] == '"' ? '"' : '>';
    const std::size_t nl = t_.find('\n', i + 1);
    const std::size_t stop = t_.find(close, i + 1);
    if (stop == std::string_view::npos || (nl != std::string_view::npos && stop > nl)) return;
    const std::string_view name = t_.substr(i + 1, stop - i - 1);
    if (name.empty() || name.size() > max_ || name.find('\0') != std::string_view::npos) return;
    out_.emplace_back(name);
  }

  std::string_view t_;
  std::size_t max_;
  std::vector<std::string>& out_;
  std::size_t close_ = 0;  // the next "*/" at or after the last search (npos: none)
};

// The next backslash or '?' at or after `from` (npos: none). A plain loop: string_view::find_first_of
// calls memchr once per character of the text.
std::size_t next_special(std::string_view text, std::size_t from) {
  for (std::size_t i = from; i < text.size(); ++i)
    if (text[i] == '\\' || text[i] == '?') return i;
  return std::string_view::npos;
}

// `text` with its line splices joined: a backslash, then (when `lenient`) spaces or tabs, then a
// newline. The trigraph ??/ is a backslash too.
std::string joined(std::string_view text, bool lenient) {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;  // text[..copied) is in `out`
  for (std::size_t i = next_special(text, 0); i != std::string_view::npos; i = next_special(text, i + 1)) {
    std::size_t j = i + 1;
    if (text[i] == '?') {
      if (text.substr(i, 3) != "?""?/") continue;
      j = i + 3;
    }
    if (lenient)
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j < text.size() && text[j] == '\r') ++j;
    if (j < text.size() && text[j] == '\n') {  // the splice is dropped
      out.append(text.data() + copied, i - copied);
      copied = j + 1;
      i = j;
    }
  }
  out.append(text.data() + copied, text.size() - copied);
  return out;
}

// Whether `text` may have a line splice: a backslash followed by spaces or tabs and a newline, or
// the trigraph ??/ anywhere. Most headers have backslashes (in strings, in macros) and no splice;
// memchr and memmem, since this runs over every file on every call.
bool has_splice(std::string_view text) {
  if (text.empty()) return false;  // (an empty view may have no data: memchr must not see null)
  const char* const end = text.data() + text.size();
  for (const char* p = text.data(); (p = static_cast<const char*>(std::memchr(p, '?', std::size_t(end - p))));) {
    if (end - p >= 3 && p[1] == '?' && p[2] == '/') return true;
    ++p;
  }
  for (const char* p = text.data(); (p = static_cast<const char*>(std::memchr(p, '\\', std::size_t(end - p))));) {
    ++p;
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p < end && *p == '\r') ++p;
    if (p < end && *p == '\n') return true;
  }
  return false;
}

// memmem, as has_splice: this runs over every scanned text on every call, hits included, and is
// about twice as fast as string_view::find for words that start with the common '_'.
bool contains(std::string_view text, std::string_view word) {
  return !text.empty() && ::memmem(text.data(), text.size(), word.data(), word.size()) != nullptr;
}

void note_clock_words(std::string_view text, const std::string& label, include_manifest& m) {
  if (!m.date_macro && contains(text, "__DATE__")) m.date_macro = true;
  // (NVRTC 13.0 has no __TIMESTAMP__: a program that uses it does not compile.)
  if (m.time_macro.empty() && contains(text, "__TIME__")) m.time_macro = "__TIME__ in " + label;
}

// Calls read() on the text as written and, where it has a line splice, on both joined readings. A
// splice may be anywhere, even inside "include" or __TI\<newline>ME__; whether a backslash followed
// by spaces before the newline is one is the compiler's choice, so the text is read both ways (a
// superset). One has_splice and one join per reading, whatever read() looks for.
template <class Read>
void each_reading(std::string_view text, Read read) {
  read(text);
  if (!has_splice(text)) return;
  for (bool lenient : {false, true}) {
    const std::string j = joined(text, lenient);
    read(std::string_view(j));
  }
}

// Each name once, in the order first found.
std::vector<std::string> unique_in_order(std::vector<std::string> found) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (auto& n : found)
    if (seen.insert(n).second) names.push_back(std::move(n));
  return names;
}

}  // namespace

void note_clock_macros(std::string_view text, const std::string& label, include_manifest& m) {
  each_reading(text, [&](std::string_view t) { note_clock_words(t, label, m); });
}

std::vector<std::string> include_names(std::string_view text, std::size_t max_name) {
  std::vector<std::string> found;
  each_reading(text, [&](std::string_view t) { name_reader(t, max_name, found).run(); });
  return unique_in_order(std::move(found));
}

include_manifest scan_includes(std::string_view source, const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::vector<std::string>& include_paths, const include_limits& limits,
                               const std::string& program_name, const std::vector<std::string>& pre_includes) {
  include_manifest m;
  std::set<std::string> given;
  for (const auto& h : headers) given.insert(h.first);
  std::set<std::string> seen_paths, seen_real;
  // Work: (text to scan, directory of the file it came from or "" for the caller's texts).
  struct pending {
    std::shared_ptr<const std::vector<std::uint8_t>> bytes;  // null: the caller's text below
    std::string_view text;
    std::string dir;  // "" for none
    std::vector<std::string> names;  // the names to look up instead of the text's (pre-includes)
    std::string label;               // what the text is, for the report: "the source", a name, a path
  };
  std::deque<pending> work;
  // NVRTC looks a quoted include up first in the directory of the including text's name: for the
  // source, the program name's (the working directory for a bare name), for a header given as
  // contents, its name's, for a file, the file's.
  work.push_back({nullptr, source, program_name.empty() ? std::string() : dir_of(program_name), {}, "the source"});
  for (const auto& h : headers) work.push_back({nullptr, h.second, dir_of(h.first), {}, "header " + h.first});
  // --pre-include files: looked up in the working directory, then the include paths.
  if (!pre_includes.empty()) work.push_back({nullptr, {}, ".", pre_includes, {}});
  std::uint64_t total = 0;
  auto stop = [&](std::string why) {
    m.complete = false;
    m.problem = std::move(why);
  };
  while (!work.empty() && m.complete) {
    pending item = std::move(work.front());
    work.pop_front();
    // One pass over the text's readings for both its includes and the clock macros.
    std::vector<std::string> found;
    each_reading(item.text, [&](std::string_view t) {
      note_clock_words(t, item.label, m);
      if (item.names.empty()) name_reader(t, limits.max_name_bytes, found).run();
    });
    const std::vector<std::string> names = item.names.empty() ? unique_in_order(std::move(found)) : item.names;
    for (const std::string& name : names) {
      if (given.count(name)) continue;  // given as contents: its text is scanned and hashed already
      std::vector<std::string> dirs;
      if (!item.dir.empty()) dirs.push_back(item.dir);
      dirs.insert(dirs.end(), include_paths.begin(), include_paths.end());
      if (!name.empty() && name.front() == '/') dirs.assign(1, std::string());
      for (const auto& d : dirs) {
        std::string path = d.empty() ? name : d + "/" + name;
        if (!seen_paths.insert(path).second) continue;
        struct stat st{};
        if (::stat(path.c_str(), &st) != 0) {
          // Absent: the usual case (another include path has it, or NVRTC has it built in). A
          // symlink loop or a permission problem is recorded: if it changes, the key changes.
          if (errno == ENOENT || errno == ENOTDIR) continue;
          m.files.push_back({path, std::string("unreadable: ") + std::strerror(errno)});
          continue;
        }
        if (!S_ISREG(st.st_mode)) {
          if (!S_ISDIR(st.st_mode)) m.files.push_back({path, "not a regular file"});
          continue;
        }
        if (m.files.size() >= limits.max_files) {
          stop("more than " + std::to_string(limits.max_files) + " files reachable through #include");
          break;
        }
        if (std::uint64_t(st.st_size) > limits.max_file_bytes) {
          stop(path + " is " + std::to_string(st.st_size) + " bytes, more than the scan's limit of " +
               std::to_string(limits.max_file_bytes));
          break;
        }
        std::string why;
        auto bytes = os::read_file(path, limits.max_file_bytes, why);
        if (!bytes) {
          m.files.push_back({path, "unreadable: " + why});
          continue;
        }
        total += bytes->size();
        if (total > limits.max_total_bytes) {
          stop("more than " + std::to_string(limits.max_total_bytes) + " bytes reachable through #include");
          break;
        }
        m.files.push_back({path, core::hex16(core::xxh3(core::byte_span(bytes->data(), bytes->size()))) + ":" +
                                     std::to_string(bytes->size())});
        // Scan each real file once per real directory it was reached through: include cycles, several
        // names for one file and directory symlink loops end here, while a file reached through a
        // symlink in another directory is scanned there too (NVRTC looks its quoted includes up in
        // the directory it reached the file through, not the file's real one).
        auto real_of = [](const std::string& p) {
          std::string real = p;
          if (char* r = ::realpath(p.c_str(), nullptr)) {
            real = r;
            std::free(r);
          }
          return real;
        };
        if (!seen_real.insert(real_of(path) + std::string(1, '\0') + real_of(dir_of(path))).second) continue;
        std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
        work.push_back({bytes, text, dir_of(path), {}, path});
      }
      if (!m.complete) break;
    }
  }
  return m;
}

}  // namespace fatpack::detail
