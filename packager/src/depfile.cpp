#include "depfile.hpp"

#include "file_io.hpp"
#include "tool.hpp"

#include <set>

namespace fatpack::tool {

std::vector<std::string> parse_make_prerequisites(const std::string& text) {
  std::vector<std::string> deps;
  std::string word;
  bool in_word = false, in_prerequisites = false;
  auto finish = [&] {
    if (!in_word) return;
    if (in_prerequisites) {
      deps.push_back(word);
    } else if (!word.empty() && word.back() == ':') {
      // "target:" ends the targets; nvcc writes "target : deps" (a lone colon word).
      in_prerequisites = true;
    }
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      // A run of n backslashes: before a space or tab, 2k+1 give k backslashes and a space in the
      // word, 2k give k and end the word; before '#' the last one escapes it; before a line end an
      // odd run continues the line; anywhere else they are ordinary characters.
      std::size_t j = i;
      while (j < text.size() && text[j] == '\\') ++j;
      const std::size_t n = j - i;
      const char next = j < text.size() ? text[j] : '\0';
      const bool crlf = next == '\r' && j + 1 < text.size() && text[j + 1] == '\n';
      in_word = true;
      if (next == ' ' || next == '\t') {
        word.append(n / 2, '\\');
        if (n % 2) {
          word += next;
          i = j;
        } else {
          i = j - 1;
        }
      } else if (next == '#') {
        word.append(n - 1, '\\');
        word += '#';
        i = j;
      } else if ((next == '\n' || crlf) && n % 2) {
        word.append(n - 1, '\\');
        if (n == 1) in_word = !word.empty();
        finish();
        i = j + (crlf ? 1 : 0);
      } else {
        word.append(n, '\\');
        i = j - 1;
      }
      continue;
    }
    if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      word += '$';
      in_word = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      finish();
      continue;
    }
    if (c == '\n') {
      finish();
      in_prerequisites = false;  // the next line is a new rule
      continue;
    }
    word += c;
    in_word = true;
  }
  finish();
  return deps;
}

namespace {

core::result<std::string> escape_path(const std::string& path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '\n' || c == '\r' || c == '\0')
      return core::make_error(core::errc::invalid_argument,
                              "cannot write a depfile: the path '" + path + "' holds a line break or NUL byte");
    if (c == ' ' || c == '\t') {
      // Backslashes right before the space are doubled, so that they stay backslashes.
      std::size_t k = out.size();
      while (k > 0 && out[k - 1] == '\\') --k;
      out.append(out.size() - k, '\\');
      out += '\\';
      out += c;
    } else if (c == '#') {
      out += "\\#";
    } else if (c == '$') {
      out += "$$";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

core::result<std::string> make_depfile_text(const std::string& target, const std::vector<std::string>& prerequisites) {
  auto t = escape_path(target);
  if (!t) return t.error();
  std::string text = *t + ":";
  for (const auto& p : prerequisites) {
    auto e = escape_path(p);
    if (!e) return e.error();
    text += " \\\n  " + *e;
  }
  return text + "\n";
}

int write_build_depfile(const std::string& depfile, const std::string& output,
                        const std::vector<std::string>& nvcc_depfiles) {
  std::vector<std::string> all;
  std::set<std::string> seen;
  for (const auto& d : nvcc_depfiles) {
    auto bytes = read_file(d);
    if (!bytes) {
      print_error("--depfile: nvcc wrote no dependency file: " + bytes.error().message);
      return exit_failure;
    }
    for (auto& p : parse_make_prerequisites(std::string(bytes->begin(), bytes->end())))
      if (seen.insert(p).second) all.push_back(std::move(p));
  }
  auto text = make_depfile_text(output, all);
  if (!text) {
    print_error("--depfile " + depfile + ": " + text.error().message);
    return exit_failure;
  }
  if (auto st = write_file_atomic(depfile, core::byte_span(reinterpret_cast<const std::uint8_t*>(text->data()), text->size()));
      !st) {
    print_error(st.error().message);
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace fatpack::tool
