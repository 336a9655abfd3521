#include "response_file.hpp"

#include "file_io.hpp"

namespace fatpack::tool {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct expander {
  std::vector<std::string> out;
  bool after_dashes = false;  // a `--` was seen: the rest is nvcc's, taken as is
  std::size_t files_read = 0;

  core::status add(const std::string& word, bool literal, int depth, const std::string& from) {
    if (out.size() >= max_response_words)
      return core::make_error(core::errc::invalid_argument,
                              from + ": the command line expands to more than " + std::to_string(max_response_words) +
                                  " arguments");
    if (after_dashes || literal || word.empty() || word[0] != '@') {
      if (word == "--") after_dashes = true;
      out.push_back(word);
      return {};
    }
    const std::string path = word.substr(1);
    if (path.empty())
      return core::make_error(core::errc::invalid_argument, from + ": '@' without a file name (a response file is @FILE)");
    if (depth >= max_response_depth)
      return core::make_error(core::errc::invalid_argument,
                              "@" + path + ": response files nest more than " + std::to_string(max_response_depth) +
                                  " deep (does a file name itself?), reached from " + from);
    if (files_read >= max_response_files)
      return core::make_error(core::errc::invalid_argument,
                              "@" + path + ": the command line reads more than " + std::to_string(max_response_files) +
                                  " response files, reached from " + from);
    ++files_read;
    auto bytes = read_file_bounded(path, max_response_file_size, "the response file size limit", "built in");
    if (!bytes)
      return core::make_error(core::errc::invalid_argument, "response file @" + bytes.error().message);
    const std::string text(bytes->begin(), bytes->end());
    if (text.find('\0') != std::string::npos)
      return core::make_error(core::errc::invalid_argument, "response file @" + path + ": holds a NUL byte (not a text file)");
    std::vector<bool> literal_words;
    auto words = split_response_text(text, "response file @" + path, &literal_words);
    if (!words) return words.error();
    for (std::size_t i = 0; i < words->size(); ++i)
      if (auto st = add((*words)[i], literal_words[i], depth + 1, "response file @" + path); !st) return st;
    return {};
  }
};

}  // namespace

core::result<std::vector<std::string>> split_response_text(const std::string& text, const std::string& source,
                                                           std::vector<bool>* literal) {
  std::vector<std::string> words;
  std::vector<bool> quoted_words;
  std::string word;
  bool in_word = false, quoted = false;
  auto finish = [&] {
    if (!in_word) return;
    words.push_back(word);
    quoted_words.push_back(quoted);
    word.clear();
    in_word = quoted = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) {
      finish();
      continue;
    }
    in_word = true;
    if (c == '\\') {
      quoted = true;
      if (i + 1 < text.size()) word += text[++i];
      continue;
    }
    if (c == '\'' || c == '"') {
      quoted = true;
      const std::size_t open = i;
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (c == '"' && text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) ++i;
        word += text[i];
      }
      if (i >= text.size())
        return core::make_error(core::errc::invalid_argument, source + ": unterminated " +
                                                                  std::string(c == '"' ? "double" : "single") +
                                                                  " quote at byte " + std::to_string(open));
      continue;
    }
    word += c;
  }
  finish();
  if (literal) *literal = std::move(quoted_words);
  return words;
}

core::result<std::vector<std::string>> expand_response_files(const std::vector<std::string>& args) {
  expander e;
  for (const auto& a : args)
    if (auto st = e.add(a, false, 0, "the command line"); !st) return st.error();
  return std::move(e.out);
}

}  // namespace fatpack::tool
