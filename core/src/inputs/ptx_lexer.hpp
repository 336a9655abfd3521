// The PTX lexer the PTX readers share (ptx.cpp: the header parser; ptx_split.cpp: the module
// splitter); private to core. One lexer, so that both readers agree on what a comment, a string
// literal and a name are.
#pragma once

#include <cstddef>
#include <string_view>

namespace fatpack::core::detail {

inline bool ptx_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

struct token {
  // `string` only from a lexer made with yield_strings (the quotes are part of the text).
  enum kind_t { end, word, punct, string, bad } kind = end;
  std::string_view text;  // a view into the lexed text (empty at `end`)
  std::size_t line = 1;
};

// Yields words (identifiers, directives, numbers such as 9.0), single punctuation characters and
// `end`. Comments are skipped and offered to `on_comment`; string literals are skipped unless the
// lexer was made with yield_strings. Every token's text points into the lexed text, so a reader can
// take byte ranges from it. Linear in the text: each byte is looked at a bounded number of times.
class lexer {
 public:
  explicit lexer(std::string_view text, bool yield_strings = false) : s_(text), yield_strings_(yield_strings) {}

  template <class F>
  token next(F&& on_comment) {
    for (;;) {
      while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r' || s_[pos_] == '\n' ||
                                  s_[pos_] == '\f' || s_[pos_] == '\v')) {
        if (s_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= s_.size()) return {token::end, {}, line_};
      const char c = s_[pos_];
      if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/') {
        const std::size_t eol = s_.find('\n', pos_);
        const std::size_t stop = eol == std::string_view::npos ? s_.size() : eol;
        on_comment(s_.substr(pos_ + 2, stop - pos_ - 2));
        pos_ = stop;
        continue;
      }
      if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '*') {
        const std::size_t close = s_.find("*/", pos_ + 2);
        const std::size_t stop = close == std::string_view::npos ? s_.size() : close + 2;
        const std::string_view body = s_.substr(pos_, stop - pos_);
        for (char ch : body) line_ += ch == '\n';
        on_comment(body);
        if (close == std::string_view::npos) return {token::bad, "unterminated /* comment", line_};
        pos_ = stop;
        continue;
      }
      if (c == '"') {
        std::size_t i = pos_ + 1;
        while (i < s_.size() && s_[i] != '"' && s_[i] != '\n') i += s_[i] == '\\' ? 2 : 1;
        if (i >= s_.size() || s_[i] != '"') return {token::bad, "unterminated string literal", line_};
        const std::size_t start = pos_;
        pos_ = i + 1;
        if (yield_strings_) return {token::string, s_.substr(start, pos_ - start), line_};
        continue;  // strings (only in .file / pragmas) carry nothing the header parser needs
      }
      if (ptx_word_char(c)) {
        const std::size_t start = pos_;
        while (pos_ < s_.size() && ptx_word_char(s_[pos_])) ++pos_;
        return {token::word, s_.substr(start, pos_ - start), line_};
      }
      ++pos_;
      return {token::punct, s_.substr(pos_ - 1, 1), line_};
    }
  }
  token next() {
    return next([](std::string_view) {});
  }
  // Bytes consumed so far (the end of the last token returned).
  std::size_t position() const { return pos_; }

 private:
  std::string_view s_;
  bool yield_strings_ = false;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

}  // namespace fatpack::core::detail
